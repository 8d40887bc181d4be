"""A float64 model on OpenVINO: its CPU plugin computes it in float32, which a note says (in layers and in
diff's report), against numpy float64 of the same inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe import api
from onnxprobe.cli.main import app

pytest.importorskip("openvino")
pytestmark = pytest.mark.openvino
NOTE = "computes float64 tensors in float32"


def f64_model(n: int):
    return make_model([helper.make_node("Mul", ["x", "k"], ["m"], name="mul"), helper.make_node("Add", ["m", "x"], ["a"], name="add")],
                      [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [n])],
                      [helper.make_tensor_value_info("a", TensorProto.DOUBLE, [n])],
                      [numpy_helper.from_array(np.array(3.0), "k")])


def test_a_float64_model_on_openvino_says_it_ran_in_float32(tmp_path):
    n = 1000
    x = 1e8 + np.random.default_rng(0).standard_normal(n)
    want = 4 * x  # numpy float64: a = 3x + x
    res = api.layers(f64_model(n), api.Selection(all=True), inputs={"x": x}, runtime="openvino")
    assert any(NOTE in note for note in res.notes), res.notes
    # why it is said: the float32 values have lost the spread numpy float64 keeps
    assert abs(res.stats["a"].std - want.std()) > 0.5 * want.std()
    p = tmp_path / "m.onnx"
    import onnx

    onnx.save(f64_model(n), str(p))
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "d.json"
    r = CliRunner().invoke(app, ["diff", str(p), "--vs-runtime", "openvino", "--input", f"x={tmp_path / 'x.npy'}", "--json", str(out)])
    assert r.exit_code in (0, 1), r.output
    assert any(NOTE in note for note in json.loads(out.read_text())["notes"]), r.output


def test_a_float32_model_gets_no_such_note():
    m = f64_model(16)
    for vi in list(m.graph.input) + list(m.graph.output):
        vi.type.tensor_type.elem_type = TensorProto.FLOAT
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.array(3.0, np.float32), "k"))
    res = api.layers(m, api.Selection(all=True), runtime="openvino")
    assert not any(NOTE in note for note in res.notes), res.notes


@pytest.mark.parametrize("device", ["AUTO:CPU", "HETERO:CPU", "MULTI:CPU"])
def test_a_virtual_device_running_on_the_cpu_says_it_too(device):
    """The note was keyed on --device starting with CPU: AUTO:CPU and HETERO:CPU run the same CPU plugin (their
    compiled model's EXECUTION_DEVICES) and lost the same precision, without a word."""
    x = 1e8 + np.random.default_rng(0).standard_normal(16)
    res = api.layers(f64_model(16), api.Selection(all=True), inputs={"x": x}, runtime="openvino",
                     config=api.RunConfig(device=device))
    assert any(NOTE in note for note in res.notes), res.notes


SATURATES = "saturates"


def _cast_model(path) -> str:
    """float32 x cast to float64, then squared: an infinity of x is one of the float64 tensors."""
    import onnx

    onnx.save(make_model([helper.make_node("Cast", ["x"], ["d"], name="cast", to=TensorProto.DOUBLE),
                          helper.make_node("Mul", ["d", "d"], ["y"], name="sq")],
                         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                         [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [4])]), str(path))
    return str(path)


def _diff_notes(tmp_path, x: np.ndarray, flags: list[str]) -> tuple[int, list[str]]:
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "d.json"
    r = CliRunner().invoke(app, ["diff", _cast_model(tmp_path / "m.onnx"), *flags, "--all",
                                 "--input", f"x={tmp_path / 'x.npy'}", "--json", str(out)])
    assert r.exit_code in (0, 1), r.output
    return r.exit_code, json.loads(out.read_text())["notes"]


@pytest.mark.parametrize("flags", [["--runtime", "openvino", "--vs-runtime", "ort"], ["--vs-runtime", "openvino"]])
def test_an_infinity_openvino_casts_to_float64_is_said_to_saturate(tmp_path, flags):
    """OpenVINO computes float64 in float32 and saturates: Cast(+-inf) to float64 gives +-3.4e38, finite, where
    onnx.reference (the oracle) gives +-inf; the diff's NaN/Inf mismatch is explained by the float64 note."""
    from onnx.reference import ReferenceEvaluator

    x = np.float32([1, -np.inf, np.inf, 2])
    want = ReferenceEvaluator(_cast_model(tmp_path / "ref.onnx")).run(None, {"x": x})[0]
    assert np.isinf(want).any()  # the oracle's side holds infinities
    code, notes = _diff_notes(tmp_path, x, flags)
    assert code == 1  # the mismatch fails, as it should
    said = [n for n in notes if NOTE in n]
    assert len(said) == 1 and SATURATES in said[0] and "3.4e+38" in said[0], notes


def test_finite_float64_values_get_the_plain_note(tmp_path):
    """The same model on finite inputs: the float64 note, without the saturation (no noise)."""
    code, notes = _diff_notes(tmp_path, np.float32([1, -3, 3, 2]), ["--vs-runtime", "openvino"])
    said = [n for n in notes if NOTE in n]
    assert len(said) == 1 and SATURATES not in said[0], notes
