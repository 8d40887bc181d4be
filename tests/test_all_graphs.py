"""One walk of a model's graphs (``graph.walk.all_graphs``): the main graph, then each If / Loop / Scan body in
node order, each before its own bodies. The readers of every graph's initializers, types and names (the
debugger's index, inspect's weights, value_types, all_names, the float64 copy of grad --check) use it."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from onnxprobe.graph.builder import all_names
from onnxprobe.graph.shapes import value_types
from onnxprobe.graph.walk import all_graphs, constant_tensors


def _nested() -> onnx.ModelProto:
    inner = helper.make_graph([helper.make_node("Add", ["x", "ci"], ["yi"])], "inner", [],
                              [helper.make_tensor_value_info("yi", TensorProto.FLOAT, [1])],
                              [helper.make_tensor("ci", TensorProto.FLOAT, [1], [3.0])])
    then = helper.make_graph([helper.make_node("If", ["c"], ["yt"], then_branch=inner, else_branch=inner)], "then", [],
                             [helper.make_tensor_value_info("yt", TensorProto.FLOAT, [1])],
                             [helper.make_tensor("ct", TensorProto.FLOAT, [1], [1.0])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["ye"])], "else", [],
                              [helper.make_tensor_value_info("ye", TensorProto.FLOAT, [1])])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)], "main",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1]),
                           helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
                          [helper.make_tensor("w", TensorProto.FLOAT, [1], [2.0])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_every_graph_once_each_before_its_bodies():
    m = _nested()
    assert [g.name for g in all_graphs(m.graph)] == ["main", "else", "then", "inner", "inner"]  # attributes by name


def test_readers_of_every_graph_see_the_bodies():
    m = _nested()
    assert {"w", "ct", "ci"} <= constant_tensors(m)
    assert {"w", "ct", "ci", "yi", "yt", "ye", "y"} <= all_names(m)
    assert {"w", "ct", "ci", "yi", "yt", "ye"} <= set(value_types(m))


def test_all_types_reads_a_constant_in_every_form():
    """``graph.summary.all_types`` reads a Constant's type through ``graph.constants`` (value, value_float(s),
    value_int(s)), not its own read of ``value`` alone: an uninferred value_ints Constant had no type."""
    from onnxprobe.graph.summary import all_types

    body = helper.make_graph([helper.make_node("Constant", [], ["k"], value_ints=[1, 2, 3]),
                              helper.make_node("Identity", ["k"], ["ko"])], "b", [],
                             [helper.make_tensor_value_info("ko", TensorProto.INT64, None)])
    g = helper.make_graph([helper.make_node("Constant", [], ["f"], value_float=2.0),
                           helper.make_node("Constant", [], ["t"], value=helper.make_tensor("t", TensorProto.FLOAT16, [2], [1, 2])),
                           helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body)], "main",
                          [helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    types = all_types(helper.make_model(g))
    got = {n: (types[n].tensor_type.elem_type, [d.dim_value for d in types[n].tensor_type.shape.dim]) for n in "ftk"}
    assert got == {"f": (TensorProto.FLOAT, []), "t": (TensorProto.FLOAT16, [2]), "k": (TensorProto.INT64, [3])}
