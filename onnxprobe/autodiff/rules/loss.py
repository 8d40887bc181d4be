"""Losses over integer class labels: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (scores or
log-probabilities x of shape (N, C, d1, ...), labels t of shape (N, d1, ...), optional class weights w of
shape (C,)). The labels are indices: no gradient flows to them.

Both are written with the one-hot mask oh[n, c, d] = (t[n, d] == c) of the labels that count (a label
equal to ``ignore_index`` matches no class; a negative one, outside the spec's [0, C), counts from the end,
t + C, as onnxruntime reads it): with ohw = oh w[c], the per-element loss is
l[n, d] = -sum_c ohw x, and the mean divides sum(l) by W = sum(ohw), the summed weights of the labels
that count (their number without weights), as the spec and onnxruntime do. W = 0 (every label ignored)
gives a NaN loss and NaN gradients."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from onnxprobe.autodiff.registry import rule


def _reduction(g) -> str:
    r = g.attr("reduction", "mean")
    r = r.decode() if isinstance(r, bytes) else r
    if r not in ("none", "sum", "mean"):
        raise g.fail(f"reduction {r!r} is not one the op defines (none, sum or mean)")
    return r


def _classes(g, x: str, r: int) -> tuple[str, str]:
    """0 .. C-1 as int64 of shape (1, C, 1, ..., 1), to compare the labels with, and C (a scalar)."""
    s = g.sshape(x)
    shape = [1, -1] + [1] * (r - 2)
    if s is not None and isinstance(s[1], int):
        return g.const(np.arange(s[1], dtype=np.int64).reshape(shape)), g.const(np.array(s[1], np.int64))
    c = g.Gather(g.shape(x), g.const(np.array(1, np.int64)), axis=0)
    rng = g.Range(g.const(np.array(0, np.int64)), c, g.const(np.array(1, np.int64)))
    return g.Reshape(rng, g.ints(shape)), c


def _one_hot(g, x: str, t: str):
    """(oh as a boolean, ohw = oh w[c] in the gradient's dtype, the loss's per-element factor dl) for
    x (N, C, ...) and labels t (N, ...); dl broadcasts against x (a scalar for sum and mean)."""
    r = g.rank(g.x[0])  # x, or SoftmaxCrossEntropyLoss's log_prob: the scores' shape
    t64 = g.unsqueeze(g.Cast(t, to=TensorProto.INT64), [1])
    classes, count = _classes(g, g.x[0], r)
    # a negative label counts from the end (-1: class C - 1), as onnxruntime's Gathers read the scores and
    # the weights at it
    ohb = g.Or(g.Equal(t64, classes), g.Equal(t64, g.Sub(classes, count)))
    ignore = g.attr("ignore_index")
    if ignore is not None:  # an ignored label matches no class
        ohb = g.And(ohb, g.Not(g.Equal(t64, g.const(np.array(ignore, np.int64)))))
    ohw = g.mask(ohb)
    if g.has(2):
        ohw = g.Mul(ohw, g.Reshape(g.x[2], g.ints([1, -1] + [1] * (r - 2))))
    red = _reduction(g)
    if red == "none":
        dl = g.unsqueeze(g.dy, [1])
    elif red == "sum":
        dl = g.dy
    else:
        dl = g.Div(g.dy, g.reduce_sum(ohw, None, keepdims=0))
    return ohb, ohw, dl, red


def _weight_grad(g, x: str, ohb: str, dl: str, red: str) -> str:
    """dl/dw[c] = sum over the elements labelled c of dl (-x[n, c, d]), less y there for the mean
    (whose denominator W holds w[c] too)."""
    r = g.rank(g.x[0])
    xt = g.reduce_sum(g.Where(ohb, x, g.scalar(0.0)), [1], keepdims=1)  # x at the label (Where: 0 * -inf)
    v = g.Neg(xt) if red != "mean" else g.Sub(g.Neg(xt), g.y[0])
    return g.reduce_sum(g.Mul(g.mask(ohb), g.Mul(v, dl)), [0] + list(range(2, r)), keepdims=0)


@rule("NegativeLogLikelihoodLoss", inputs=(0, 2))
def negative_log_likelihood_loss(g):
    """l[n, d] = -w[t] x[n, t[n, d], d] (0 where t = ignore_index), reduced by none / sum / mean
    (mean: sum(l) / W, W = the summed w[t] of the labels that count)  ->
    dx[n, c, d] = -dl[n, d] w[c] (t[n, d] == c), with dl = dy, dy, or dy / W;
    dw[c] = sum over the elements labelled c of dl (-x_t), less y there for the mean; t: none (indices)"""
    x, t = g.x[0], g.x[1]
    ohb, ohw, dl, red = _one_hot(g, x, t)
    dx = g.Neg(g.Mul(ohw, dl)) if g.wants(0) else None
    dw = _weight_grad(g, x, ohb, dl, red) if g.wants(2) else None
    return [dx, None, dw]


@rule("SoftmaxCrossEntropyLoss", inputs=(0, 2))
def softmax_cross_entropy_loss(g):
    """lp = LogSoftmax(x, axis 1) (the optional output log_prob), then the loss is
    NegativeLogLikelihoodLoss(lp, t, w)  ->  glp = -dl w[c] (t == c) + d log_prob,
    dx = glp - softmax(x) sum_c(glp);  dw as NegativeLogLikelihoodLoss's with lp for x; t: none (indices)"""
    t = g.x[1]
    lp = g.forward_output(1, "log_prob")
    glp = dw = None
    if g.dy:
        ohb, ohw, dl, red = _one_hot(g, lp, t)
        glp = g.Neg(g.Mul(ohw, dl))
        if g.wants(2):
            dw = _weight_grad(g, lp, ohb, dl, red)
    d_lp = g.dys[1] if len(g.dys) > 1 else None
    if d_lp:
        glp = d_lp if glp is None else g.Add(glp, d_lp)
    dx = None
    if g.wants(0) and glp is not None:
        dx = g.Sub(glp, g.Mul(g.Exp(lp), g.reduce_sum(glp, [1], keepdims=1)))
    return [dx, None, dw]
