"""Einsum with a label of size 1 in one operand broadcast against a larger size in another (onnxruntime and
numpy broadcast it; ONNX shape inference takes the 1): each operand's gradient has the operand's own shape
(b of bij,bjk->bik with a [1, 3, 4] got a 1x4x2 gradient for its 2x4x2; ij,i->j's b a (1,) for its (4,)).
Oracle: central finite differences in float64 of numpy's einsum."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from conftest import grads_for_output_grad, make_model

RNG = np.random.default_rng(8)


@pytest.mark.parametrize("eq, sa, sb", [("bij,bjk->bik", (1, 3, 4), (2, 4, 2)), ("ij,i->j", (1, 3), (4,)),
                                        ("bij,bjk->bik", (2, 3, 4), (1, 4, 2))])
def test_einsum_label_broadcast_gradients_have_their_operands_shapes(tmp_path, eq, sa, sb):
    m = make_model([helper.make_node("Einsum", ["a", "b"], ["y"], equation=eq)],
                   [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(sa)),
                    helper.make_tensor_value_info("b", TensorProto.FLOAT, list(sb))],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], opset=12)
    vals = {"a": RNG.standard_normal(sa).astype(np.float32), "b": RNG.standard_normal(sb).astype(np.float32)}
    dy = RNG.standard_normal(np.einsum(eq, vals["a"], vals["b"]).shape).astype(np.float32)
    got = grads_for_output_grad(tmp_path, m, vals, dy)
    x64 = {n: a.astype(np.float64) for n, a in vals.items()}
    L = (lambda d: float(np.sum(np.einsum(eq, d["a"], d["b"]) * dy)))
    for n in vals:
        want = np.zeros(vals[n].shape)
        for i in np.ndindex(want.shape):
            plus, minus = {**x64, n: x64[n].copy()}, {**x64, n: x64[n].copy()}
            plus[n][i] += 1e-6
            minus[n][i] -= 1e-6
            want[i] = (L(plus) - L(minus)) / 2e-6
        assert got[n].shape == want.shape, (n, got[n].shape)
        np.testing.assert_allclose(got[n], want, rtol=1e-4, atol=1e-5, err_msg=n)
