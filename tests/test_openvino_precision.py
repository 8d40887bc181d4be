"""The precision OpenVINO reports for a compiled model: EXECUTION_MODE_HINT=ACCURACY and
INFERENCE_PRECISION_HINT=undefined compile with no inference precision (the property reads back the
'dynamic' type): the model computes in its own types, which reports show as no precision (null), as for
onnxruntime, never as a precision named 'dynamic'. Skipped without the openvino extra."""

from __future__ import annotations

import pytest

from conftest import sample_feeds, sample_path
from onnxprobe import api

pytest.importorskip("openvino")
pytestmark = pytest.mark.openvino


@pytest.mark.parametrize("options", [{"EXECUTION_MODE_HINT": "ACCURACY"}, {"INFERENCE_PRECISION_HINT": "undefined"}])
def test_no_inference_precision_is_the_models_own_types(options):
    res = api.layers(sample_path("cnn"), runtime="openvino", runtime_options=options)
    assert res.info.precision is None
    assert not any("dynamic" in n for n in res.notes), res.notes
    d = api.diff(sample_path("cnn"), vs_runtime="openvino", runtime_options=options,
                 inputs=api.InputSpec(arrays=sample_feeds("cnn")))
    assert d.b.runner.inference_precision() is None and "dynamic" not in d.b.runner.describe()
    assert not any("dynamic" in n for n in d.notes), d.notes


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("command", ["layers", "diff"])
def test_a_key_given_plain_and_with_its_runtime_prefix_with_two_values_is_refused(order, command):
    """KEY=f32 and openvino:KEY=bf16 both reach OpenVINO: the one given last won, silently (as KEY given twice
    with two values is refused, so is this)."""
    from onnxprobe.errors import UsageError

    items = [("INFERENCE_PRECISION_HINT", "f32"), ("openvino:INFERENCE_PRECISION_HINT", "bf16")]
    options = dict(items[::-1] if order else items)
    run = (lambda: api.layers(sample_path("cnn"), runtime="openvino", runtime_options=options)) if command == "layers" else (
        lambda: api.diff(sample_path("cnn"), vs_runtime="openvino", runtime_options=options))
    with pytest.raises(UsageError, match="INFERENCE_PRECISION_HINT.*two values for openvino"):
        run()


@pytest.mark.parametrize("hint", ["f32", "bf16"])
def test_the_layers_table_says_the_precision_openvino_compiled(hint, tmp_path):
    """diff's labels say it ('OpenVINO CPU, f32'); the layers table said nothing where no note was due."""
    import json

    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    out = tmp_path / "l.json"
    r = CliRunner().invoke(app, ["layers", str(sample_path("cnn")), "--runtime", "openvino", "--runtime-option",
                                 f"INFERENCE_PRECISION_HINT={hint}", "--json", str(out)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    compiled = json.loads(out.read_text())["precision"]
    r = CliRunner().invoke(app, ["layers", str(sample_path("cnn")), "--runtime", "openvino", "--runtime-option",
                                 f"INFERENCE_PRECISION_HINT={hint}"], env={"COLUMNS": "200"})
    footer = [ln for ln in r.stdout.splitlines() if "runtime openvino" in ln]
    assert footer and f"precision {compiled}" in footer[0], r.stdout


def _near_silent_sigmoid(path):
    """Sigmoid of values near -18 (a MatMul of about 1000, a constant subtracted): every output is below 1e-7.
    OpenVINO's Sigmoid differs there from onnxruntime's by ~4e-8 even in f32 (-1.8 dB): noise near zero."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    r = np.random.default_rng(0)
    x = (1 + 0.001 * r.standard_normal((4, 16))).astype(np.float32)
    w = (62.5 + 0.01 * r.standard_normal((16, 16))).astype(np.float32)
    c = np.float32((x @ w).mean() + 18)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Sub", ["m", "c"], ["z"]),
                           helper.make_node("Sigmoid", ["z"], ["y"])], "silent",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
                          [numpy_helper.from_array(w, "W"), numpy_helper.from_array(np.array(c), "c")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return x


@pytest.mark.parametrize("hint", ["f32", "bf16"])
def test_a_near_silent_tensor_passes_in_reduced_precision_as_in_f32(hint, tmp_path):
    """The default across runtimes lets a near-silent tensor through by max|a-b| <= 1e-6 (rounding noise near
    zero); in bf16 the default had no such floor, so the same 4e-8 of noise failed the output there while
    f32 passed it. Oracle: onnxruntime and OpenVINO called directly, max|a-b| in numpy float64."""
    import numpy as np

    from openvino_oracle import openvino_values, ort_values

    path = tmp_path / "silent.onnx"
    x = _near_silent_sigmoid(path)
    options = {"INFERENCE_PRECISION_HINT": hint}
    res = api.diff(str(path), vs_runtime="openvino", runtime_options=options, selection=api.Selection(all=True),
                   inputs=api.InputSpec(arrays={"x": x}))
    if res.b.runner.inference_precision() != hint:
        pytest.skip(f"OpenVINO's CPU here does not compute in {hint}")
    a = ort_values(path, ["y"], {"x": x})["y"].astype(np.float64)
    b = openvino_values(path, ["y", "z", "m"], {"x": x}, options)["y"].astype(np.float64)
    assert np.abs(b).max() < 1e-6 and np.abs(a - b).max() < 1e-6  # near-silent, and its noise under the floor
    y = next(r for r in res.results if r.pair.a.name == "y")
    assert y.metrics.max_abs < 1e-6 and y.passed, (res.criterion, y.metrics.max_abs, y.metrics.sqnr_db)
    assert res.verdict()[0] == "pass", res.criterion
