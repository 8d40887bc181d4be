"""Two shape computations of dimensions that the models do not declare alike (tiny BERT: the dynamo export
reads [batch, seq] of attention_mask, the legacy one the dimensions of a LayerNorm output that shape
inference names unk__7, unk__8) are not paired, and the reason says what is known: that they cannot be
told to be one function, their dimensions not being known to be the same. It said they were "another
function of the data", which nothing showed."""

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxprobe.match.engine import DIFFERENT_FUNCTION, match
from onnxprobe.match.observe import observe


def _model(which: str) -> onnx.ModelProto:
    """h = ids * 2 (declared [u7, u8]); y = Relu(Reshape(h, [d0, d1, -1])), the target's dims read from
    the mask's shape (A) or from h's (B)."""
    i = lambda n, v: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    if which == "a":
        dims = [helper.make_node("Shape", ["mask"], ["a_s0"], start=0, end=1),
                helper.make_node("Shape", ["mask"], ["a_s1"], start=1, end=2),
                helper.make_node("Concat", ["a_s0", "a_s1", "m1"], ["a_c"], axis=0)]
        target = "a_c"
    else:
        dims = [helper.make_node("Shape", ["h"], ["b_s"]),
                helper.make_node("Gather", ["b_s", "i0"], ["b_g0"], axis=0),
                helper.make_node("Gather", ["b_s", "i1"], ["b_g1"], axis=0),
                helper.make_node("Unsqueeze", ["b_g0", "ax"], ["b_u0"]),
                helper.make_node("Unsqueeze", ["b_g1", "ax"], ["b_u1"]),
                helper.make_node("Concat", ["b_u0", "b_u1", "m1"], ["b_c"], axis=0)]
        target = "b_c"
    nodes = [helper.make_node("Mul", ["ids", "two"], ["h"]), *dims,
             helper.make_node("Reshape", ["h", target], ["r"]), helper.make_node("Relu", ["r"], ["y"]),
             helper.make_node("Mul", ["h", "mask"], ["z"])]  # both read the mask
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", T.FLOAT, ["batch", "seq"]),
                                       helper.make_tensor_value_info("mask", T.FLOAT, ["batch", "seq"])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None), helper.make_tensor_value_info("z", T.FLOAT, None)],
                          [numpy_helper.from_array(np.array(2, np.float32), "two"), i("m1", [-1]), i("i0", 0), i("i1", 1),
                           i("ax", [0])], value_info=[helper.make_tensor_value_info("h", T.FLOAT, ["u7", "u8"])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m)


def test_dims_not_known_to_be_the_same_are_not_said_to_be_other_functions():
    m = match(observe(_model("a")).observables, observe(_model("b")).observables)
    assert ("a_c", "b_c") not in {(p.a.name, p.b.name) for p in m.pairs}
    why_a = {u.obs.name: u for u in m.unmatched_a}
    why_b = {u.obs.name: u for u in m.unmatched_b}
    for u, other in ((why_a["a_c"], "b_c"), (why_b["b_c"], "a_c")):
        assert u.cause != DIFFERENT_FUNCTION and "another function" not in u.reason, u
        assert other in u.reason and "cannot tell" in u.reason and "not known to be the same" in u.reason, u
    # the mask's 'batch' is the first input's that declares it (ids): one dimension, whichever tensor holds it
    assert "dimension 0 of the input ids (batch)" in why_a["a_c"].reason and "dimension 0 of h (u7)" in why_a["a_c"].reason


def _scaled(which: str) -> onnx.ModelProto:
    """z = Shape(x) * [1, 1] (A) or Shape(x) * Shape(m) (B): a constant where the other computes a tensor,
    which may hold that constant for every input."""
    factor = [helper.make_node("Shape", ["m"], ["f"])] if which == "b" else []
    nodes = [helper.make_node("Shape", ["x"], ["s"]), *factor,
             helper.make_node("Mul", ["s", "f" if which == "b" else "one"], [f"{which}_z"]),
             helper.make_node("Reshape", ["x", f"{which}_z"], ["y"]), helper.make_node("Add", ["x", "m"], ["w"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, T.FLOAT, ["N", "M"]) for n in ("x", "m")],
                          [helper.make_tensor_value_info("y", T.FLOAT, None), helper.make_tensor_value_info("w", T.FLOAT, None)],
                          [numpy_helper.from_array(np.array([1, 1], np.int64), "one")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m)


def test_a_constant_against_a_computed_operand_is_not_said_to_be_another_function():
    m = match(observe(_scaled("a")).observables, observe(_scaled("b")).observables)
    assert ("a_z", "b_z") not in {(p.a.name, p.b.name) for p in m.pairs}
    (u,) = [u for u in m.unmatched_a if u.obs.name == "a_z"]
    assert u.cause != DIFFERENT_FUNCTION and "another function" not in u.reason, u
    assert "cannot tell" in u.reason and "reads the constant [1, 1] as operand 2 where b_z reads a computed tensor" in u.reason, u
