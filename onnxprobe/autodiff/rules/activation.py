"""Trigonometric and hyperbolic functions (rotary embeddings use Sin and Cos) and the less common
activations: Softsign, Mish, Swish, Celu, ThresholdedRelu, Shrink. Piecewise gradients take the same one-sided
value as torch at their kinks (rules/elementwise.py explains the 0/1 masks)."""

from __future__ import annotations

from onnxprobe.autodiff.registry import rule


@rule("Sin")
def sin(g):
    """y = sin x  ->  dx = dy cos x"""
    return [g.Mul(g.dy, g.Cos(g.x[0]))]


@rule("Cos")
def cos(g):
    """y = cos x  ->  dx = -dy sin x"""
    return [g.Neg(g.Mul(g.dy, g.Sin(g.x[0])))]


@rule("Tan")
def tan(g):
    """y = tan x  ->  dx = dy (1 + y^2)"""
    y = g.y[0]
    return [g.Mul(g.dy, g.Add(g.scalar(1.0), g.Mul(y, y)))]


def _inv_sqrt(g, t: str) -> str:
    return g.Reciprocal(g.Sqrt(t))


@rule("Asin")
def asin(g):
    """y = asin x  ->  dx = dy / sqrt(1 - x^2)"""
    x = g.x[0]
    return [g.Mul(g.dy, _inv_sqrt(g, g.Sub(g.scalar(1.0), g.Mul(x, x))))]


@rule("Acos")
def acos(g):
    """y = acos x  ->  dx = -dy / sqrt(1 - x^2)"""
    x = g.x[0]
    return [g.Neg(g.Mul(g.dy, _inv_sqrt(g, g.Sub(g.scalar(1.0), g.Mul(x, x)))))]


@rule("Atan")
def atan(g):
    """y = atan x  ->  dx = dy / (1 + x^2)"""
    x = g.x[0]
    return [g.Div(g.dy, g.Add(g.scalar(1.0), g.Mul(x, x)))]


@rule("Sinh")
def sinh(g):
    """y = sinh x  ->  dx = dy cosh x"""
    return [g.Mul(g.dy, g.Cosh(g.x[0]))]


@rule("Cosh")
def cosh(g):
    """y = cosh x  ->  dx = dy sinh x"""
    return [g.Mul(g.dy, g.Sinh(g.x[0]))]


@rule("Asinh")
def asinh(g):
    """y = asinh x  ->  dx = dy / sqrt(x^2 + 1)"""
    x = g.x[0]
    return [g.Mul(g.dy, _inv_sqrt(g, g.Add(g.Mul(x, x), g.scalar(1.0))))]


@rule("Acosh")
def acosh(g):
    """y = acosh x  ->  dx = dy / sqrt(x^2 - 1)"""
    x = g.x[0]
    return [g.Mul(g.dy, _inv_sqrt(g, g.Sub(g.Mul(x, x), g.scalar(1.0))))]


@rule("Atanh")
def atanh(g):
    """y = atanh x  ->  dx = dy / (1 - x^2)"""
    x = g.x[0]
    return [g.Div(g.dy, g.Sub(g.scalar(1.0), g.Mul(x, x)))]


@rule("Softsign")
def softsign(g):
    """y = x / (1 + |x|)  ->  dx = dy / (1 + |x|)^2"""
    d = g.Add(g.scalar(1.0), g.Abs(g.x[0]))
    return [g.Div(g.dy, g.Mul(d, d))]


@rule("Mish")
def mish(g):
    """y = x tanh(softplus x)  ->  dx = dy (t + x sigmoid(x) (1 - t^2)),  t = tanh(softplus x)"""
    x = g.x[0]
    t = g.Tanh(g.Softplus(x))
    return [g.Mul(g.dy, g.Add(t, g.Mul(g.Mul(x, g.Sigmoid(x)), g.Sub(g.scalar(1.0), g.Mul(t, t)))))]


def swish_slope(g, x: str, alpha: float) -> str:
    """d (x sigmoid(alpha x)) / dx = s (1 + alpha x (1 - s)),  s = sigmoid(alpha x)"""
    s = g.Sigmoid(g.Mul(x, g.scalar(alpha)))
    return g.Mul(s, g.Add(g.scalar(1.0), g.Mul(g.Mul(x, g.scalar(alpha)), g.Sub(g.scalar(1.0), s))))


@rule("Swish")
def swish(g):
    """y = x sigmoid(alpha x)  (opset 24; SiLU when alpha = 1)  ->  dx = dy s (1 + alpha x (1 - s))"""
    return [g.Mul(g.dy, swish_slope(g, g.x[0], float(g.attr("alpha", 1.0))))]


@rule("Celu")
def celu(g):
    """y = max(0, x) + min(0, alpha (exp(x / alpha) - 1))  ->  dx = dy if x > 0 else dy exp(x / alpha)"""
    x = g.x[0]
    alpha = float(g.attr("alpha", 1.0))
    # a Where, not 0/1 masks: exp(x / alpha) is inf for large x, and 0 * inf = NaN
    e = g.Exp(g.Mul(g.Min(x, g.scalar(0.0)), g.scalar(1.0 / alpha)))
    return [g.Mul(g.dy, g.Where(g.Greater(x, g.scalar(0.0)), g.scalar(1.0), e))]


@rule("ThresholdedRelu")
def thresholded_relu(g):
    """y = x if x > alpha else 0  ->  dx = dy where x > alpha, else 0"""
    alpha = float(g.attr("alpha", 1.0))
    return [g.Mul(g.dy, g.mask(g.Greater(g.x[0], g.scalar(alpha))))]


@rule("Shrink")
def shrink(g):
    """y = x - bias if x > lambd, x + bias if x < -lambd, else 0  ->  dx = dy where |x| > lambd, else 0"""
    lambd = float(g.attr("lambd", 0.5))
    x = g.x[0]
    return [g.Mul(g.dy, g.mask(g.Or(g.Greater(x, g.scalar(lambd)), g.Less(x, g.scalar(-lambd)))))]
