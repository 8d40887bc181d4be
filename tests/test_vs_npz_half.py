"""`diff --vs-npz` of a float16 model against its own saved tensors: the step that measures the outputs again on
plain runs (``compare.plain_outputs``: onnxruntime's CPU provider rounds a probed float16 tensor otherwise) read
B's model's outputs, and B, saved tensors, has no model: "internal error: AttributeError". Oracle: numpy, on the
values onnx.reference computes."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from onnxprobe import api


def _model():
    g = helper.make_graph([helper.make_node("MatMul", ["X", "W"], ["y"], name="mm"), helper.make_node("Relu", ["y"], ["z"], name="relu")],
                          "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT16, [2, 3])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT16, [2, 3])],
                          [numpy_helper.from_array(np.arange(-4, 5, dtype=np.float16).reshape(3, 3) / 4, "W")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_a_float16_model_against_its_saved_tensors(tmp_path):
    m = _model()
    onnx.save(m, tmp_path / "m.onnx")
    x = np.array([[1.5, -2.0, 0.25], [3.0, 0.5, -1.0]], np.float16)
    y, z = ReferenceEvaluator(m).run(["y", "z"], {"X": x})
    np.savez(tmp_path / "same.npz", y=y, z=z)
    r = api.diff(tmp_path / "m.onnx", vs_npz=tmp_path / "same.npz", inputs={"X": x})
    rows = {p.pair.a.name: p for p in r.results}
    assert {"y", "z"} <= set(rows) and r.verdict()[0] == "pass", r.notes
    moved = z.copy()
    moved[0, 0] += np.float16(0.5)
    np.savez(tmp_path / "moved.npz", y=y, z=moved)
    r = api.diff(tmp_path / "m.onnx", vs_npz=tmp_path / "moved.npz", inputs={"X": x})
    rows = {p.pair.a.name: p for p in r.results}
    want = float(np.max(np.abs(z.astype(np.float64) - moved.astype(np.float64))))
    assert rows["z"].metrics.max_abs == want and r.verdict()[0] == "fail"
