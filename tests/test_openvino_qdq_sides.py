"""A QDQ model against itself on OpenVINO: --opt-level is A's onnxruntime setting (B on another runtime
takes none), and the "measured" header says per side what ran, OpenVINO's integer kernels judged by
OpenVINO itself (the compiled model's runtime precisions, read here directly)."""

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
    with pytest.raises(UsageError, match=r"opt-level\)? extended"):
        api.diff(qdq, runtime="openvino", vs_runtime="ort", config=api.RunConfig(opt_level="extended"))


def test_measured_says_per_side_that_openvino_ran_integer_kernels(qdq):
    ints = openvino_int_layers(qdq)
    assert ints > 0  # the fixture really runs deployed on OpenVINO
    res = api.diff(qdq, vs_runtime="openvino")
    a, b = res.measured.split("; B ")
    assert a.startswith("A simulated") and "--opt-level extended" in a, res.measured
    assert b.startswith("deployed: OpenVINO's integer kernels") and "--opt-level" not in b, res.measured
    both = api.diff(qdq, vs_runtime="openvino", config=api.RunConfig(opt_level="extended"))
    assert both.measured.startswith("A deployed: onnxruntime's int8 kernels") and "B deployed: OpenVINO" in both.measured
    # a QDQ model on OpenVINO against a float model: A's label alone, deployed, no opt-level advice
    from conftest import sample_path

    alone = api.diff(qdq, sample_path("cnn"), runtime="openvino")
    assert alone.measured.startswith("deployed: OpenVINO's integer kernels") and "opt-level" not in alone.measured


def test_a_dataset_measured_on_other_workers_says_what_their_runners_ran(qdq, tmp_path, monkeypatch):
    """On Ray each batch runs in an actor's own runners and this process's never run: the header must
    come from what ran there (it said "simulated" for OpenVINO's integer kernels). The actor is emulated
    here: every batch is measured by a worker rebuilt from the model's path, as an actor builds it."""
    import numpy as np

    import importlib

    dd = importlib.import_module("onnxprobe.api.diff_dataset")

    class Elsewhere:
        def __init__(self, worker):
            self.plan = worker.plan

        def __call__(self):
            f = dd.DiffWorkerFactory(str(qdq), None, None, None, "openvino", None, None, self.plan.tolerance, None, None,
                                     True, None, True, shapes=self.plan.input_shapes)
            return dd.DiffWorker(*f.plan())

    monkeypatch.setattr(dd, "_Here", Elsewhere)
    for k in range(2):
        np.savez(tmp_path / f"b{k}.npz", image=np.random.default_rng(k).random((1, 3, 32, 32), dtype=np.float32))
    res = api.diff_dataset(qdq, inputs=tmp_path, vs_runtime="openvino")
    assert "B deployed: OpenVINO's integer kernels" in res.measured, res.measured


def test_introduced_error_cones_run_on_b_do_not_reset_what_b_ran(qdq, tmp_path):
    """With --all B's float nodes get A's values (the introduced-error cones), run by B's OpenVINO runner:
    those small float models have no integer kernel, and the header said B was "simulated" after them."""
    import onnx
    from onnx import helper

    m = onnx.load(str(qdq))  # a float layer beside the quantized ones: its cone has no integer kernel
    m.graph.node.append(helper.make_node("Tanh", [m.graph.input[0].name], ["side"], name="float_side"))
    m.graph.output.append(helper.make_tensor_value_info("side", onnx.TensorProto.FLOAT, None))
    path = tmp_path / "tail.onnx"
    onnx.save(m, str(path))
    assert openvino_int_layers(path) > 0
    res = api.diff(path, vs_runtime="openvino", selection=api.Selection(all=True))
    assert any(r.introduced is not None for r in res.results)  # a cone did run on B
    assert "B deployed: OpenVINO's integer kernels" in res.measured, res.measured
    assert res.b.runner.integer_kernels(), res.b.runner.layer_precisions
