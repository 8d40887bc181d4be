"""diff --grad where every weight gradient is exactly 0 in both models at the input given (PP-OCRv4 det at its
default 1x1 input: a saturated Sigmoid, a loss of 0, 119 gradients of zeros read "exact, pass"): zeros agreeing
with zeros earn no pass. Oracle: y = relu(x W - 100) with x in [0, 1): every pre-activation is negative, so
dL/dW = x^T (dy * [xW - 100 > 0]) = 0 in exact arithmetic (numpy checks it); where one input makes it positive,
the gradient is real and the verdict is earned again."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api

RNG = np.random.default_rng(3)
W = RNG.uniform(0.5, 1.5, (5, 4)).astype(np.float32)


def _model(path) -> str:
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(np.float32(100), "off")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"), helper.make_node("Sub", ["m", "off"], ["z"], name="sub"),
             helper.make_node("Relu", ["z"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_every_weight_gradient_zero_in_both_models_is_an_error(tmp_path):
    a, b = _model(tmp_path / "a.onnx"), _model(tmp_path / "b.onnx")
    x = RNG.random((3, 5)).astype(np.float32)
    z = x.astype(np.float64) @ W.astype(np.float64) - 100
    assert (z < 0).all()  # the oracle: the gradient is 0
    res = api.diff_grad(a, b, inputs=api.InputSpec(arrays={"x": x}))
    verdict, why = res.verdict()
    assert verdict == "error" and "every weight gradient is 0 in both models" in why, why
    x2 = x.copy()
    x2[0] = 100.0  # one row past the offset: a real gradient, compared and agreeing
    res = api.diff_grad(a, b, inputs=api.InputSpec(arrays={"x": x2}))
    assert res.verdict()[0] == "pass", res.verdict()
