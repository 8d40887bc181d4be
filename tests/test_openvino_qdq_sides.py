"""A QDQ model against itself on OpenVINO: --opt-level is A's onnxruntime setting (B on another runtime
takes none)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError

pytest.importorskip("openvino")
pytestmark = pytest.mark.openvino


@pytest.fixture(scope="module")
def qdq(tmp_path_factory):
    from quantize_fixtures import quantize

    return quantize("cnn", "qdq", tmp_path_factory.mktemp("q"))


def openvino_int_layers(path) -> int:
    """Compute layers OpenVINO CPU compiled into integer precisions, asked of OpenVINO directly."""
    import openvino as ov

    cm = ov.Core().compile_model(str(path), "CPU")
    skip = {"Parameter", "Result", "Constant", "Reorder", "FakeQuantize"}
    return sum(1 for op in cm.get_runtime_model().get_ordered_ops()
               if op.get_rt_info()["layerType"].astype(str) not in skip
               and op.get_rt_info()["runtimePrecision"].astype(str) in ("u8", "i8"))


def test_opt_level_is_sides_a_and_b_on_another_runtime_does_not_inherit_it(qdq, tmp_path):
    res = api.diff(qdq, vs_runtime="openvino", config=api.RunConfig(opt_level="extended"))
    assert res.a.runner.config.opt_level == "extended" and res.b.runner.kind == "openvino"
    assert res.b.runner.facts()["opt_level"] is None
    from conftest import sample_path

    ref = api.diff(sample_path("cnn"), vs_reference=True, config=api.RunConfig(opt_level="extended"))
    assert ref.a.runner.config.opt_level == "extended" and ref.b.runner.kind == "onnx.reference"
    r = CliRunner().invoke(app, ["diff", str(qdq), "--vs-runtime", "openvino", "--opt-level", "extended",
                                 "--json", str(tmp_path / "d.json")])
    assert r.exit_code in (0, 1) and "does not take one" not in r.output, r.output
    # a runtime that takes no opt level still refuses one given to it
    with pytest.raises(UsageError, match="opt-level extended"):
        api.diff(qdq, runtime="openvino", vs_runtime="ort", config=api.RunConfig(opt_level="extended"))
