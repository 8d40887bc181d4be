"""A model of IR version 0 was refused as 'not an ONNX model (no graph or IR version in the file)', although
onnxruntime loads it (and one of IR version -1); onnx.checker refuses it ("does not have an ir_version set
properly"). onnxruntime reads it as an IR version below 4: a weight listed among the graph inputs is no input
a feed overrides. onnxprobe now loads it as onnxruntime does, with a note saying so; a model that gives no IR
version at all, which onnxruntime refuses ("Missing model IR version"), is refused in one line. The oracle:
onnxruntime (conftest's ort_session) and onnx.reference for the values. QA."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper as h, numpy_helper as nh
from onnx.reference import ReferenceEvaluator

from conftest import ort_loads, ort_session
from onnxprobe import api
from onnxprobe.errors import ModelError
from onnxprobe.graph.io import load_model
from onnxprobe.graph.model import load

vi = h.make_tensor_value_info


def _model(ir: int | None) -> onnx.ModelProto:
    """y = Relu(x + W), W a weight listed among the graph inputs; ``ir`` None: no ir_version field at all."""
    w = nh.from_array(np.array([1.0, -3.0], np.float32), "W")
    g = h.make_graph([h.make_node("Add", ["x", "W"], ["s"], name="add"), h.make_node("Relu", ["s"], ["y"], name="relu")], "g",
                     [vi("x", T.FLOAT, [2]), vi("W", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])], [w])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    if ir is None:
        m.ClearField("ir_version")
    else:
        m.ir_version = ir
    return m


def _save(tmp_path, ir) -> str:
    path = str(tmp_path / f"ir{ir}.onnx")
    onnx.save(_model(ir), path)
    return path


@pytest.mark.parametrize("ir", [0, -1])
def test_an_ir_version_onnxruntime_loads_is_loaded_with_a_note(tmp_path, ir):
    path = _save(tmp_path, ir)
    s = ort_session(path)
    assert s is not None, "the oracle: onnxruntime loads it"
    assert [i.name for i in s.get_inputs()] == ["x"], "onnxruntime reads it as IR < 4: W is no input"
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(_model(ir))
    assert load_model(path).ir_version == ir
    notes = load(path).warnings
    assert len(notes) == 1 and f"IR version {ir}" in notes[0] and "below 4" in notes[0], notes
    x = np.array([0.5, 0.5], np.float32)
    res = api.layers(path, api.Selection(all=True), api.RunConfig(device="cpu"), inputs={"x": x}, save=True)
    m = _model(8)
    want = ReferenceEvaluator(m).run(None, {"x": x, "W": nh.to_array(m.graph.initializer[0])})[0]
    assert "IR version" in " ".join(res.plan.warnings), res.plan.warnings
    assert np.array_equal(res.arrays["y"], want), (res.arrays["y"], want)


@pytest.mark.parametrize("command", ["inspect", "layers"])
def test_the_commands_say_the_note(tmp_path, command):
    path = _save(tmp_path, 0)
    out = subprocess.run([sys.executable, "-m", "onnxprobe", command, path, *(["--device", "cpu"] if command == "layers" else [])],
                         capture_output=True, text=True)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert "IR version 0" in out.stderr and "error" not in out.stderr, out.stderr


def test_a_model_without_an_ir_version_is_refused_in_one_line(tmp_path):
    path = _save(tmp_path, None)
    assert not onnx.load(path).HasField("ir_version")
    assert not ort_loads(path), "the oracle: onnxruntime refuses it"
    with pytest.raises(ModelError) as e:
        load_model(path)
    assert "\n" not in str(e.value) and "IR version" in str(e.value), str(e.value)
    out = subprocess.run([sys.executable, "-m", "onnxprobe", "inspect", path], capture_output=True, text=True)
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("onnxprobe: error:")]
    assert out.returncode == 1 and len(errors) == 1 and "Traceback" not in out.stderr, out.stderr
