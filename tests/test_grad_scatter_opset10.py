"""Scatter (opsets 9 and 10, ScatterElements' old name) has a gradient: the model is converted to opset 17
first (its gradient writes ScatterElements), and the gradients are those of data with the written
positions zeroed and of the updates read back at them (numpy oracle)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api


def test_scatter_opset10_gradient(tmp_path):
    rng = np.random.default_rng(0)
    data = rng.standard_normal((3, 4)).astype(np.float32)
    upd = rng.standard_normal((2, 4)).astype(np.float32)
    idx = np.array([[0, 2, 1, 2], [1, 0, 2, 0]], np.int64)
    g = helper.make_graph([helper.make_node("Scatter", ["data", "i", "upd"], ["y"], axis=0)], "sc",
                          [helper.make_tensor_value_info("data", TensorProto.FLOAT, [3, 4]),
                           helper.make_tensor_value_info("upd", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
                          initializer=[numpy_helper.from_array(idx, "i")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 10)])
    m.ir_version = 6
    path = tmp_path / "sc.onnx"
    onnx.save(m, path)
    dy = rng.standard_normal((3, 4)).astype(np.float32)
    gp = api.grad_plan(api.load(path), api.GradSpec(loss="output-grad", output_grad=dy, wrt=("data", "upd")),
                       feed={"data": data, "upd": upd})
    sess = ort.InferenceSession(gp.backward.model.SerializeToString(), providers=["CPUExecutionProvider"])
    dd, du = sess.run([gp.backward.grads["data"], gp.backward.grads["upd"]], {"data": data, "upd": upd, gp.loss.input: dy})
    want_d = dy.copy()
    want_u = np.zeros_like(upd)
    for r in range(2):
        for c in range(4):
            want_d[idx[r, c], c] = 0
            want_u[r, c] = dy[idx[r, c], c]
    np.testing.assert_array_equal(dd, want_d)
    np.testing.assert_array_equal(du, want_u)
