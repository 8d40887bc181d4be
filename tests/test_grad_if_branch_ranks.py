"""An If whose branches return tensors of different ranks (onnx's AffineGrid function, expanded: a start of
shape [1] in one branch, a scalar in the other): the backward pass of the branch not taken was built for its
own output's rank, while onnxruntime's type inference gives its seed, the If output's gradient, the rank of
the branch taken: a ReduceSum over axis 0 of a scalar, and the backward graph failed to load ('axis must be in
[-rank, rank-1]. Input rank was 0') on a model onnxruntime runs. Oracle: L = sum(If(c, a + [0.5], 2 a)),
dL/da = 1 where c holds, 2 where it does not."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as H
from onnx import numpy_helper

from onnxprobe import api


def _model(path, dims):
    half = H.make_node("Constant", [], ["half"], value=numpy_helper.from_array(np.array([0.5], np.float32), "half"))
    two = H.make_node("Constant", [], ["two"], value=numpy_helper.from_array(np.float32(2), "two"))
    then_body = H.make_graph([half, H.make_node("Add", ["a", "half"], ["t"])], "t", [],
                             [H.make_tensor_value_info("t", T.FLOAT, dims)])
    else_body = H.make_graph([two, H.make_node("Mul", ["a", "two"], ["e"])], "e", [],
                             [H.make_tensor_value_info("e", T.FLOAT, [])])
    g = H.make_graph([H.make_node("If", ["c"], ["y"], then_branch=then_body, else_branch=else_body)], "g",
                     [H.make_tensor_value_info("c", T.BOOL, []), H.make_tensor_value_info("a", T.FLOAT, [])],
                     [H.make_tensor_value_info("y", T.FLOAT, None)])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))


@pytest.mark.parametrize("dims", [[1], ["n"]])  # the branch's shape known, or its rank only
@pytest.mark.parametrize("cond", [True, False])
def test_branches_of_other_ranks_are_differentiated(tmp_path, cond, dims):
    path = tmp_path / "if.onnx"
    _model(path, dims)
    from onnx.reference import ReferenceEvaluator
    y = ReferenceEvaluator(str(path)).run(None, {"c": np.array(cond), "a": np.float32(1.5)})[0]
    assert np.shape(y) == ((1,) if cond else ())
    r = api.grad(path, api.Selection(all=True), None, api.GradSpec(),
                 inputs={"c": np.array(cond), "a": np.array(1.5, np.float32)}, save=True)
    np.testing.assert_allclose(r.arrays["a"], 1.0 if cond else 2.0, rtol=1e-6)


def _squeeze_model(path):
    """y = If(c, Squeeze(x * x, axis 1), x * x): x [N, C, W] (C == 1 where c holds, as AffineGrid's expanded
    function squeezes a 2d grid's depth axis); w an initializer read in both branches."""
    one = numpy_helper.from_array(np.array([1], np.int64), "one")
    then_body = H.make_graph([H.make_node("Squeeze", ["t", "one"], ["ts"]), H.make_node("Mul", ["ts", "w"], ["tt"])],
                             "t", [], [H.make_tensor_value_info("tt", T.FLOAT, None)])
    else_body = H.make_graph([H.make_node("Mul", ["t", "w"], ["e"])], "e", [], [H.make_tensor_value_info("e", T.FLOAT, None)])
    g = H.make_graph([H.make_node("Mul", ["x", "x"], ["t"]),
                      H.make_node("If", ["c"], ["y"], then_branch=then_body, else_branch=else_body)], "g",
                     [H.make_tensor_value_info("c", T.BOOL, []), H.make_tensor_value_info("x", T.FLOAT, ["N", "C", "W"])],
                     [H.make_tensor_value_info("y", T.FLOAT, None)],
                     [one, numpy_helper.from_array(np.float32(3.0), "w")])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))


def test_a_branch_not_taken_that_the_run_shapes_contradict(tmp_path):
    """onnx's AffineGrid 3d function, expanded: grad --all failed 'Squeeze ... Dimension of input 1 must be 1
    instead of 4' inside an If. The run's shapes declared for the feed ([2, 4, 5, 6, 3] for the 3d grid)
    reached the branch not taken, whose Squeeze of axis 1 holds only for a 2d grid; onnxruntime type-checks
    both branches when it loads the graph. Oracle: L = sum(3 x^2), dL/dx = 6 x."""
    path = tmp_path / "if.onnx"
    _squeeze_model(path)
    x = np.arange(24, dtype=np.float32).reshape(2, 4, 3) / 10
    res = api.grad(str(path), api.Selection(all=True), inputs={"c": np.array(False), "x": x}, save=True)
    np.testing.assert_allclose(res.arrays["x"], 6 * x, rtol=1e-6)
