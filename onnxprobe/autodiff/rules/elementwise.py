"""Elementwise ops. ``dy`` is dL/dy; broadcasting inputs are summed back to their shape by the engine.
At kinks (Relu at 0, Abs at 0, Clip at its bounds...) the rules pick the same one-sided value as torch.

Piecewise gradients are products with 0/1 masks (``g.mask``), not ``Where``: onnxruntime's Where is
some fifteen times slower than a Mul on the same tensor. The one difference: a NaN or Inf in dy where the
mask is 0 stays NaN (NaN x 0), where torch writes 0."""

from __future__ import annotations

import math

import numpy as np

from onnxprobe.autodiff.registry import rule


def _ge(g, a, b):
    return g.GreaterOrEqual(a, b) if g.opset >= 12 else g.Not(g.Less(a, b))


def _le(g, a, b):
    return g.LessOrEqual(a, b) if g.opset >= 12 else g.Not(g.Greater(a, b))


@rule("Add", inputs=(0, 1), broadcast=(0, 1))
def add(g):
    """y = a + b  ->  da = dy,  db = dy"""
    return [g.dy, g.dy]


@rule("Sub", inputs=(0, 1), broadcast=(0, 1))
def sub(g):
    """y = a - b  ->  da = dy,  db = -dy"""
    return [g.dy, g.Neg(g.dy) if g.wants(1) else None]


@rule("Mod", inputs=(0, 1), broadcast=(0, 1))
def mod(g):
    """y = fmod(a, b) = a - b trunc(a / b) (float Mod, fmod=1; integer Mod carries no gradient)  ->
    da = dy,  db = -dy trunc(a / b), with trunc(q) = Sign(q) Floor(|q|)"""
    a, b = g.x
    db = None
    if g.wants(1):
        q = g.Div(a, b)
        db = g.Neg(g.Mul(g.dy, g.Mul(g.Sign(q), g.Floor(g.Abs(q)))))
    return [g.dy if g.wants(0) else None, db]


@rule("Mul", inputs=(0, 1), broadcast=(0, 1))
def mul(g):
    """y = a * b  ->  da = dy * b,  db = dy * a"""
    a, b = g.x
    return [g.Mul(g.dy, b) if g.wants(0) else None, g.Mul(g.dy, a) if g.wants(1) else None]


@rule("Div", inputs=(0, 1), broadcast=(0, 1))
def div(g):
    """y = a / b  ->  da = dy / b,  db = -dy * a / b^2 = -(dy / b) * y"""
    t = g.Div(g.dy, g.x[1])
    return [t, g.Neg(g.Mul(t, g.y[0])) if g.wants(1) else None]


@rule("Neg")
def neg(g):
    """y = -x  ->  dx = -dy"""
    return [g.Neg(g.dy)]


@rule("Pow", inputs=(0, 1), broadcast=(0, 1))
def pow_(g):
    """y = a ** b  ->  da = dy * b * a ** (b - 1) (0 where b == 0: a ** 0 is 1 whatever a, where b a ** (b - 1)
    at a == 0 is 0 * inf),  db = dy * y * log(a)  (0 where a == 0), as torch"""
    a, b = g.x
    da = db = None
    if g.wants(0):
        bf = b if g.engine.elem(b) in (None, g.elem) else g.Cast(b, to=g.elem)
        c = g.value(b)
        if c is not None and c.size == 1 and float(c.reshape(-1)[0]) == 2.0:
            da = g.Mul(g.dy, g.Mul(a, g.scalar(2.0)))
        else:
            da = g.Mul(g.dy, g.Mul(bf, g.Pow(a, g.Sub(bf, g.scalar(1.0)))))
            if c is None or not np.all(np.asarray(c) != 0):  # an exponent that is (or may be) 0 somewhere
                da = g.Where(g.Equal(bf, g.scalar(0.0)), g.scalar(0.0), da)
    if g.wants(1):
        db = g.Where(g.Equal(a, g.scalar(0.0)), g.scalar(0.0), g.Mul(g.Mul(g.dy, g.y[0]), g.Log(a)))
    return [da, db]


@rule("Sqrt")
def sqrt(g):
    """y = sqrt(x)  ->  dx = dy / (2 y)"""
    return [g.Div(g.Mul(g.dy, g.scalar(0.5)), g.y[0])]


@rule("Reciprocal")
def reciprocal(g):
    """y = 1 / x  ->  dx = -dy * y^2"""
    return [g.Neg(g.Mul(g.dy, g.Mul(g.y[0], g.y[0])))]


@rule("Exp")
def exp(g):
    """y = exp(x)  ->  dx = dy * y"""
    return [g.Mul(g.dy, g.y[0])]


@rule("Log")
def log(g):
    """y = log(x)  ->  dx = dy / x"""
    return [g.Div(g.dy, g.x[0])]


@rule("Abs")
def abs_(g):
    """y = |x|  ->  dx = dy * sign(x)  (0 at x = 0)"""
    return [g.Mul(g.dy, g.Sign(g.x[0]))]


@rule("Relu")
def relu(g):
    """y = max(x, 0)  ->  dx = dy where y > 0, else 0"""
    return [g.Mul(g.dy, g.mask(g.Greater(g.y[0], g.scalar(0.0))))]


@rule("LeakyRelu")
def leaky_relu(g):
    """y = x if x > 0 else alpha x  ->  dx = dy if x > 0 else alpha dy"""
    alpha = g.attr("alpha", 0.01)
    slope = g.Add(g.Mul(g.mask(g.Greater(g.x[0], g.scalar(0.0))), g.scalar(1.0 - alpha)), g.scalar(alpha))
    return [g.Mul(g.dy, slope)]


@rule("PRelu", inputs=(0, 1), broadcast=(1,))
def prelu(g):
    """y = x if x > 0 else s x  (s broadcast to x)  ->  dx = dy if x > 0 else s dy,  ds = 0 if x > 0 else x dy"""
    x, s = g.x
    neg = g.mask(g.Not(g.Greater(x, g.scalar(0.0))))
    # dx = dy (1 + neg (s - 1)),  ds = dy x neg
    dx = g.Mul(g.dy, g.Add(g.Mul(neg, g.Sub(s, g.scalar(1.0))), g.scalar(1.0))) if g.wants(0) else None
    ds = g.Mul(g.Mul(g.dy, x), neg) if g.wants(1) else None
    return [dx, ds]


@rule("Elu")
def elu(g):
    """y = x if x > 0 else alpha (e^x - 1)  ->  dx = dy if x > 0 else dy alpha e^x"""
    return [g.Mul(g.dy, _pos_or(g, g.attr("alpha", 1.0), 1.0))]


def _pos_or(g, neg_scale: float, pos_slope: float) -> str:
    """pos_slope where x > 0, else neg_scale e^x. A Where, not neg + [x > 0] (pos - neg): e^x is inf for large
    x (the slope read 0 or NaN at x = 1e20); and e^min(x, 0), not y + alpha, which cancels in float32 for
    x < -17 (6e-8 where e^x is 4e-8, 0 where it is 2e-35)"""
    neg = g.Mul(g.Exp(g.Min(g.x[0], g.scalar(0.0))), g.scalar(neg_scale))
    return g.Where(g.Greater(g.x[0], g.scalar(0.0)), g.scalar(pos_slope), neg)


@rule("Selu")
def selu(g):
    """y = gamma x if x > 0 else gamma alpha (e^x - 1)  ->  dx = gamma dy if x > 0 else dy gamma alpha e^x"""
    alpha = g.attr("alpha", 1.67326319217681884765625)
    gamma = g.attr("gamma", 1.05070102214813232421875)
    return [g.Mul(g.dy, _pos_or(g, gamma * alpha, gamma))]


@rule("Sigmoid")
def sigmoid(g):
    """y = 1 / (1 + e^-x)  ->  dx = dy y (1 - y)"""
    y = g.y[0]
    return [g.Mul(g.dy, g.Mul(y, g.Sub(g.scalar(1.0), y)))]


@rule("HardSigmoid")
def hard_sigmoid(g):
    """y = clip(alpha x + beta, 0, 1)  ->  dx = alpha dy where 0 < y < 1, else 0"""
    alpha = g.attr("alpha", 0.2)
    y = g.y[0]
    inside = g.And(g.Greater(y, g.scalar(0.0)), g.Less(y, g.scalar(1.0)))
    return [g.Mul(g.Mul(g.dy, g.scalar(alpha)), g.mask(inside))]


@rule("HardSwish")
def hard_swish(g):
    """y = x h, h = clip(x / 6 + 1/2, 0, 1)  ->  dx = 0 if x <= -3, dy (x / 3 + 1/2) if -3 < x < 3, dy if
    x >= 3 (torch's one-sided values at the kinks: the outer pieces'); that is dx = dy (h + [|x| < 3] (h - 1/2)),
    since x / 3 + 1/2 = 2 h - 1/2 inside"""
    x = g.x[0]
    h = g.HardSigmoid(x, alpha=1.0 / 6.0, beta=0.5)
    inside = g.mask(g.Less(g.Abs(x), g.scalar(3.0)))
    return [g.Mul(g.dy, g.Add(h, g.Mul(inside, g.Sub(h, g.scalar(0.5)))))]


@rule("Tanh")
def tanh(g):
    """y = tanh(x)  ->  dx = dy (1 - y^2)"""
    y = g.y[0]
    return [g.Mul(g.dy, g.Sub(g.scalar(1.0), g.Mul(y, y)))]


@rule("Erf")
def erf(g):
    """y = erf(x)  ->  dx = dy 2 / sqrt(pi) exp(-x^2)"""
    x = g.x[0]
    return [g.Mul(g.dy, g.Mul(g.scalar(2.0 / math.sqrt(math.pi)), g.Exp(g.Neg(g.Mul(x, x)))))]


@rule("Gelu")
def gelu(g):
    """exact: y = x Phi(x)  ->  dx = dy (Phi(x) + x phi(x)),  Phi(x) = (1 + erf(x / sqrt 2)) / 2,
    phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
    tanh: y = x (1 + tanh u) / 2, u = sqrt(2/pi) (x + 0.044715 x^3)
      ->  dx = dy ((1 + tanh u) / 2 + x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 0.044715 x^2) / 2)"""
    return [g.Mul(g.dy, gelu_slope(g, g.x[0], g.attr("approximate", "none") in ("tanh", b"tanh")))]


def gelu_slope(g, x: str, tanh: bool) -> str:
    """d gelu(x) / dx, exact (erf) or of the tanh approximation (also com.microsoft's Gelu, FastGelu)."""
    s = g.scalar
    if tanh:
        # beyond |x| = 1e10 tanh(u) is +-1 exactly and the slope 1 or 0; clamping there keeps x^3 finite
        # (x = 3e38 overflowed to inf and 0 * inf gave NaN); in float16 (max 65504) at 20, where tanh(u)
        # (u ~ 300) is already +-1: 1e10 is inf there, and x^3 overflowed from |x| = 40
        c = min(1e10, _largest(g.dtype) ** (1 / 3) / 2)
        x = g.Max(g.Min(x, s(c)), s(-c))
        x2 = g.Mul(x, x)
        u = g.Mul(s(math.sqrt(2.0 / math.pi)), g.Add(x, g.Mul(s(0.044715), g.Mul(x2, x))))
        t = g.Tanh(u)
        du = g.Mul(s(math.sqrt(2.0 / math.pi)), g.Add(s(1.0), g.Mul(s(3 * 0.044715), x2)))
        return g.Add(g.Mul(s(0.5), g.Add(s(1.0), t)), g.Mul(g.Mul(s(0.5), x), g.Mul(g.Sub(s(1.0), g.Mul(t, t)), du)))
    cdf = g.Mul(s(0.5), g.Add(s(1.0), g.Erf(g.Mul(x, s(1.0 / math.sqrt(2.0))))))
    pdf = g.Mul(s(1.0 / math.sqrt(2.0 * math.pi)), g.Exp(g.Mul(g.Mul(x, x), s(-0.5))))
    return g.Add(cdf, g.Mul(x, pdf))


def _largest(dtype) -> float:
    """The largest finite value of a float ``dtype`` (bfloat16, which numpy's finfo refuses, by ml_dtypes')."""
    try:
        return float(np.finfo(dtype).max)
    except ValueError:
        import ml_dtypes

        return float(ml_dtypes.finfo(dtype).max)


@rule("Softplus")
def softplus(g):
    """y = log(1 + e^x)  ->  dx = dy sigmoid(x)"""
    return [g.Mul(g.dy, g.Sigmoid(g.x[0]))]


@rule("Clip", inputs=(0, 1, 2), broadcast=(1, 2))
def clip(g):
    """y = min(max(x, lo), hi)  ->  dx = dy where lo <= x <= hi (torch.clamp's), but a Clip from 0 takes none on
    its bounds: it is a Relu with a ceiling (nn.ReLU6, which both exporters write so), whose gradient there is torch's
    relu6's (and Relu's at 0), 0; a fresh MobileNet's ReLU6 reads exact zeros, where dy FAILed --vs-torch. Any
    other Clip keeps dy on a bound: a parameter clamp_()ed in forward() sits on its bound, and torch passes it there.
    The bounds (opset 11 inputs), as torch.clamp's tensor bounds, take what x does not: dhi = sum of dy where
    x > hi (or = hi, from 0) or hi < lo (where lo > hi, y is hi everywhere), dlo = sum of dy where x < lo (or = lo,
    from 0) otherwise."""
    x = g.x[0]
    if g.opset >= 11:
        lo = g.x[1] if g.has(1) else None
        hi = g.x[2] if g.has(2) else None
    else:
        lo = g.scalar(g.attr("min")) if g.attr("min") is not None else None
        hi = g.scalar(g.attr("max")) if g.attr("max") is not None else None
    from_zero = g.Equal(lo, g.scalar(0.0)) if lo else None  # a ReLU6: relu6's convention at both bounds
    above = g.Greater(x, hi) if hi else None  # y is hi
    if above is not None and lo:
        above = g.Or(g.Or(above, g.Less(hi, lo)), g.And(g.Equal(x, hi), from_zero))
    below = None  # y is lo
    if lo:
        below = g.Or(g.Less(x, lo), g.And(g.Equal(x, lo), from_zero))
        if above is not None:
            below = g.And(below, g.Not(above))
    at = [c for c in (above, below) if c is not None]
    clipped = (at[0] if len(at) == 1 else g.Or(*at)) if at else None
    grads = [g.Mul(g.dy, g.mask(g.Not(clipped))) if clipped is not None else g.dy]
    if g.opset >= 11:
        grads += [g.Mul(g.dy, g.mask(c)) if c is not None and g.wants(i) else None for i, c in ((1, below), (2, above))]
    return grads


def _minmax(g):
    """dx_i = dy where x_i == y, shared evenly between tied inputs (as torch.maximum / minimum)"""
    y = g.y[0]
    if len(g.x) == 1:
        return [g.dy]
    masks = [g.Cast(g.Equal(x, y), to=g.elem) for x in g.x]
    count = masks[0]
    for m in masks[1:]:
        count = g.Add(count, m)
    share = g.Div(g.dy, count)
    return [g.Mul(share, m) if g.wants(i) else None for i, m in enumerate(masks)]


@rule("Max", inputs=None, broadcast=tuple(range(64)))
def max_(g):
    """y = max(x_1, ..., x_n)  ->  dx_i = dy where x_i == y, split evenly between ties"""
    return _minmax(g)


@rule("Min", inputs=None, broadcast=tuple(range(64)))
def min_(g):
    """y = min(x_1, ..., x_n)  ->  dx_i = dy where x_i == y, split evenly between ties"""
    return _minmax(g)


@rule("Sum", inputs=None, broadcast=tuple(range(64)))
def sum_(g):
    """y = x_1 + ... + x_n  ->  dx_i = dy"""
    return [g.dy] * len(g.x)


@rule("Mean", inputs=None, broadcast=tuple(range(64)))
def mean(g):
    """y = (x_1 + ... + x_n) / n  ->  dx_i = dy / n"""
    d = g.Mul(g.dy, g.scalar(1.0 / len(g.x)))
    return [d] * len(g.x)


@rule("Where", inputs=(1, 2), broadcast=(1, 2))
def where(g):
    """y = a where c else b  ->  da = dy where c else 0,  db = 0 where c else dy  (c gets none)"""
    c = g.x[0]
    da = g.Mul(g.dy, g.mask(c)) if g.wants(1) else None
    db = g.Mul(g.dy, g.mask(g.Not(c))) if g.wants(2) else None
    return [None, da, db]
