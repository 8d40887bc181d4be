"""The gradient check at several kinks at once (``autodiff.kinks``): MaxPool over integer-valued data (ties in many
windows) and Clip with values at both bounds. A right gradient (torch's: the first maximum of a window takes its
dy; Clip passes dy at its bounds) failed there, as the one-sided differences of several kinks bound no gradient; it
gets no verdict now, and a gradient wrong away from the kinks still fails. The losses are numpy float64 functions
of the perturbed tensor, the gradients worked out by hand: the check is a pure function of them."""

from __future__ import annotations

import numpy as np
import pytest

from onnxprobe.autodiff.check import CheckItem, check_gradients

PRECISIONS = ["float64", "float32"]


def _maxpool(t):  # (C, 6, 6) -> (C, 3, 3), windows 2x2, stride 2
    return t.reshape(t.shape[0], 3, 2, 3, 2).max(axis=(2, 4))


def _maxpool_case():
    rng = np.random.default_rng(0)
    t = rng.integers(1, 4, (2, 6, 6)).astype(np.float64)  # pixels as floats: ties in most windows
    dy = rng.standard_normal((2, 3, 3))
    g = np.zeros_like(t)
    for c in range(2):
        for i in range(3):
            for j in range(3):
                win = t[c, 2 * i:2 * i + 2, 2 * j:2 * j + 2]
                k = int(np.argmax(win))  # the first maximum, as onnxruntime's and torch's MaxPool
                g[c, 2 * i + k // 2, 2 * j + k % 2] += dy[c, i, j]
    return t, g, (lambda name, delta: float(np.sum(dy * _maxpool(t + delta))))


def _clip_case():
    t = np.array([-1.0, 0.5, 1.0, 0.2, -1.0, 1.0, -0.3, 0.9])
    c = np.array([0.7, -1.1, 0.4, 0.9, -0.6, -0.8, 1.3, 0.5])
    g = c.copy()  # torch.clamp: the gradient passes at the bounds
    return t, g, (lambda name, delta: float(np.sum(c * np.clip(t + delta, -1.0, 1.0))))


def _check(t, g, loss, precision):
    item = CheckItem("t", g, t, float(np.sqrt(np.mean(t * t))), exact=False)
    return check_gradients([item], loss, precision)["t"]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", [_maxpool_case, _clip_case])
def test_a_right_gradient_at_several_kinks_never_fails(case, precision):
    t, g, loss = case()
    r = _check(t, g, loss, precision)
    assert r["ok"] is not False, r
    if r["ok"] is None:
        assert r.get("several_kinks") and "several kinks" in r["unresolved"], r


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", [_maxpool_case, _clip_case])
def test_a_gradient_wrong_away_from_the_kinks_still_fails(case, precision):
    t, g, loss = case()
    wrong = g.copy()
    away = np.flatnonzero(g)
    wrong.flat[away[::2]] *= 1.5  # every other entry that takes a gradient: off by half of it
    r = _check(t, wrong, loss, precision)
    assert r["ok"] is False, r


def test_a_narrow_kink_where_nothing_resolves_is_no_verdict(monkeypatch):
    """A kink too narrow to explain a failure ({"kinked": True} from check32._kink) found where no step resolves the
    slope returned a result without "ok", and taking it apart failed on it (KeyError, silero-vad's check, float32):
    there is no FAIL there, and the result is the unresolved one."""
    from onnxprobe.autodiff import check32

    monkeypatch.setattr(check32, "_kink", lambda rows, an, tol: {"kinked": True})
    rng = np.random.default_rng(0)
    t = rng.standard_normal(50)
    g = np.ones(50)
    # a loss the float32 rounding swamps: 1e12 plus a slope of 1e-3, so that no step resolves it
    loss = (lambda name, delta: float(np.float32(1e12) + np.float32(1e-3 * np.sum(t + delta))))
    r = check_gradients([CheckItem("t", g, t, float(np.sqrt(np.mean(t * t))))], loss, "float32")["t"]
    assert r["ok"] is None and r.get("unresolved"), r
