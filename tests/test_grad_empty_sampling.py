"""Gradient rules on empty operands that onnxruntime runs forward: a GridSample with no sample points (a grid
of shape [N, 0, W, 2]) and the Det of 0x0 matrices (1 each). The backward graph failed to load
('Incompatible dimensions' at GridSample's Mul: a Reshape to a run-time shape holding 0 copied another
dimension; Det's minors: a Gather of an index list of shape (0,)), where the gradients are zeros and empty
tensors. Oracle: the loss sum(x) + sum(y) has dL/dx = 1 everywhere (GridSample adds nothing)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from onnxprobe import api

F = TensorProto.FLOAT


def _model(path, node, inputs, opset) -> str:
    nodes = [node, helper.make_node("ReduceSum", ["x"], ["sx"], keepdims=0),
             helper.make_node("ReduceSum", ["y"], ["sy"], keepdims=0), helper.make_node("Add", ["sx", "sy"], ["z"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                          [helper.make_tensor_value_info("z", F, [])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, path)
    return str(path)


def _grads(path, feed, wrt):
    gp = api.grad_plan(api.load(path), api.GradSpec(wrt=wrt), feed=feed)
    sess = ort.InferenceSession(gp.backward.model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip(wrt, sess.run([gp.backward.grads[w] for w in wrt], feed)))


def test_grid_sample_with_no_sample_points(tmp_path):
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 4)).astype(np.float32)
    grid = np.zeros((1, 0, 3, 2), np.float32)
    path = _model(tmp_path / "gs.onnx", helper.make_node("GridSample", ["x", "g"], ["y"], align_corners=1),
                  [("x", [1, 2, 4, 4]), ("g", [1, "P", 3, 2])], 16)
    got = _grads(path, {"x": x, "g": grid}, ("x", "g"))
    np.testing.assert_array_equal(got["x"], np.ones_like(x))
    assert got["g"].shape == grid.shape


def test_det_of_empty_matrices(tmp_path):
    x = np.zeros((2, 0, 0), np.float32)
    path = _model(tmp_path / "det.onnx", helper.make_node("Det", ["x"], ["y"]), [("x", [2, 0, 0])], 17)
    assert ort.InferenceSession(path).run(None, {"x": x})[0] == 2  # det of a 0x0 matrix is 1
    assert _grads(path, {"x": x}, ("x",))["x"].shape == x.shape


def _reduce_model(path, op, expanded=False) -> str:
    """y = op(x, axes) of x [2, 0, 4] (keepdims), axes an input fed [1]: an empty set reduced, as onnx's *_empty_set node tests.
    ``expanded``: ReduceLogSum written as Log(ReduceSum(x)) (the _expanded node test)."""
    if expanded:
        nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=1), helper.make_node("Log", ["s"], ["y"])]
    else:
        nodes = [helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2, 0, 4]),
                                       helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
                          [helper.make_tensor_value_info("y", F, [2, 1, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.save(m, path)
    return str(path)


@pytest.mark.parametrize("op, expanded", [("ReduceLogSum", False), ("ReduceLogSum", True), ("ReduceLogSumExp", False),
                                          ("ReduceSum", False), ("ReduceMean", False)])
def test_a_reduction_over_an_empty_set(op, expanded, tmp_path):
    """ReduceLogSum over an empty set (y = log 0 = -inf): `grad` failed, "Where ... Incompatible dimensions":
    the rule's Expand of dy [2, 1, 4] to x's [2, 0, 4] was taken by onnxruntime's shape inference for a no-op,
    so the statistics of the (empty) gradient, summarised again for the -inf, were laid out for [2, 1, 4].
    Oracle: torch autograd of logsumexp / sum over an empty dim gives an empty gradient, x's shape; the
    gradient of y itself is the loss's, 1 everywhere."""
    x = np.zeros((2, 0, 4), np.float32)
    path = _reduce_model(tmp_path / "r.onnx", op, expanded)
    res = api.grad(path, api.Selection(all=True), inputs={"x": x, "axes": np.array([1], np.int64)}, save=True)
    rows = {r.target.ref.name: r for r in res.rows}
    assert rows["x"].shape == (2, 0, 4) and res.arrays["x"].shape == (2, 0, 4)
    np.testing.assert_array_equal(res.arrays["y"], np.ones((2, 1, 4), np.float32))
    torch = pytest.importorskip("torch")
    tx = torch.zeros((2, 0, 4), requires_grad=True)
    torch.logsumexp(tx, 1, keepdim=True).sum().backward()
    assert tuple(tx.grad.shape) == res.arrays["x"].shape
