"""The com.microsoft ops that onnxruntime's transformer optimizer writes (FusedMatMul, SkipLayerNormalization,
SkipSimplifiedLayerNormalization, BiasGelu, FastGelu, QuickGelu, Gelu, EmbedLayerNormalization), so that `grad` works on optimized transformer exports: each is the
composition of standard ops its name says, and so is its gradient."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, numpy_helper

from onnxprobe.autodiff.registry import rule
from onnxprobe.autodiff.rules.activation import swish_slope
from onnxprobe.autodiff.rules.elementwise import gelu_slope
from onnxprobe.autodiff.rules.norm import norm_input_grad, rms_grads, stats, stats_grad

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


@rule("SkipSimplifiedLayerNormalization", inputs=(0, 1, 2, 3), broadcast=(1, 2, 3), domain=MS)
def skip_simplified_layer_norm(g):
    """s = input + skip (+ bias), y = s r gamma, r = 1 / sqrt(mean(s^2) + eps) over the last axis (the RMS
    norm of LLM exports)  ->  ds = r (gs - shat mean(gs shat)) with gs = dy gamma, shat = s r, plus
    -dr r^2 shat / N from the optional output r (slot 2) and the gradient of the optional output s (slot 3);
    d input = d skip = d bias = ds,  d gamma = dy shat (summed to their shapes)"""
    s = g.Add(g.x[0], g.x[1])
    if g.has(3):
        s = g.Add(s, g.x[3])
    want_s = g.wants(0) or g.wants(1) or g.wants(3)
    ds, dgamma = rms_grads(g, s, g.attr("epsilon", 1e-12), 2, scale_slot=2, want_x=want_s)
    extra = g.dys[3] if len(g.dys) > 3 else None
    if extra and want_s:
        ds = extra if ds is None else g.Add(ds, extra)
    return [ds, ds, dgamma, ds if g.wants(3) else None]


def _activation_slope(g, act: str, params: list[float]) -> str:
    """d act(s) / ds of a fused activation, from its output y alone (each is monotonic there)."""
    y = g.y[0]
    p = (lambda k, d: float(params[k]) if len(params) > k else d)  # noqa: E731
    gt = (lambda t, v: g.Greater(t, g.scalar(v)))  # noqa: E731
    lt = (lambda t, v: g.Less(t, g.scalar(v)))  # noqa: E731
    if act == "Relu":
        return g.mask(gt(y, 0.0))
    if act == "LeakyRelu" and p(0, 0.01) >= 0:  # 1 where y > 0, alpha elsewhere
        return g.Add(g.scalar(p(0, 0.01)), g.Mul(g.scalar(1.0 - p(0, 0.01)), g.mask(gt(y, 0.0))))
    if act == "Tanh":
        return g.Sub(g.scalar(1.0), g.Mul(y, y))
    if act == "Sigmoid":
        return g.Mul(y, g.Sub(g.scalar(1.0), y))
    if act == "Clip" and len(params) >= 2:
        return g.mask(g.And(gt(y, p(0, 0.0)), lt(y, p(1, 0.0))))
    if act == "HardSigmoid":
        return g.Mul(g.scalar(p(0, 0.2)), g.mask(g.And(gt(y, 0.0), lt(y, 1.0))))
    if act == "Elu" and p(0, 1.0) > 0:  # 1 where y > 0, y + alpha elsewhere
        neg = g.mask(g.Not(gt(y, 0.0)))
        return g.Add(g.Sub(g.scalar(1.0), neg), g.Mul(neg, g.Add(y, g.scalar(p(0, 1.0)))))
    if act == "Softsign":
        d = g.Sub(g.scalar(1.0), g.Abs(y))
        return g.Mul(d, d)
    if act == "Softplus":
        return g.Sub(g.scalar(1.0), g.Exp(g.Neg(y)))
    raise g.fail(f"activation {act!r} with parameters {params} is not supported")


def _fused_dy(g, params: list[float]) -> None:
    """Replace dy by the gradient before the fused activation, dy act'(s)."""
    act = g.attr("activation")
    act = act.decode() if isinstance(act, bytes) else act
    if act and g.dy:
        g.dy = g.Mul(g.dy, _activation_slope(g, act, [float(v) for v in params]))
        g.dys = [g.dy]


@rule("FusedConv", inputs=(0, 1, 2, 3), domain=MS)
def fused_conv(g):
    """y = act(Conv(X, W, B) + Z) (onnxruntime's fusion of a Conv, an optional Add and an activation:
    Relu, LeakyRelu, Tanh, Sigmoid, Clip, HardSigmoid)  ->  ds = dy act'(s), act' read from y;
    dX, dW, dB as Conv's with ds,  dZ = ds"""
    from onnxprobe.autodiff.rules.conv import conv

    _fused_dy(g, list(g.attr("activation_params") or []))
    return conv(g) + [g.dy if g.wants(3) else None]


@rule("FusedGemm", inputs=(0, 1, 2), broadcast=(2,), domain=MS)
def fused_gemm(g):
    """y = act(alpha A' B' + beta C) (onnxruntime's fusion of a Gemm and an activation: Relu, LeakyRelu,
    Tanh, Sigmoid, HardSigmoid, Elu, Softsign, Softplus; activation_alpha / activation_beta their
    parameters)  ->  ds = dy act'(s), act' read from y; dA, dB, dC as Gemm's with ds"""
    from onnxprobe.autodiff.rules.matmul import gemm

    params = [g.attr("activation_alpha"), g.attr("activation_beta")]
    _fused_dy(g, [v for v in params[:next((k for k, v in enumerate(params) if v is None), 2)]])
    return gemm(g)


def _rows_grad(g, table: str, ids: str, ds: str) -> str:
    """d table of y = table[ids]: zeros with ds added at the rows read (repeated ids add up)."""
    ii = ids if g.engine.elem(ids) == TensorProto.INT64 else g.Cast(ids, to=TensorProto.INT64)
    zeros = g.ConstantOfShape(g.Shape(table), value=numpy_helper.from_array(np.zeros([1], g.dtype)))
    return g.ScatterND(zeros, g.unsqueeze(ii, [-1]), ds, reduction="add")


@rule("EmbedLayerNormalization", inputs=(2, 3, 4, 5, 6), broadcast=(5, 6), domain=MS)
def embed_layer_norm(g):
    """s = word[input_ids] + position[position_ids, or 0 .. S-1] (+ segment[segment_ids]), y = xhat gamma + beta,
    xhat = (s - mean) r over the last axis (BERT's embedding layer as onnxruntime's optimizer fuses it)  ->
    ds = r (gs - mean(gs) - xhat mean(gs xhat)), gs = dy gamma, plus the gradient of the optional output s;
    each table gets ds added at the rows it gave (repeated ids add up), d gamma = dy xhat, d beta = dy"""
    if g.opset < 16:
        raise g.needs_opset(16, "EmbedLayerNormalization's tables (a scatter-add)")
    ids, word, pos, gamma = g.x[0], g.x[2], g.x[3], g.x[5]
    shape2 = g.Shape(ids)
    if g.has(8):
        pids = g.Expand(g.x[8], shape2)
    else:
        seq = g.Range(g.const(np.array(0, np.int64)), g.squeeze(g.shape(ids, 1, 2), [0]), g.const(np.array(1, np.int64)))
        pids = g.Expand(g.unsqueeze(seq, [0]), shape2)
    s = g.Add(g.Gather(word, ids, axis=0), g.Gather(pos, pids, axis=0))
    if g.has(4):
        s = g.Add(s, g.Gather(g.x[4], g.x[1], axis=0))
    xc, inv = stats(g, s, [-1], g.attr("epsilon", 1e-12))
    xhat = g.Mul(xc, inv)
    ds = norm_input_grad(g, g.Mul(g.dy, gamma), xhat, inv, [-1]) if g.dy else None
    extra = g.dys[2] if len(g.dys) > 2 else None
    if extra:
        ds = extra if ds is None else g.Add(ds, extra)
    out = [None] * 7
    if ds is not None:
        out[2] = _rows_grad(g, word, ids, ds) if g.wants(2) else None
        out[3] = _rows_grad(g, pos, pids, ds) if g.wants(3) else None
        out[4] = _rows_grad(g, g.x[4], g.x[1], ds) if g.wants(4) and g.has(4) else None
    out[5] = g.Mul(g.dy, xhat) if g.dy and g.wants(5) else None
    out[6] = g.dy if g.dy and g.wants(6) else None
    return out
