"""--vs-npz of activations that hold the outputs of A's Constant nodes (every node output saved by one's own
onnxruntime run): each read "no counterpart in A", where A holds it, a constant the selection leaves out. The
reason says so and names --include-constants, which pairs them."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api


def test_saved_constants_are_said_to_be_constants_of_a(tmp_path):
    c = helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.full(4, 2.0, np.float32), "k"))
    m = make_model([c, helper.make_node("Mul", ["x", "k"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    m.graph.output.append(helper.make_tensor_value_info("k", TensorProto.FLOAT, [4]))  # the saving run's own outputs
    onnx.save(m, tmp_path / "m.onnx")
    x = np.arange(4, dtype=np.float32)
    y, k = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"]).run(["y", "k"], {"x": x})
    del m.graph.output[1]
    onnx.save(m, tmp_path / "m.onnx")
    np.savez(tmp_path / "acts.npz", x=x, y=y, k=k)
    res = api.diff(tmp_path / "m.onnx", vs_npz=tmp_path / "acts.npz", selection=api.Selection(all=True))
    (u,) = [u for u in res.matching.unmatched_b if u.obs.name == "k"]
    assert "computed from weights alone" in u.reason and "include_constants" in u.reason, u.reason
    res = api.diff(tmp_path / "m.onnx", vs_npz=tmp_path / "acts.npz", selection=api.Selection(all=True, include_constants=True))
    assert "k" in {r.pair.a.name for r in res.results}
