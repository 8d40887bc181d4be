"""Normalisation layers (inference form for BatchNormalization: the running statistics are inputs), and
LRN (local response normalisation across channels, of AlexNet-era CNNs)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from onnxprobe.autodiff.registry import rule


def _per_channel(g, p: str, r: int) -> str:
    """(C,) -> (C, 1, ..., 1), which broadcasts against (N, C, *spatial)."""
    return g.Reshape(p, g.ints([-1] + [1] * (r - 2)))


@rule("BatchNormalization", inputs=(0, 1, 2, 3, 4))
def batch_norm(g):
    """y = scale (x - mean) r + B, r = 1 / sqrt(var + eps), per channel (axis 1)  ->
    dx = dy scale r,  dscale = sum(dy xhat),  dB = sum(dy),  dmean = -scale r sum(dy),
    dvar = -scale r^2 sum(dy xhat) / 2,  with xhat = (x - mean) r and sums over every axis but 1"""
    training = g.attr("training_mode", 0) or (g.opset < 14 and sum(1 for o in g.y if o) > 1)
    if training:
        raise g.fail("training-mode BatchNormalization (batch statistics) is not supported; export in eval mode")
    x, scale, bias, mean, var = g.x[:5]
    r = g.rank(x)
    axes = [0] + list(range(2, r))
    inv = g.Reciprocal(g.Sqrt(g.Add(var, g.scalar(g.attr("epsilon", 1e-5)))))
    need_xhat = g.wants(1) or g.wants(4)
    dx = None
    if g.wants(0):
        dx = g.Mul(g.dy, _per_channel(g, g.Mul(scale, inv), r))
    s_dy = g.reduce_sum(g.dy, axes, keepdims=0) if (g.wants(2) or g.wants(3)) else None
    s_dy_xhat = None
    if need_xhat:  # sum(dy xhat) = r sum(dy (x - mean)): the per-channel r after the sum
        s_dy_xhat = g.Mul(g.reduce_sum(g.Mul(g.dy, g.Sub(x, _per_channel(g, mean, r))), axes, keepdims=0), inv)
    dmean = g.Neg(g.Mul(s_dy, g.Mul(scale, inv))) if g.wants(3) else None
    dvar = g.Mul(s_dy_xhat, g.Mul(g.Mul(scale, g.Mul(inv, inv)), g.scalar(-0.5))) if g.wants(4) else None
    return [dx, s_dy_xhat if g.wants(1) else None, s_dy if g.wants(2) else None, dmean, dvar]


def norm_input_grad(g, gs: str, xhat: str, inv: str, axes) -> str:
    """dx = r (gs - mean(gs) - xhat mean(gs xhat)), the means over the normalised axes"""
    m1 = g.reduce("ReduceMean", gs, axes, keepdims=1)
    m2 = g.reduce("ReduceMean", g.Mul(gs, xhat), axes, keepdims=1)
    return g.Mul(inv, g.Sub(g.Sub(gs, m1), g.Mul(xhat, m2)))


def stats(g, x: str, axes, eps: float):
    mean = g.reduce("ReduceMean", x, axes, keepdims=1)
    xc = g.Sub(x, mean)
    var = g.reduce("ReduceMean", g.Mul(xc, xc), axes, keepdims=1)
    inv = g.Reciprocal(g.Sqrt(g.Add(var, g.scalar(eps))))
    return xc, inv


@rule("LayerNormalization", inputs=(0, 1, 2), broadcast=(1, 2))
def layer_norm(g):
    """y = xhat scale + B, xhat = (x - mean) r, r = 1 / sqrt(var + eps), over the axes from `axis` on  ->
    dx = r (gs - mean(gs) - xhat mean(gs xhat)) with gs = dy scale,  dscale = dy xhat,  dB = dy
    (both summed back to their shape), plus the gradients of the optional outputs Mean and InvStdDev r:
    dmean / N and -dr r^2 xhat / N (d mean / dx = 1 / N, d r / dx = -r^3 (x - mean) / N). Mean and r come
    from the forward node's optional outputs when they are in the input's precision, else they are
    recomputed."""
    x, scale = g.x[0], g.x[1]
    r = g.rank(x)
    a = g.attr("axis", -1)
    a = a + r if a < 0 else a
    axes = list(range(a, r))
    eps = g.attr("epsilon", 1e-5)
    stash = g.attr("stash_type", 1)
    if g.elem == TensorProto.FLOAT and stash == TensorProto.FLOAT:
        mean = g.forward_output(1, "mean")
        inv = g.forward_output(2, "inv_std_dev")
        xhat = g.Mul(g.Sub(x, mean), inv)
    else:
        xc, inv = stats(g, x, axes, eps)
        xhat = g.Mul(xc, inv)
    dx = norm_input_grad(g, g.Mul(g.dy, scale), xhat, inv, axes) if g.dy and g.wants(0) else None
    if g.wants(0):
        dx = stats_grad(g, dx, x, xhat, inv, axes, (1, 2))
    dscale = g.Mul(g.dy, xhat) if g.dy and g.wants(1) else None
    return [dx, dscale, g.dy if g.dy and g.wants(2) else None]


def stats_grad(g, dx: str | None, x: str, xhat: str, inv: str, axes, outs) -> str | None:
    """dx plus the gradients of the statistics outputs ``outs`` (slots 1 and 2 of the node: mean and
    r = 1 / sqrt(var + eps), kept over ``axes``): d mean / dx = 1 / N,  d r / dx = -r^3 (x - mean) / N =
    -r^2 xhat / N. They are in the stash type (float32 for a float16 x): cast to the gradient's."""
    d = {k: g.dys[k] for k in outs if 0 <= k < len(g.dys) and g.dys[k]}
    if not d:
        return dx
    for k, t in d.items():
        if g.engine.elem(g.y[k]) not in (None, g.elem):
            d[k] = g.Cast(t, to=g.elem)
    t = None
    if outs[1] in d:
        t = g.Neg(g.Mul(g.Mul(d[outs[1]], g.Mul(inv, inv)), xhat))
    if outs[0] in d:
        t = d[outs[0]] if t is None else g.Add(t, d[outs[0]])
    t = g.Div(t, g.count(x, axes))
    if dx is not None:
        return g.Add(dx, t)
    return t if outs[1] in d else g.Expand(t, g.Shape(x))  # dmean alone has the statistics' shape


@rule("InstanceNormalization", inputs=(0, 1, 2))
def instance_norm(g):
    """y = scale[c] xhat + B[c], xhat = (x - mean) r, statistics per (n, c) over the spatial axes  ->
    dx = r (gs - mean(gs) - xhat mean(gs xhat)) with gs = dy scale,  dscale = sum(dy xhat),  dB = sum(dy)"""
    x, scale = g.x[0], g.x[1]
    r = g.rank(x)
    sp = list(range(2, r))
    xc, inv = stats(g, x, sp, g.attr("epsilon", 1e-5))
    xhat = g.Mul(xc, inv)
    dx = norm_input_grad(g, g.Mul(g.dy, _per_channel(g, scale, r)), xhat, inv, sp) if g.wants(0) else None
    axes = [0] + sp
    dscale = g.reduce_sum(g.Mul(g.dy, xhat), axes, keepdims=0) if g.wants(1) else None
    db = g.reduce_sum(g.dy, axes, keepdims=0) if g.wants(2) else None
    return [dx, dscale, db]


def _channel_window_sum(g, t: str, before: int, after: int) -> str:
    """s[n, c, ...] = sum of t[n, k, ...] for k in [c - before, c + after] (inside [0, C)): one Conv of ones
    along the channel axis, read as a spatial axis of a one-channel image (N, 1, C, P)."""
    dims = g.static_dims(t)
    if dims is not None:
        flat = g.Reshape(t, g.ints([dims[0], 1, dims[1], -1]))
    else:
        flat = g.Reshape(t, g.Concat(g.shape(t, 0, 1), g.ints([1]), g.shape(t, 1, 2), g.ints([-1]), axis=0))
    size = before + after + 1
    s = g.Conv(flat, g.const(np.ones((1, 1, size, 1), g.dtype)), pads=[before, 0, after, 0], kernel_shape=[size, 1])
    return g.Reshape(s, g.ints(list(dims)) if dims is not None else g.Shape(t))


@rule("LRN")
def lrn(g):
    """y = x d^-b, d = bias + alpha / size * S, S[c] = sum of x[k]^2 over k in [c - lo, c + hi] with
    lo = floor((size - 1) / 2), hi = ceil((size - 1) / 2)  ->
    dx[k] = dy[k] d[k]^-b - 2 alpha b / size x[k] sum over c in [k - hi, k + lo] of dy[c] x[c] d[c]^(-b - 1)"""
    x = g.x[0]
    size = int(g.attr("size"))
    alpha, beta, bias = float(g.attr("alpha", 1e-4)), float(g.attr("beta", 0.75)), float(g.attr("bias", 1.0))
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    d = g.Add(g.Mul(_channel_window_sum(g, g.Mul(x, x), lo, hi), g.scalar(alpha / size)), g.scalar(bias))
    d_pow = g.Pow(d, g.scalar(-beta))
    t = g.Div(g.Mul(g.Mul(g.dy, x), d_pow), d)
    back = _channel_window_sum(g, t, hi, lo)
    return [g.Sub(g.Mul(g.dy, d_pow), g.Mul(g.Mul(x, back), g.scalar(2.0 * alpha * beta / size)))]


@rule("GroupNormalization", inputs=(0, 1, 2))
def group_norm(g):
    """y = xhat scale + B, xhat = (x - mean) r, statistics per (n, group of C / G channels) over the group's
    channels and the spatial axes; scale and B per channel (opset 21) or per group (opset 18)  ->
    dx = r (gs - mean(gs) - xhat mean(gs xhat)) per group, gs = dy scale;  dscale = sum(dy xhat),
    dB = sum(dy), over all but the channel (group) axis"""
    x, scale = g.x[0], g.x[1]
    groups = int(g.attr("num_groups"))
    r = g.rank(x)
    per_channel = g.opset >= 21
    grouped = g.Concat(g.shape(x, 0, 1), g.ints([groups, -1]), axis=0)
    xg = g.Reshape(x, grouped)
    xc, inv = stats(g, xg, [2], g.attr("epsilon", 1e-5))
    xhat_g = g.Mul(xc, inv)
    dyg = g.Reshape(g.dy, grouped)
    dx = dscale = db = None
    if g.wants(0):
        gs = g.Mul(g.dy, _per_channel(g, scale, r)) if per_channel else None
        gs_g = g.Reshape(gs, grouped) if per_channel else g.Mul(dyg, g.Reshape(scale, g.ints([1, groups, 1])))
        dx = g.Reshape(norm_input_grad(g, gs_g, xhat_g, inv, [2]), g.Shape(x))
    if per_channel:
        axes = [0] + list(range(2, r))
        if g.wants(1):
            dscale = g.reduce_sum(g.Mul(g.dy, g.Reshape(xhat_g, g.Shape(x))), axes, keepdims=0)
        if g.wants(2):
            db = g.reduce_sum(g.dy, axes, keepdims=0)
    else:
        if g.wants(1):
            dscale = g.reduce_sum(g.Mul(dyg, xhat_g), [0, 2], keepdims=0)
        if g.wants(2):
            db = g.reduce_sum(dyg, [0, 2], keepdims=0)
    return [dx, dscale, db]


@rule("RMSNormalization", inputs=(0, 1), broadcast=(1,))
def rms_norm(g):
    """y = xhat scale, xhat = x r, r = 1 / sqrt(mean(x^2) + eps) over the axes from `axis` on  ->
    dx = r (gs - xhat mean(gs xhat)) with gs = dy scale,  dscale = dy xhat (summed back to its shape)"""
    return rms_grads(g, g.x[0], g.attr("epsilon", 1e-5), None)


@rule("SimplifiedLayerNormalization", inputs=(0, 1), broadcast=(1,))
def simplified_layer_norm(g):
    """onnxruntime's RMS norm (its optimizer's fusion of x / sqrt(mean(x^2) + eps) * scale): y = xhat scale,
    xhat = x r, r = 1 / sqrt(mean(x^2) + eps) over the axes from `axis` on  ->  dx = r (gs - xhat mean(gs xhat))
    with gs = dy scale, plus -dr r^2 xhat / N from the optional output r (d r / dx = -r^3 x / N),
    dscale = dy xhat (summed back to its shape)"""
    return rms_grads(g, g.x[0], g.attr("epsilon", 1e-5), 1)


def rms_grads(g, x: str, eps: float, inv_slot: int | None, scale_slot: int = 1, want_x: bool | None = None):
    """[dx, dscale] of y = x r scale, r = 1 / sqrt(mean(x^2) + eps) over the axes from `axis` on; the
    gradient of output ``inv_slot`` (r, in the stash type) is added to dx when it has one. ``want_x``:
    whether dx is needed (default: whether input 0 wants a gradient)."""
    want_x = g.wants(0) if want_x is None else want_x
    scale = g.x[scale_slot]
    rk = g.rank(g.x[0])  # x's shape (SkipSimplifiedLayerNormalization's x is input + skip)
    a = g.attr("axis", -1)
    axes = list(range(a + rk if a < 0 else a, rk))
    ms = g.reduce("ReduceMean", g.Mul(x, x), axes, keepdims=1)
    inv = g.Reciprocal(g.Sqrt(g.Add(ms, g.scalar(eps))))
    xhat = g.Mul(x, inv)
    dx = None
    if want_x and g.dy:
        gs = g.Mul(g.dy, scale)
        dx = g.Mul(inv, g.Sub(gs, g.Mul(xhat, g.reduce("ReduceMean", g.Mul(gs, xhat), axes, keepdims=1))))
    if inv_slot is not None and want_x:  # no mean output: slot -1 is never one
        dx = stats_grad(g, dx, x, xhat, inv, axes, (-1, inv_slot))
    return [dx, g.Mul(g.dy, xhat) if g.dy and g.wants(scale_slot) else None]


@rule("MeanVarianceNormalization")
def mean_variance_norm(g):
    """y = xhat = (x - mean) r, r = 1 / sqrt(var), statistics over `axes` (default 0, 2, 3), no epsilon
    (onnxruntime's kernel; the spec's function adds 1e-9 to sqrt(var))  ->
    dx = r (dy - mean(dy) - xhat mean(dy xhat)), the means over the axes"""
    x = g.x[0]
    axes = g.norm_axes(g.attr("axes", [0, 2, 3]), g.rank(x))
    xc, inv = stats(g, x, axes, 0.0)
    return [norm_input_grad(g, g.dy, g.Mul(xc, inv), inv, axes)]


@rule("LpNormalization")
def lp_norm(g):
    """y = x / n, n = ||x||_p along `axis` (default -1), p = 1 or 2 (default 2)  ->
    dx = (dy - sum(dy y) dn/dx) / n, with dn/dx = y for p = 2 and sign(x) for p = 1, the sum along the axis.
    A vector of zeros (onnxruntime's y is 0 there) has no derivative: its gradient is NaN or Inf."""
    x = g.x[0]
    p = int(g.attr("p", 2))
    if p not in (1, 2):
        raise g.fail(f"p={p} is not a norm LpNormalization defines (1 or 2)")
    axis = g.norm_axes([g.attr("axis", -1)], g.rank(x))
    n = g.reduce("ReduceL2" if p == 2 else "ReduceL1", x, axis, keepdims=1)
    y = g.y[0]
    dn = y if p == 2 else g.Sign(x)
    s = g.reduce_sum(g.Mul(g.dy, y), axis, keepdims=1)
    return [g.Div(g.Sub(g.dy, g.Mul(s, dn)), n)]
