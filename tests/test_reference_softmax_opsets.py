"""``diff --vs-reference`` on Softmax, LogSoftmax and Hardmax before opset 13: onnx.reference runs them along
one axis with opset 13's default, where opsets 1-12 coerce the input to 2-D at ``axis`` (default 1) and
normalise each row whole. The reference runner corrects them, so onnxruntime is not blamed for onnx.reference's
mistake. The oracle: the specification's formula in numpy float64."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from conftest import make_model
from onnxprobe import api

SHAPE = (2, 3, 2, 2)


def _oracle(op: str, x: np.ndarray, axis: int) -> np.ndarray:
    axis = axis + x.ndim if axis < 0 else axis
    f = x.astype(np.float64).reshape(int(np.prod(x.shape[:axis])), -1)
    if op == "Hardmax":
        out = np.zeros_like(f)
        out[np.arange(f.shape[0]), f.argmax(axis=1)] = 1
    else:
        e = np.exp(f - f.max(axis=1, keepdims=True))
        out = e / e.sum(axis=1, keepdims=True)
        out = np.log(out) if op == "LogSoftmax" else out
    return out.reshape(x.shape)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("opset,axis", [(9, None), (11, None), (12, 1), (11, 2), (11, 0), (11, -1), (11, -3), (13, None)])
def test_vs_reference_follows_each_opsets_softmax(op, opset, axis, tmp_path):
    attrs = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"], name="sq"),  # a layer before: something to compare upstream
             helper.make_node(op, ["sq"], ["y"], name="norm", **attrs)]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(SHAPE))], [], opset=opset, ir=7)
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    x = np.random.default_rng(3).standard_normal(SHAPE).astype(np.float32)
    res = api.diff(p, vs_reference=True, selection=api.Selection(all=True), inputs=api.InputSpec(arrays={"x": x}))
    assert res.verdict()[0] == "pass", res.verdict()
    obs = next(r.pair.b for r in res.results if r.pair.b.name == "y")
    got = res.b.values([obs], {"x": x})[obs.probe]  # what onnx.reference computes, through the runner
    default = 1 if opset < 13 else -1
    want = _oracle(op, x * x, default if axis is None else axis) if opset < 13 else None
    if want is None:  # opset 13: one axis, softmax along it (not coerced)
        ax = default if axis is None else axis
        f = (x * x).astype(np.float64)
        if op == "Hardmax":
            want = (f == f.max(axis=ax, keepdims=True)).astype(np.float64)
        else:
            e = np.exp(f - f.max(axis=ax, keepdims=True))
            want = e / e.sum(axis=ax, keepdims=True)
            want = np.log(want) if op == "LogSoftmax" else want
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
