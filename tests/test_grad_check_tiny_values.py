"""grad --check of a tensor whose values are tiny next to what they are added to (a bias initialised at ~1e-6, as
torchvision's ViT does its MLP biases): steps relative to its RMS (1e-12) left the loss's rounding at 3e-6 of the
slope, which read as a disagreement past the tolerance 1e-6 and failed a right gradient (QA). A disagreement no
larger than the rounding is not measured, and larger steps (up to the tensor's RMS) are tried.
Oracle: the exact gradient of sum(W2 tanh(h + b)) in float64, and the same gradient made wrong."""

from __future__ import annotations

import numpy as np
import pytest

from onnxprobe.autodiff.check import CheckItem, check_gradients

RNG = np.random.default_rng(0)


def _case(scale: float):
    h = RNG.normal(0, 1.5, (8, 32))
    w2 = RNG.normal(0, 0.3, (32, 4))
    b = RNG.normal(0, scale, 32)

    def loss(name, delta):
        return float(np.sum(np.tanh(h + b + delta) @ w2) * 3.0 + 40.0)  # |L| ~ 40: its rounding is eps * 40

    grad = 3.0 * np.sum((1 - np.tanh(h + b) ** 2) * w2.sum(1), axis=0)
    return b, loss, grad


@pytest.mark.parametrize("scale", [1e-6, 1e-8, 1e-3])
def test_a_right_gradient_of_tiny_values_passes_and_a_wrong_one_fails(scale):
    b, loss, grad = _case(scale)
    item = lambda g: CheckItem("b", g, b, float(np.sqrt(np.mean(b * b))))  # noqa: E731
    right = check_gradients([item(grad)], loss, "float64")["b"]
    assert right["ok"] is True, right
    for wrong in (grad * 1.001, grad + 1e-3 * np.abs(grad).max() * RNG.standard_normal(grad.shape)):
        res = check_gradients([item(wrong)], loss, "float64")["b"]
        assert res["ok"] is False, res


@pytest.mark.parametrize("seed", range(6))
def test_float32_tries_larger_steps_for_tiny_values(seed):
    """In float32 the steps went up to the tensor's RMS (1e-6 for such a bias), where the loss's rounding still
    swamps the slope: 'cannot check', blamed on a loss not linear (QA). Larger steps follow where no step is borne
    out by another: the right gradient passes, one 20% wrong fails."""
    rng = np.random.default_rng(int(seed))
    b = rng.normal(0, 1e-6, 32)
    h = rng.normal(0, 1.5, (8, 32)).astype(np.float32)
    w2 = rng.normal(0, 0.3, (32, 4)).astype(np.float32)

    def loss(name, delta):
        return float(np.sum(np.tanh(h + (b + delta).astype(np.float32)) @ w2, dtype=np.float32) * np.float32(3) + np.float32(40))

    grad = 3.0 * np.sum((1 - np.tanh(h.astype(np.float64) + b) ** 2) * w2.astype(np.float64).sum(1), axis=0)
    item = lambda g: CheckItem("b", g, b, float(np.sqrt(np.mean(b * b))))  # noqa: E731
    right = check_gradients([item(grad)], loss, "float32")["b"]
    assert right["ok"] is True, right
    assert check_gradients([item(grad * 1.2)], loss, "float32")["b"]["ok"] is False
