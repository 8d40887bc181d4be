"""The com.microsoft ops that onnxruntime's transformer optimizer writes (FusedMatMul, SkipLayerNormalization,
BiasGelu, FastGelu, QuickGelu, Gelu), so that `grad` works on optimized transformer exports: each is the
composition of standard ops its name says, and so is its gradient."""

from __future__ import annotations

from onnxprobe.autodiff.registry import rule
from onnxprobe.autodiff.rules.activation import swish_slope
from onnxprobe.autodiff.rules.elementwise import gelu_slope
from onnxprobe.autodiff.rules.norm import norm_input_grad, stats, stats_grad

MS = "com.microsoft"


@rule("Gelu", domain=MS)
def ms_gelu(g):
    """y = x Phi(x) (exact, erf)  ->  dx = dy (Phi(x) + x phi(x))"""
    return [g.Mul(g.dy, gelu_slope(g, g.x[0], False))]


@rule("BiasGelu", inputs=(0, 1), broadcast=(0, 1), domain=MS)
def bias_gelu(g):
    """y = gelu(a + b) (exact)  ->  da = db = dy gelu'(a + b) (db summed to the bias's shape)"""
    d = g.Mul(g.dy, gelu_slope(g, g.Add(g.x[0], g.x[1]), False))
    return [d, d]


@rule("FastGelu", inputs=(0, 1), broadcast=(0, 1), domain=MS)
def fast_gelu(g):
    """y = gelu_tanh(x + bias) = u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))) / 2  ->  dx = dbias =
    dy gelu_tanh'(u)"""
    u = g.Add(g.x[0], g.x[1]) if g.has(1) else g.x[0]
    d = g.Mul(g.dy, gelu_slope(g, u, True))
    return [d, d if g.has(1) else None]


@rule("QuickGelu", domain=MS)
def quick_gelu(g):
    """y = x sigmoid(alpha x)  ->  dx = dy s (1 + alpha x (1 - s)),  s = sigmoid(alpha x)"""
    return [g.Mul(g.dy, swish_slope(g, g.x[0], float(g.attr("alpha", 1.702))))]


def _t(g, x: str, r: int) -> str:
    return g.Transpose(x, perm=list(range(r - 2)) + [r - 1, r - 2])


@rule("FusedMatMul", inputs=(0, 1), domain=MS)
def fused_matmul(g):
    """y = alpha A' @ B', A' = A with its last two axes swapped if transA (B' likewise)  ->
    dA' = alpha dy B'^T, dB' = alpha A'^T dy, swapped back where transposed, summed over the batch axes
    the input was broadcast along"""
    if g.attr("transBatchA", 0) or g.attr("transBatchB", 0):
        raise g.fail("transBatchA / transBatchB are not supported")
    a, b = g.x
    ra, rb, ry = g.rank(a), g.rank(b), g.rank(g.y[0])
    if ra < 2 or rb < 2:
        raise g.fail("1-D operands are not supported")
    ta, tb = g.attr("transA", 0), g.attr("transB", 0)
    alpha = float(g.attr("alpha", 1.0))
    ap, bp = (_t(g, a, ra) if ta else a), (_t(g, b, rb) if tb else b)
    dy = g.dy if alpha == 1.0 else g.Mul(g.dy, g.scalar(alpha))
    ys = g.sshape(g.y[0])
    da = db = None
    if g.wants(0):
        d = g.MatMul(dy, _t(g, bp, rb))
        d = _t(g, d, ry) if ta else d
        da = g.sum_to(d, a, None if ys is None else tuple(ys[:-2]) + tuple(g.sshape(a)[-2:]))
    if g.wants(1):
        d = g.MatMul(_t(g, ap, ra), dy)
        d = _t(g, d, max(ra, ry)) if tb else d
        db = g.sum_to(d, b, None if ys is None else tuple(ys[:-2]) + tuple(g.sshape(b)[-2:]))
    return [da, db]


@rule("SkipLayerNormalization", inputs=(0, 1, 2, 3, 4), broadcast=(1, 2, 3, 4), domain=MS)
def skip_layer_norm(g):
    """s = input + skip (+ bias), y = xhat gamma + beta, xhat = (s - mean) r over the last axis  ->
    ds = r (gs - mean(gs) - xhat mean(gs xhat)) with gs = dy gamma, plus the gradients of the optional
    outputs mean and r (as LayerNormalization's) and s;  d input = d skip = d bias = ds,  d gamma = dy xhat,  d beta = dy (summed to their shapes)"""
    x, skip, gamma = g.x[0], g.x[1], g.x[2]
    s = g.Add(x, skip)
    if g.has(4):
        s = g.Add(s, g.x[4])
    xc, inv = stats(g, s, [-1], g.attr("epsilon", 1e-12))
    xhat = g.Mul(xc, inv)
    ds = norm_input_grad(g, g.Mul(g.dy, gamma), xhat, inv, [-1]) if g.dy else None
    ds = stats_grad(g, ds, x, xhat, inv, [-1], (1, 2))
    extra = g.dys[3] if len(g.dys) > 3 else None
    if extra:
        ds = extra if ds is None else g.Add(ds, extra)
    dgamma = g.Mul(g.dy, xhat) if g.dy and g.wants(2) else None
    dbeta = g.dy if g.dy and g.wants(3) else None
    return [ds, ds, dgamma, dbeta, ds if g.wants(4) else None]
