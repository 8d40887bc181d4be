"""Shape computations folded into constants (graph.shape_values) for shape inference to go on past them:
each folded value against onnx.reference's run of the same model (the oracle), the model left untouched,
and the tensors after a BERT-like position-ids Slice planned onto the host once their shapes are known."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from conftest import make_model
from onnxprobe.graph.shape_values import fold_shape_values
from onnxprobe.graph.shapes import concrete_shapes, shapes_with_folded, with_input_shapes

I64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731


def position_ids_model() -> onnx.ModelProto:
    """A PyTorch-export-like chain: positions = buffer[:, :seq] with seq from Shape(x), embedded and added;
    then a Reshape and an Expand whose shapes are computed from it (Div, Mul, Concat, Cast, Where, Equal,
    Range, ConstantOfShape, ReduceProd, Squeeze, Min, Max along the way)."""
    nodes = [
        helper.make_node("Shape", ["x"], ["sx"]),
        helper.make_node("Gather", ["sx", "one"], ["seq"], axis=0),
        helper.make_node("Unsqueeze", ["seq", "zero1"], ["seq1"]),
        helper.make_node("Slice", ["buffer", "zero1", "seq1", "one1", "one1"], ["pos"]),
        helper.make_node("Gather", ["emb", "pos"], ["pe"], axis=0),
        helper.make_node("Unsqueeze", ["x", "minus1"], ["x3"]),
        helper.make_node("Add", ["x3", "pe"], ["h"]),
        helper.make_node("Shape", ["h"], ["sh"]),
        helper.make_node("Mul", ["sh", "two"], ["double"]),
        helper.make_node("Div", ["double", "two"], ["again"]),
        helper.make_node("Cast", ["again"], ["againf"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["againf"], ["againi"], to=TensorProto.INT64),
        helper.make_node("Equal", ["againi", "sh"], ["same"]),
        helper.make_node("Where", ["same", "sh", "zero3"], ["sh2"]),
        helper.make_node("ReduceProd", ["sh2"], ["total"], keepdims=1),
        helper.make_node("Squeeze", ["total", "zero1"], ["total0"]),
        helper.make_node("Min", ["total0", "big"], ["cap"]),
        helper.make_node("Max", ["cap", "one"], ["cap2"]),
        helper.make_node("Range", ["zero", "cap2", "one"], ["r"]),
        helper.make_node("Shape", ["r"], ["rs"]),
        helper.make_node("Concat", ["rs"], ["flat"], axis=0),
        helper.make_node("Reshape", ["h", "flat"], ["hflat"]),
        helper.make_node("ConstantOfShape", ["sh2"], ["ones"], value=numpy_helper.from_array(np.array([1.0], np.float32))),
        helper.make_node("Expand", ["hflat", "rs"], ["hexp"]),
        helper.make_node("Relu", ["hexp"], ["y"]),
        helper.make_node("Mul", ["h", "ones"], ["z"]),
    ]
    # the small values as Constant nodes, as exporters write them (onnx's inference reads initializers only)
    consts = [I64("one", 1), I64("zero", 0), I64("zero1", [0]), I64("one1", [1]), I64("minus1", [-1]), I64("two", 2),
              I64("zero3", [0, 0, 0]), I64("big", 10**6), I64("buffer", [list(range(64))])]
    nodes = [helper.make_node("Constant", [], [t.name], value=t) for t in consts] + nodes
    inits = [numpy_helper.from_array(np.random.default_rng(0).normal(size=(64, 1)).astype(np.float32), "emb")]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s"])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                       helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], inits)


def test_folded_values_equal_the_reference_run():
    m = position_ids_model()
    before = m.SerializeToString()
    folded = current = with_input_shapes(m, {"x": (1, 12)})
    for _ in range(3):  # as shapes_with_folded does: each round's inference tells the next round's Shapes
        current = fold_shape_values(current, concrete_shapes(current, {"x": (1, 12)}))
        if current is None:
            break
        folded = current
    assert m.SerializeToString() == before  # the input model is never touched
    x = np.random.default_rng(1).normal(size=(1, 12)).astype(np.float32)
    ref = ReferenceEvaluator(m)
    names = [o for n in m.graph.node for o in n.output]
    got = dict(zip(names, ref.run(names, {"x": x})))
    consts = {t.name: numpy_helper.to_array(t) for t in folded.graph.initializer}
    computed = [n for n in names if n in consts and n not in {"one", "zero", "zero1", "one1", "minus1", "two", "zero3", "big", "buffer"}]
    assert {"seq1", "pos", "sh", "double", "again", "sh2", "total0", "cap2", "rs", "flat"} <= set(computed), computed
    for n in computed:
        np.testing.assert_array_equal(consts[n], got[n], err_msg=n)
        assert consts[n].dtype == got[n].dtype, n
    assert "h" not in consts and "y" not in consts  # what depends on the input's values is never computed


def test_shapes_past_the_position_ids_are_known_and_right():
    m = position_ids_model()
    inferred, folded = shapes_with_folded(m, {"x": (2, 12)}, fold=True)
    assert "pos" not in inferred and "pe" not in inferred  # what onnx's inference alone leaves unknown
    x = np.zeros((2, 12), np.float32)
    names = ["pos", "pe", "h", "hflat", "y", "z"]
    want = dict(zip(names, ReferenceEvaluator(m).run(names, {"x": x})))
    for n in names:
        assert {**inferred, **folded}[n] == want[n].shape, n


def test_an_op_outside_the_table_stops_the_folding():
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("CumSum", ["s", "axis"], ["c"]),
             helper.make_node("Reshape", ["x", "c"], ["y"])]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [I64("axis", 0)])
    folded = fold_shape_values(m, {"x": (2, 3)})
    assert folded is not None and {t.name for t in folded.graph.initializer} == {"axis", "s"}
    assert [n.op_type for n in folded.graph.node] == ["CumSum", "Reshape"]


def test_tensors_after_the_position_ids_are_summarised_on_the_host():
    from onnxprobe.graph.model import Model
    from onnxprobe.graph.select import Selection, select
    from onnxprobe.runtime.runners.base import SMALL_ON_HOST
    from onnxprobe.runtime.runners.planning import planned_shapes

    m = Model.of(position_ids_model(), "m").proto
    refs = [r for r in select(m, Selection(all=True)) if r.kind == "node"]
    known, host = planned_shapes(m, refs, {"x": (1, 12)}, *SMALL_ON_HOST)
    assert {"pos", "pe", "h", "hflat"} <= host
    assert "h" not in known  # a row's form is planned only on shapes onnx's own inference gives


def test_a_huge_shape_is_never_allocated():
    """A ConstantOfShape, an Expand or a Range of a computed size past MAX_ELEMENTS is left to inference,
    checked before numpy would allocate it (here 10^10 elements)."""
    nodes = [helper.make_node("Constant", [], ["big"], value=I64("v", [100000, 100000])),
             helper.make_node("ConstantOfShape", ["big"], ["c"]),
             helper.make_node("Constant", [], ["one"], value=I64("w", [1])),
             helper.make_node("Expand", ["one", "big"], ["e"]),
             helper.make_node("Constant", [], ["lim"], value=I64("u", 10**10)),
             helper.make_node("Constant", [], ["z"], value=I64("t", 0)),
             helper.make_node("Constant", [], ["st"], value=I64("s", 1)),
             helper.make_node("Range", ["z", "lim", "st"], ["r"]),
             helper.make_node("Shape", ["x"], ["sx"]), helper.make_node("Reshape", ["x", "sx"], ["y"])]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    folded = fold_shape_values(m, {"x": (2, 3)})
    names = {t.name for t in folded.graph.initializer}
    assert "sx" in names and not names & {"c", "e", "r"}
