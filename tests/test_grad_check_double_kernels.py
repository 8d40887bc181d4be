"""The float64 check of models with ops whose double kernel computes in float32 all the same: onnxruntime's Shrink
casts its input to float, GroupNormalization-21 keeps float32 statistics by default (stash_type). A float64 finite
difference read that rounding as a wrong gradient: right gradients (torch's) FAILed. The float64 copy writes Shrink
out in double ops and sets GroupNormalization's stash_type to double. Oracles: numpy float64 for the forward values,
the check's own verdict for the gradients."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.autodiff.check import to_float64

RNG = np.random.default_rng(0)
S, B = RNG.standard_normal(4), RNG.standard_normal(4)


def _shrink():
    return make_model([helper.make_node("Shrink", ["x"], ["y"], name="shrink", lambd=0.5, bias=0.2)],
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 3])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 3])], opset=17)


def _group_norm():
    return make_model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="gn", num_groups=2, epsilon=1e-3)],
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 3])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 3])],
                      [numpy_helper.from_array(S.astype(np.float32), "s"), numpy_helper.from_array(B.astype(np.float32), "b")],
                      opset=21)


def _numpy(kind, x):
    if kind == "shrink":
        lam, b = float(np.float32(0.5)), float(np.float32(0.2))
        return np.where(x < -lam, x + b, np.where(x > lam, x - b, 0.0))
    xr = x.reshape(2, 2, 6)
    mu, var = xr.mean(-1, keepdims=True), xr.var(-1, keepdims=True)
    s, b = S.astype(np.float32).astype(np.float64), B.astype(np.float32).astype(np.float64)
    return ((xr - mu) / np.sqrt(var + float(np.float32(1e-3)))).reshape(2, 4, 3) * s[None, :, None] + b[None, :, None]


@pytest.mark.parametrize("kind", ["shrink", "group_norm"])
def test_the_float64_copy_computes_in_double(kind):
    m = _shrink() if kind == "shrink" else _group_norm()
    x = RNG.standard_normal((2, 4, 3)) * 3
    y = ort.InferenceSession(to_float64(m).SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(y, _numpy(kind, x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", ["shrink", "group_norm"])
def test_right_gradients_pass_the_float64_check(kind):
    m = _shrink() if kind == "shrink" else _group_norm()
    x = (RNG.standard_normal((2, 4, 3)) * 3).astype(np.float32)
    r = api.grad(m, api.Selection(all=True), inputs={"x": x}, check=True)
    assert r.check_mode == "float64", r.notes
    assert r.checked and all(row.check["ok"] for row in r.rows if row.check and row.check.get("ok") is not None), \
        [(row.name, row.check) for row in r.rows]
