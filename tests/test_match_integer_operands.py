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
    # the Unsqueeze: it holds another dimension of x than b_u does
    assert "b_u" in why["u"].reason and "dimension 0 of the input x" in why["u"].reason and "dimension 1" in why["u"].reason


def test_integer_tensors_of_one_function_stay_paired():
    pairs, m = _pairs(_model("a"), _model("a", "b_"))
    assert {("s", "b_s"), ("g", "b_g"), ("u", "b_u"), ("c", "b_c"), ("r", "b_r"), ("y", "y")} <= pairs
    assert not m.unmatched_a and not m.unmatched_b


def _dim_model(kind: str, k: int, prefix: str = "") -> onnx.ModelProto:
    """[dim k of x, -1] as the target of x's Reshape, computed as Gather(Shape(x), k) (unsqueezed),
    Shape(x, start=k, end=k + 1) (opset 15) or Slice(Shape(x), [k], [k + 1])."""
    i = lambda n, v: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    p = lambda n: prefix + n  # noqa: E731
    dim = {"gather": [helper.make_node("Shape", ["x"], [p("s")]), helper.make_node("Gather", [p("s"), "i"], [p("g")], axis=0),
                      helper.make_node("Unsqueeze", [p("g"), "ax"], [p("d")])],
           "shape": [helper.make_node("Shape", ["x"], [p("d")], start=k, end=k + 1)],
           "slice": [helper.make_node("Shape", ["x"], [p("s")]), helper.make_node("Slice", [p("s"), "b", "e"], [p("d")])]}[kind]
    nodes = dim + [helper.make_node("Concat", [p("d"), "k"], [p("c")], axis=0),
                   helper.make_node("Reshape", ["x", p("c")], [p("r")]), helper.make_node("Relu", [p("r")], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, ["N", "M"])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)],
                          [i("i", k), i("ax", [0]), i("k", [-1]), i("b", [k]), i("e", [k + 1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m)


def test_shape_computations_of_other_dimensions_are_not_paired_whatever_their_ops():
    # Gather(Shape(x), 0) against dimension 1 of x, however B computes it: the Reshape targets [N, -1] and
    # [M, -1] are other functions of the data, and so are the Gathers' Unsqueezes
    for a_kind, b_kind in (("gather", "shape"), ("gather", "slice"), ("shape", "slice"), ("gather", "gather")):
        pairs, m = _pairs(_dim_model(a_kind, 0), _dim_model(b_kind, 1, "b_"))
        assert ("c", "b_c") not in pairs and ("d", "b_d") not in pairs, (a_kind, b_kind)
        assert ("y", "y") in pairs
        why = {u.obs.name: u for u in m.unmatched_a}
        assert why["c"].cause == "different-function" and "b_c" in why["c"].reason, (a_kind, b_kind, why["c"])
        assert {u.obs.name: u for u in m.unmatched_b}["b_c"].cause == "different-function"


def test_shape_computations_of_one_dimension_stay_paired_whatever_their_ops():
    for k in (0, 1):
        for a_kind, b_kind in (("gather", "shape"), ("gather", "slice"), ("shape", "slice"), ("slice", "slice")):
            pairs, m = _pairs(_dim_model(a_kind, k), _dim_model(b_kind, k, "b_"))
            assert {("c", "b_c"), ("r", "b_r"), ("y", "y")} <= pairs, (k, a_kind, b_kind)
            assert not [u for u in m.unmatched_a + m.unmatched_b if u.cause == "different-function"], (k, a_kind, b_kind)


def _mask_model(which: str, prefix: str = "") -> onnx.ModelProto:
    """x's Reshape to [batch, seq] taken from the mask (Shape(mask, start, end), as the dynamo exporter writes)
    or from x (Unsqueeze(Gather(Shape(x), k)), as the legacy one does): both inputs declare ['batch', 'seq']."""
    i = lambda n, v: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    p = lambda n: prefix + n  # noqa: E731
    if which == "mask":
        dims = [helper.make_node("Shape", ["mask"], [p("d0")], start=0, end=1),
                helper.make_node("Shape", ["mask"], [p("d1")], start=1, end=2)]
    else:
        dims = [helper.make_node("Shape", ["x"], [p("s")])] + [
            n for k in (0, 1) for n in (helper.make_node("Gather", [p("s"), f"i{k}"], [p(f"g{k}")], axis=0),
                                        helper.make_node("Unsqueeze", [p(f"g{k}"), "ax"], [p(f"d{k}")]))]
    nodes = dims + [helper.make_node("Concat", [p("d0"), p("d1")], [p("c")], axis=0),
                    helper.make_node("Relu", ["x"], [p("r")]), helper.make_node("Reshape", [p("r"), p("c")], [p("t")]),
                    helper.make_node("Add", [p("t"), "mask"], ["y"])]
    io = [helper.make_tensor_value_info(n, T.FLOAT, ["batch", "seq"]) for n in ("x", "mask", "y")]
    g = helper.make_graph(nodes, "g", io[:2], io[2:], [i("i0", 0), i("i1", 1), i("ax", [0])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m)


def test_dimensions_the_inputs_declare_alike_are_one_function():
    # [batch, seq] of the mask against [batch, seq] of x: one value for every input the models take, so the
    # Concats pair (they were refused as reading the input mask where the other reads x)
    pairs, m = _pairs(_mask_model("mask"), _mask_model("x", "b_"))
    assert {("c", "b_c"), ("r", "b_r"), ("t", "b_t"), ("y", "y")} <= pairs
    assert not [u for u in m.unmatched_a + m.unmatched_b if u.cause == "different-function"]
