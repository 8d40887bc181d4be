"""grad --check does not pass a wrong gradient because the loss is curved over the step. Curvature separates
the one-sided differences (L(t + h v) - L(t)) / h and (L(t) - L(t - h v)) / h by h L'', and a gradient
between them passed as a kink: a gradient 3% wrong passed in float64 (exp(10 (w - 1000)), the step relative
to |w| ~ 1000), one 10-20% wrong in float32 (exp(30 w)). The one-sided differences are now Richardson-
extrapolated from h and h / 2, which cancels curvature's gap and keeps a kink's. Oracle: the exact
gradient k exp(k w), in float64."""

from __future__ import annotations

import numpy as np
import pytest

from onnxprobe.autodiff.check import CheckItem, check_gradients

RNG = np.random.default_rng(7)


def _exp_loss(w, k, offset, precision):
    dt = np.float64 if precision == "float64" else np.float32

    def loss(name, delta):
        return float(np.sum(np.exp(k * ((w + delta).astype(dt) - dt(offset))), dtype=dt))
    return loss, k * np.exp(k * (w - offset))


def _verdict(w, loss, grad, precision):
    return check_gradients([CheckItem("w", grad, w, float(np.sqrt(np.mean(w * w))))], loss, precision)["w"]


CASES = [("float64", 1000 + RNG.uniform(-1, 1, 8), 10.0, 1000.0, (0.97, 1.03, 0.9, 1.1)),
         ("float32", np.linspace(9, 11, 8), 3.0, 10.0, (0.9, 1.1))]


@pytest.mark.parametrize("precision,w,k,offset,factors", CASES, ids=["float64-offset", "float32-offset"])
def test_a_wrong_gradient_of_a_curved_loss_fails(precision, w, k, offset, factors):
    loss, g = _exp_loss(w, k, offset, precision)
    right = _verdict(w, loss, g, precision)
    assert right["ok"] is True and not right["kink"], right
    for f in factors:
        res = _verdict(w, loss, f * g, precision)
        assert res["ok"] is False and not res["kink"], (f, res)


def test_a_wrong_gradient_of_a_curved_float32_loss_is_not_passed_as_a_kink():
    """exp(30 w), w in [0.5, 1.5], float32: 10-20% wrong gradients passed as kinks (at the largest step, and at
    the smallest, where the rounding of t + h v opens a gap of its own); none does now."""
    w = np.linspace(0.5, 1.5, 8)
    loss, g = _exp_loss(w, 30.0, 0.0, "float32")
    assert _verdict(w, loss, g, "float32")["ok"] is True
    for f in (0.9, 1.1, 1.2):
        res = _verdict(w, loss, f * g, "float32")
        assert not res["kink"], (f, res)


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_a_subgradient_at_a_kink_still_passes(precision):
    """L(w + d) = 2 max(sum(d), 0) + sum(w + d): a kink at d = 0 along every direction, one-sided slopes s and
    3 s (s = sum(v)), central differences 2 s at every step; g = 1.5 (a subgradient) lies between them."""
    w = RNG.uniform(0.5, 1.5, 6)
    res = _verdict(w, lambda name, d: float(2 * max(np.sum(d), 0) + np.sum(w + d)), np.full(6, 1.5), precision)
    assert res["ok"] is True and res["kink"], res
