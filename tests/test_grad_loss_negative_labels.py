"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss with a negative label that is not ignore_index:
onnxruntime reads it from the end, as its Gather does (-3 of 4 classes is class 1, for the scores and the
class weight alike). The gradient rule matched labels against 0 .. C-1 only, so such a row got no gradient
while the loss depends on it (`grad --check`: x FAIL, relative error 1). Oracle: the loss in float64 numpy
with the labels read the same way, its gradient by hand."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api

C = 4
W = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
T = np.array([0, -3, 1, -1, 2], np.int64)  # -1: class 3, as no ignore_index is -1 here; 2 is ignored below


def _model(op, reduction, path, ignore=None) -> str:
    attrs = {"reduction": reduction} | ({"ignore_index": ignore} if ignore is not None else {})
    g = helper.make_graph([helper.make_node(op, ["x", "t", "w"], ["y"], name="loss", **attrs)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [len(T), C]),
                           helper.make_tensor_value_info("t", TensorProto.INT64, [len(T)])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(W, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)
    return str(path)


def _oracle(op, reduction, x, dy, ignore):
    """(loss, dL/dx, dL/dw) in float64 for L = sum(y * dy)."""
    x = x.astype(np.float64)
    keep = T != ignore
    t = np.where(T < 0, T + C, T)
    lse = np.log(np.exp(x - x.max(1, keepdims=True)).sum(1)) + x.max(1)
    lp = x if op == "NegativeLogLikelihoodLoss" else x - lse[:, None]
    wt = W.astype(np.float64)[t] * keep
    picked = lp[np.arange(len(T)), t]
    l = -wt * picked
    if reduction == "mean":
        y, dl = l.sum() / wt.sum(), np.full(len(T), dy / wt.sum())
    else:
        y, dl = l.sum(), np.full(len(T), float(dy))
    glp = np.zeros_like(x)
    glp[np.arange(len(T)), t] = -wt * dl
    dw = np.zeros(C)
    np.add.at(dw, t[keep], (-picked * dl - (y * dl if reduction == "mean" else 0))[keep])
    dx = glp if op == "NegativeLogLikelihoodLoss" else glp - np.exp(lp) * glp.sum(1, keepdims=True)
    return y, dx, dw


@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("ignore", [None, 2])
def test_negative_labels_are_read_from_the_end(op, reduction, ignore, tmp_path):
    path = _model(op, reduction, tmp_path / "loss.onnx", ignore)
    x = np.random.default_rng(0).standard_normal((len(T), C)).astype(np.float32)
    dy = np.array(1.5, np.float32)
    y, dx, dw = _oracle(op, reduction, x, dy, ignore)
    assert np.isclose(ort.InferenceSession(path).run(None, {"x": x, "t": T})[0], y, rtol=1e-5)  # the runtime's reading
    gp = api.grad_plan(api.load(path), api.GradSpec(loss="output-grad", output_grad=dy, wrt=("x", "w")),
                       feed={"x": x, "t": T})
    sess = ort.InferenceSession(gp.backward.model.SerializeToString(), providers=["CPUExecutionProvider"])
    gx, gw = sess.run([gp.backward.grads["x"], gp.backward.grads["w"]], {"x": x, "t": T, gp.loss.input: dy})
    np.testing.assert_allclose(gx, dx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gw, dw, rtol=1e-5, atol=1e-6)
