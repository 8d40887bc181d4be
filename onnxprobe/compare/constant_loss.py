"""diff --grad (of two models, or of a model and torch autograd) where a side's loss is constant (the sum of a
Softmax, of a LayerNormalization of one scale value: ``autodiff.constant_loss``): what the verdict may rest on.
The plans are ``api.grad_plan.GradPlan``s (``constant_loss``, ``live``, ``after``); the results are a
``compare.result.DiffResult`` whose ``grad`` dict is being filled."""

from __future__ import annotations

from onnxprobe.autodiff.constant_loss import unjudged
from onnxprobe.types import forward_name


def judge_constant_loss(plans: list, res) -> None:
    """``res.grad["constant_loss"]`` (the verdict's error: zeros agreeing with zeros earn no pass) and the
    noise rows, from the grad plans of A (and B; against torch autograd, A's alone: torch runs the same loss)."""
    res.grad["constant_loss"] = _constant_losses(plans, res.results)
    _mark_noise(plans, res)


def _constant_losses(plans: list, results: list) -> dict[str, str]:
    """Role -> why its loss is constant (``GradPlan.constant_loss``), unless a pair compares a gradient that
    loss depends on all the same (``GradPlan.live``: a LayerNormalization's scale), which earns a verdict."""
    compared = {forward_name(n) for r in results for n in (r.pair.a.name, r.pair.b.name)}
    return {r: p.constant_loss for r, p in zip("AB", plans) if p.constant_despite(compared)}


def _mark_noise(plans: list, res) -> None:
    """Where a side's loss is constant in every tensor before a LayerNormalization of one scale value but a
    pair compares that scale's gradient (``GradPlan.live``), the verdict is the scale's (and its bias's, whose
    gradient, as its output's and what follows it, ``GradPlan.after``, is real too): the pairs of the
    other gradients, rounding noise on that side, are measured and shown but not judged (they read "ok"
    or "FAIL" by chance: noise agreeing with noise, or with the other model's real gradient)."""
    noisy = [(k, p) for k, p in enumerate(plans) if p.constant_loss and k < 2 and "AB"[k] not in res.grad["constant_loss"]]
    if not noisy:
        return
    for r in res.results:
        names = (r.pair.a.name, r.pair.b.name)
        if any(p.constant_in(forward_name(names[k]) or names[k]) for k, p in noisy):
            r.passed = None
            r.unjudged = unjudged([f"{'AB'[k]}: {p.constant_loss}" for k, p in noisy])
    res.outputs_failed = [r for r in res.outputs_failed if r.passed is False]
