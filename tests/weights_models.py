"""The model both tests of weights left in their files build (tests/test_weights_left_in_files.py: external data;
tests/test_inline_weights_left.py: inside the .onnx file): x [2, 64] -> MatMul W1 -> Tanh -> MatMul W2 -> Add B -> y,
and the same Tanh -> MatMul by W3 (float16, cast) -> v. W1, W2 and W3 are big enough to be left, B is not."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model


def three_matmuls(w1, w2, w3, b) -> onnx.ModelProto:
    """The model, its initializers W1, W2 (a TensorProto, or an array), W3 and B in that order."""
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"], name="mm1"), helper.make_node("Tanh", ["h"], ["t"], name="tanh"),
             helper.make_node("MatMul", ["t", "W2"], ["u"], name="mm2"), helper.make_node("Add", ["u", "B"], ["y"], name="add"),
             helper.make_node("Cast", ["W3"], ["w3"], to=TensorProto.FLOAT, name="cast"),
             helper.make_node("MatMul", ["t", "w3"], ["v"], name="mm3")]
    m = make_model(nodes, [vi("x", TensorProto.FLOAT, [2, 64])],
                   [vi("y", TensorProto.FLOAT, [2, 80]), vi("v", TensorProto.FLOAT, [2, 80])])
    w2 = w2 if isinstance(w2, onnx.TensorProto) else numpy_helper.from_array(w2, "W2")
    m.graph.initializer.extend([numpy_helper.from_array(w1, "W1"), w2, numpy_helper.from_array(w3, "W3"),
                                numpy_helper.from_array(b, "B")])
    return m
