"""A model converted to float16 whose weights are built at load (ConstantOfShape of a stored shape, as the
onnx model zoo's light_* files hold them) and whose float32 bias and inputs were kept: diff judged it by the
float32 allclose rule, its weights and inputs being float32, and failed ordinary float16 rounding (QA: 23 of
light_squeezenet's 27 rows). What it computes is float16: it gets the half-precision criterion."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api


def _model(half: bool) -> onnx.ModelProto:
    dt = np.float16 if half else np.float32
    shape = numpy_helper.from_array(np.array([3, 4], np.int64), "s")
    nodes = [helper.make_node("Constant", [], ["s_c"], value=shape),
             helper.make_node("ConstantOfShape", ["s_c"], ["W"], value=numpy_helper.from_array(np.array([0.37], dt))),
             helper.make_node("MatMul", ["xh" if half else "x", "W"], ["m"], name="mm"),
             helper.make_node("Relu", ["m"], ["r" if half else "y"], name="relu"),
             helper.make_node("Add", ["y", "bias"], ["out"], name="add")]
    if half:
        nodes = [helper.make_node("Cast", ["x"], ["xh"], to=TensorProto.FLOAT16, name="in_cast")] + nodes[:4] + [
            helper.make_node("Cast", ["r"], ["y"], to=TensorProto.FLOAT, name="out_cast")] + nodes[4:]
    bias = numpy_helper.from_array(np.array([0.1, -0.2, 0.3, 0.05], np.float32), "bias")
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 4])], initializer=[bias])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_a_model_computing_in_float16_with_float32_weights_gets_the_half_criterion(tmp_path):
    a, b = tmp_path / "half.onnx", tmp_path / "full.onnx"
    onnx.save(_model(True), str(a))
    onnx.save(_model(False), str(b))
    x = np.array([[0.123, 0.771, 0.305], [0.912, 0.018, 0.649]], np.float32)
    res = api.diff(str(a), str(b), inputs={"x": x})
    # the oracle: float16 rounding of this model's values is ~1e-4 relative (numpy, float64 against float16 steps)
    exact = np.maximum(x.astype(np.float64) @ np.full((3, 4), 0.37), 0) + [0.1, -0.2, 0.3, 0.05]
    rounded = np.maximum(x.astype(np.float16) @ np.full((3, 4), 0.37, np.float16), 0).astype(np.float64) + [0.1, -0.2, 0.3, 0.05]
    assert 1e-5 < np.max(np.abs(rounded - exact) / np.abs(exact)) < 1e-2  # past float32's allclose, far inside 20 dB
    assert res.verdict()[0] == "pass", (res.criterion, res.verdict())
    assert "float16" in res.criterion or "half" in res.criterion, res.criterion
