"""An If whose condition is a constant and whose branch not taken holds another If on a value computed in
that branch (onnx's AffineGrid function, expanded: `If(align_corners == 0)` around `If(D == 1)`): the
backward pass of the inner If reads its condition, saved as an extra output of the outer If, for which the
branch taken returned an empty tensor. onnxruntime's optimizer folds the outer If (its condition is known)
and then refused the inner backward If, whose condition became that empty initializer ('If node condition
initializer ... is expected to have a single boolean element'): grad failed on a model onnxruntime runs.
Oracle: L = sum(2 x) where c holds, sum(3 x) where it does not (x sums above 0): dL/dx = 2 or 3."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as H
from onnx import numpy_helper

from onnxprobe import api

X = np.array([0.5, -2.0, 3.0], np.float32)


def _const(name, value):
    return H.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def _model(path, cond):
    out = lambda n: [H.make_tensor_value_info(n, T.FLOAT, [3])]  # noqa: E731
    inner_then = H.make_graph([_const("three", np.float32(3)), H.make_node("Mul", ["x", "three"], ["it"])], "it", [], out("it"))
    inner_else = H.make_graph([H.make_node("Mul", ["x", "x"], ["ie"])], "ie", [], out("ie"))
    then_body = H.make_graph([_const("two", np.float32(2)), H.make_node("Mul", ["x", "two"], ["ot"])], "ot", [], out("ot"))
    else_body = H.make_graph([_const("axes", np.array([0], np.int64)), _const("zero", np.array([0.0], np.float32)),
                              H.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=1),
                              H.make_node("Greater", ["s", "zero"], ["d"]),  # shape [1], computed in the branch
                              H.make_node("If", ["d"], ["oe"], then_branch=inner_then, else_branch=inner_else)],
                             "oe", [], out("oe"))
    g = H.make_graph([_const("c", np.array(cond)),
                      H.make_node("If", ["c"], ["y"], then_branch=then_body, else_branch=else_body)], "g",
                     [H.make_tensor_value_info("x", T.FLOAT, [3])], [H.make_tensor_value_info("y", T.FLOAT, [3])])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))


@pytest.mark.parametrize("cond", [True, False])
@pytest.mark.parametrize("opt", ["all", "off"])
def test_a_constant_condition_folded_by_onnxruntime_keeps_the_inner_if(tmp_path, cond, opt):
    path = tmp_path / "if.onnx"
    _model(path, cond)
    from onnx.reference import ReferenceEvaluator
    assert np.allclose(ReferenceEvaluator(str(path)).run(None, {"x": X})[0], (2 if cond else 3) * X)
    r = api.grad(path, api.Selection(all=True), api.RunConfig(opt_level=opt), api.GradSpec(), inputs={"x": X}, save=True)
    np.testing.assert_allclose(r.arrays["x"], np.full(3, 2.0 if cond else 3.0), rtol=1e-6)


def test_the_export_runs_in_onnxruntime(tmp_path):
    import onnxruntime as ort
    path, out = tmp_path / "if.onnx", tmp_path / "bw.onnx"
    _model(path, True)
    api.export_backward(api.load(path), out, api.GradSpec(wrt=("x",)))
    s = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    res = dict(zip([o.name for o in s.get_outputs()], s.run(None, {"x": X})))
    np.testing.assert_allclose(res["x_grad"], np.full(3, 2.0), rtol=1e-6)
