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
