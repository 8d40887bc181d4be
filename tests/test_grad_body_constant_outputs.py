"""grad moves the float Constants of If / Loop / Scan bodies to the main graph (autodiff/hoist.py); one a
body returns as it is (onnx's test_if: each branch is one Constant) then became an outer-scope value
returned directly, which onnxruntime refuses ('Subgraph output ... is an outer scope value being returned
directly'): grad failed on a model onnxruntime runs. Oracle: L = sum(If(c, then=[1, 2, 3], else=w * x)),
so dL/dthen_c = 1 where c holds, and dL/dw = x where it does not."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as H
from onnx import numpy_helper

from onnxprobe import api

X = np.array([0.5, -2.0, 3.0], np.float32)
W = np.array([1.5, 2.5, -1.0], np.float32)


def _model(path):
    then_body = H.make_graph([H.make_node("Constant", [], ["then_c"], value=numpy_helper.from_array(
        np.array([1.0, 2.0, 3.0], np.float32), "then_c"))], "then", [], [H.make_tensor_value_info("then_c", T.FLOAT, [3])])
    else_body = H.make_graph([H.make_node("Constant", [], ["else_w"], value=numpy_helper.from_array(W, "else_w")),
                              H.make_node("Mul", ["else_w", "x"], ["else_y"])], "else", [],
                             [H.make_tensor_value_info("else_y", T.FLOAT, [3])])
    g = H.make_graph([H.make_node("If", ["c"], ["y"], then_branch=then_body, else_branch=else_body)], "g",
                     [H.make_tensor_value_info("c", T.BOOL, []), H.make_tensor_value_info("x", T.FLOAT, [3])],
                     [H.make_tensor_value_info("y", T.FLOAT, [3])])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))


@pytest.mark.parametrize("cond", [True, False])
def test_a_branch_returning_a_constant_is_differentiated(tmp_path, cond):
    path = tmp_path / "if.onnx"
    _model(path)
    before = path.read_bytes()
    r = api.grad(path, api.Selection(all=True), None, api.GradSpec(), inputs={"c": np.array(cond), "x": X}, save=True)
    assert r.loss == pytest.approx(6.0 if cond else float(np.sum(W * X)), rel=1e-6)
    np.testing.assert_allclose(r.arrays["then_c"], np.ones(3) if cond else np.zeros(3))
    np.testing.assert_allclose(r.arrays["else_w"], np.zeros(3) if cond else X, rtol=1e-6)
    assert path.read_bytes() == before
