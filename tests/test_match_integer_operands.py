"""Structural pairs of integer tensors (shape computations, indices) must be one function of the data: the
same op, the same integer constants at the same operands, and computed operands that are paired (or, unpaired,
one function in turn). GPT-2's [batch, seq, 128] Reshape target was paired with the other export's
[-1, seq, 128] and reported as where the error starts, though every float value agreed."""

import numpy as np
import onnx
from onnx import TensorProto as T, helper, numpy_helper

from onnxprobe.match.engine import match
from onnxprobe.match.observe import observe


def _model(which: str, prefix: str = "") -> onnx.ModelProto:
    i = lambda n, v: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    p = lambda n: prefix + n  # noqa: E731
    idx, pieces = ("i0", [p("u"), "k"]) if which == "a" else ("i1", ["k", p("u")])  # [batch, -1] / [-1, width]
    nodes = [helper.make_node("Shape", ["x"], [p("s")]), helper.make_node("Gather", [p("s"), idx], [p("g")], axis=0),
             helper.make_node("Unsqueeze", [p("g"), "ax"], [p("u")]), helper.make_node("Concat", pieces, [p("c")], axis=0),
             helper.make_node("Reshape", ["x", p("c")], [p("r")]), helper.make_node("Relu", [p("r")], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2, 4])],
                          [i("i0", 0), i("i1", 1), i("ax", [0]), i("k", [-1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m)


def _pairs(a, b):
    m = match(observe(a).observables, observe(b).observables)
    return {(p.a.name, p.b.name) for p in m.pairs}, m


def test_integer_tensors_of_other_operands_are_not_paired_structurally():
    pairs, m = _pairs(_model("a"), _model("b", "b_"))
    # Gather(s, 0) is no Gather(s, 1), Concat(batch, -1) no Concat(-1, width); nor what reads them (the Unsqueeze)
    assert not pairs & {("g", "b_g"), ("u", "b_u"), ("c", "b_c")}
    assert {("s", "b_s"), ("r", "b_r"), ("y", "y")} <= pairs  # the float values, and Shape(x), stay paired
    why = {u.obs.name: u for u in m.unmatched_a}
    assert {"g", "u", "c"} <= set(why)
    assert all(why[n].cause == "different-function" for n in ("g", "u", "c"))
    assert "b_g" in why["g"].reason and "1" in why["g"].reason and "0" in why["g"].reason
    assert "b_g" in why["u"].reason  # the Unsqueeze: what it reads is no counterpart of what b_u reads


def test_integer_tensors_of_one_function_stay_paired():
    pairs, m = _pairs(_model("a"), _model("a", "b_"))
    assert {("s", "b_s"), ("g", "b_g"), ("u", "b_u"), ("c", "b_c"), ("r", "b_r"), ("y", "y")} <= pairs
    assert not m.unmatched_a and not m.unmatched_b
