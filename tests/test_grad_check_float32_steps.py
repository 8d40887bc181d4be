"""grad --check in float32 earns its PASS: the verdict is taken at a step chosen by how well it resolves the
loss's slope (its rounding, measured; its curvature and the kinks it crosses, estimated), and borne out by a
second step where it is large, never at whichever of several steps agreed best with the gradient. That rule
let a gradient 10% wrong pass where a noisy tiny step agreed by chance (sum(exp(30 w)): 0.9 g passed with
error 0.027; on PP-OCR's classifier 43 of 268 gradients scaled by 0.9 passed). Oracles: the exact gradients,
derived by hand in float64, and onnxprobe's own gradients of a small CNN (checked right by the other tests:
test_autodiff_rules, test_autodiff_torchref), deliberately scaled."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.autodiff.check import CheckItem, check_gradients

RNG = np.random.default_rng(5)
WRONG = (0.9, 1.1, 0.85, 1.15, 0.8, 1.25)


def _f32(fn):
    """A loss evaluated in float32, as the float32 check runs the model."""
    return lambda name, delta: float(fn(np.asarray(delta, np.float64).astype(np.float32)))


def _losses():
    f = np.float32
    w = np.linspace(0.5, 1.5, 8)
    yield "exp(30 w)", w, _f32(lambda d: np.sum(np.exp(f(30) * (w.astype(f) + d)), dtype=f)), 30 * np.exp(30 * w)
    t = RNG.standard_normal(20)
    yield "sin(5 t)", t, _f32(lambda d: np.sum(np.sin(f(5) * (t.astype(f) + d)), dtype=f)), 5 * np.cos(5 * t)
    c = RNG.uniform(1, 2, 12)
    yield "t^3", c, _f32(lambda d: np.sum((c.astype(f) + d) ** 3, dtype=f)), 3 * c ** 2
    o = 1000 + RNG.uniform(-1, 1, 16)
    yield "(w - 1000)^2", o, _f32(lambda d: np.sum((o.astype(f) + d - f(1000)) ** 2, dtype=f)), 2 * (o - 1000)
    z = 3 * RNG.standard_normal(50)

    def ce(d):
        y = z.astype(f) + d
        y = y - y.max()
        return -(y[3] - np.log(np.sum(np.exp(y), dtype=f)))
    p = np.exp(z - z.max())
    p /= p.sum()
    yield "cross-entropy", z, _f32(ce), p - np.eye(50)[3]
    s = RNG.uniform(-1, 1, 10) * 1e-20
    x = RNG.uniform(0.5, 1.5, 10) * 1e20
    th = np.tanh(s * x)
    yield "tanh(w x)^2, w ~1e-20", s, _f32(lambda d: np.sum(np.tanh((s.astype(f) + d) * x.astype(f)) ** 2, dtype=f)), \
        2 * th * (1 - th ** 2) * x


@pytest.mark.parametrize("case", list(_losses()), ids=lambda c: c[0])
def test_a_wrong_gradient_never_passes_in_float32(case):
    _, w, loss, g = case
    item = (lambda grad: CheckItem("w", grad, w, float(np.sqrt(np.mean(w * w)))))
    assert check_gradients([item(g)], loss, "float32")["w"]["ok"] is True
    for f in WRONG:
        res = check_gradients([item(f * g)], loss, "float32")["w"]
        assert res["ok"] is not True, (f, res)


def _cnn(rng):
    """Conv -> Relu -> MaxPool -> Conv -> Relu -> GlobalAveragePool -> Gemm: Relu kinks everywhere, no
    float64 kernel for Conv (the check runs in float32)."""
    f = np.float32
    inits = {"W1": 0.4 * rng.standard_normal((6, 3, 3, 3)), "B1": 0.1 * rng.standard_normal(6),
             "W2": 0.3 * rng.standard_normal((8, 6, 3, 3)), "B2": 0.1 * rng.standard_normal(8),
             "W3": 0.5 * rng.standard_normal((5, 8)), "B3": 0.1 * rng.standard_normal(5)}
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "W2", "B2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
             helper.make_node("Flatten", ["g"], ["fl"]),
             helper.make_node("Gemm", ["fl", "W3", "B3"], ["y"], transB=1)]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
                      [numpy_helper.from_array(v.astype(f), k) for k, v in inits.items()])


def test_a_cnns_scaled_gradients_never_pass():
    """float32 check of a small CNN: its true gradients pass; scaled by 0.9 or 1.1 none does (the old rule
    passed B1's and c2's scaled by 1.1: a step agreed by chance)."""
    rng = np.random.default_rng(3)
    m = _cnn(rng)
    x = rng.standard_normal((1, 3, 12, 12)).astype(np.float32)
    dy = rng.standard_normal((1, 5)).astype(np.float32)
    spec = api.GradSpec(loss="output-grad", output_grad=dy)
    model = api.load(m)
    res = api.grad(model, None, api.RunConfig(device="cpu"), spec, inputs={"x": x}, save=True)
    assert len(res.rows) == 9  # 6 weights, 3 activations
    assert api.grad_check(model, res.plan, {"x": x}, res) == "float32"
    assert all(r.check["ok"] is True for r in res.rows), [(r.name, r.check) for r in res.rows]
    for f in (0.9, 1.1):
        wrong = copy.copy(res)
        wrong.rows = [copy.copy(r) for r in res.rows]
        wrong.arrays = {k: v * np.float32(f) for k, v in res.arrays.items()}
        api.grad_check(model, res.plan, {"x": x}, wrong)
        passed = [(r.name, r.check) for r in wrong.rows if r.check is not None and r.check["ok"] is True]
        assert not passed, (f, passed)
