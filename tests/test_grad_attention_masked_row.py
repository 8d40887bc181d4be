"""Attention (opset 23) with a query row masked over every key: onnxruntime's forward writes 0 for that row
(finite), so the row contributes nothing to any gradient; the rule's recomputed softmax of an all -inf row
was 0/0 and made every q/k/v gradient NaN. Oracle: central finite differences in float64 of a numpy
forward pass (a fully masked row outputs 0, as onnxruntime's)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import grads_for_output_grad, make_model

RNG = np.random.default_rng(3)
MASK = np.array([[True, False, True], [False, False, False], [True, True, False]])  # query row 1: every key masked


def _forward(q, k, v, causal):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    keep = MASK & (np.tril(np.ones(MASK.shape, bool)) if causal else True)
    s = np.where(keep, s, -np.inf)
    out = np.zeros(q.shape[:-1] + (v.shape[-1],))
    for i in range(s.shape[-2]):
        row = s[..., i, :]
        if np.isneginf(row).all():
            continue
        p = np.exp(row - row.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        out[..., i, :] = p @ v
    return out


@pytest.mark.parametrize("causal", [0, 1])
def test_a_fully_masked_query_row_gets_no_gradient_and_no_nan(tmp_path, causal):
    shapes = {"q": (1, 1, 3, 4), "k": (1, 1, 3, 4), "v": (1, 1, 3, 2)}
    m = make_model([helper.make_node("Attention", ["q", "k", "v", "m"], ["y"], is_causal=causal)],
                   [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in shapes.items()],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                   [numpy_helper.from_array(MASK, "m")], opset=23, ir=10)
    vals = {n: RNG.standard_normal(s).astype(np.float32) for n, s in shapes.items()}
    dy = RNG.standard_normal((1, 1, 3, 2)).astype(np.float32)
    got = grads_for_output_grad(tmp_path, m, vals, dy)
    x64 = {n: a.astype(np.float64) for n, a in vals.items()}
    L = (lambda d: float(np.sum(_forward(d["q"], d["k"], d["v"], causal) * dy)))
    h = 1e-6
    for n in shapes:
        want = np.zeros(shapes[n])
        for i in np.ndindex(shapes[n]):
            plus, minus = {**x64, n: x64[n].copy()}, {**x64, n: x64[n].copy()}
            plus[n][i] += h
            minus[n][i] -= h
            want[i] = (L(plus) - L(minus)) / (2 * h)
        assert np.isfinite(got[n]).all(), n
        np.testing.assert_allclose(got[n], want, rtol=1e-4, atol=1e-5, err_msg=n)
    assert not got["q"][0, 0, 1].any()  # the masked row's query gets exactly 0
