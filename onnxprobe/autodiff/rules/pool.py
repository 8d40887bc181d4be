"""Pooling. Windows scatter their gradient back with a ConvTranspose whose kernel places each value at its
window position; MaxPool (opset >= 16) uses the Indices output of the forward node and a scatter-add; LpPool
scales dy by the window's norm before the scatter and by the input's own factor after."""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from onnxprobe.autodiff.registry import rule
from onnxprobe.autodiff.rules.conv import Geometry, auto_pads, crop


def _pool_geometry(g, x: str) -> Geometry:
    r = g.rank(x)
    n = r - 2
    k = list(g.attr("kernel_shape"))
    s = list(g.attr("strides") or [1] * n)
    d = list(g.attr("dilations") or [1] * n)
    _refuse_same_dilated(g, d)
    pb, pe = auto_pads(g, x, k, s, d)
    # windows that start inside the input but run past the padded end (ceil_mode=1, or an input smaller than
    # the kernel, where onnxruntime still makes one window): pad the end further
    # only the spatial sizes matter: a dynamic batch (an export's) leaves them known
    xs, ys = (s if s is not None and len(s) == r and all(isinstance(v, int) for v in s[2:]) else None
              for s in (g.sshape(x), g.sshape(g.y[0])))
    if xs is not None and ys is not None:
        pe = [max(pe[i], (ys[2 + i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 - xs[2 + i] - pb[i]) for i in range(n)]
    elif g.attr("ceil_mode", 0):
        raise g.unknown_size("ceil_mode=1 needs static spatial input and output sizes")
    return Geometry(n, k, s, d, pb, pe, 1)


def _refuse_same_dilated(g, d: list[int]) -> None:
    """onnxruntime pads a dilated pool of auto_pad SAME_* as if undilated (1x2x4 out of 6 where the spec and shape
    inference say 1x2x6): the gradient of the spec's windows is not that of what it computed (its weight on other
    columns), and the sizes the backward graph is built for are not the run's. Refused, in one line."""
    auto = g.attr("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else str(auto)
    if auto.startswith("SAME") and any(v != 1 for v in d):
        raise g.fail(f"auto_pad={auto} with dilations {d}: onnxruntime pads such a pool otherwise than the ONNX spec, "
                     "so no gradient rule holds for what it computes (give explicit pads)")


def _scatter_windows(g, stacked: str, kernel: np.ndarray, x: str, geo: Geometry) -> str:
    """``stacked``: (N, C, K, *out) values, one per window position; place value k of window p at
    p s + k d (summing overlaps) and crop to x's shape."""
    kk = kernel.shape[0]
    flat = g.Reshape(stacked, g.Concat(g.ints([-1, kk]), g.shape(g.y[0], 2), axis=0))  # (N C, K, *out)
    full = g.ConvTranspose(flat, g.const(kernel.astype(g.dtype)), strides=geo.s, dilations=geo.d,
                           kernel_shape=geo.k)  # (N C, 1, *full)
    full = g.Reshape(full, g.Concat(g.shape(x, 0, 2), g.shape(full, 2), axis=0))
    return crop(g, full, x, geo)


def _one_hot_kernel(k: list[int]) -> np.ndarray:
    kk = int(np.prod(k))
    return np.eye(kk).reshape([kk, 1] + list(k))


@rule("MaxPool")
def max_pool(g):
    """y[p] = max_{k in window p} xpad[p s + k d]  ->  dx[i] = sum of dy[p] over the windows p whose
    (first) maximum is at i. Opset >= 16: scatter-add dy at the forward node's Indices. Older opsets:
    for each kernel offset k, a strided slice of x equal to y marks the first maximum; the marked dy
    values are placed back with a one-hot ConvTranspose."""
    x, y = g.x[0], g.y[0]
    _refuse_same_dilated(g, list(g.attr("dilations") or []))
    if g.opset >= 16 and g.attr("storage_order", 0) == 0:
        idx = g.forward_output(1, "indices")
        size = g.Reshape(g.Size(x), g.ints([1]))
        zeros = g.ConstantOfShape(size, value=_zero(g))
        dx = g.ScatterElements(zeros, g.flat(idx), g.flat(g.dy), axis=0, reduction="add")
        return [g.Reshape(dx, g.Shape(x))]
    geo = _pool_geometry(g, x)
    r = geo.n + 2
    low = np.finfo(g.dtype).min
    xp = g.pad(x, [0, 0] + geo.pb + [0, 0] + geo.pe, value=g.scalar(low))
    out_sp = g.shape(y, 2)
    found = None
    parts = []
    for off in np.ndindex(*geo.k):
        start = [o * d for o, d in zip(off, geo.d)]
        # ends = start + (out - 1) * s + 1
        ends = g.Add(g.Mul(g.Sub(out_sp, g.ints([1] * geo.n)), g.ints(geo.s)), g.ints([st + 1 for st in start]))
        xo = g.slice(xp, start, ends, list(range(2, r)), geo.s)
        eq = g.Equal(xo, y)
        take = eq if found is None else g.And(eq, g.Not(found))
        found = eq if found is None else g.Or(found, eq)
        parts.append(g.unsqueeze(g.Mul(g.dy, g.mask(take)), [2]))
    stacked = parts[0] if len(parts) == 1 else g.Concat(*parts, axis=2)
    return [_scatter_windows(g, stacked, _one_hot_kernel(geo.k), x, geo)]


def _zero(g):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.zeros([1], g.dtype))


@rule("AveragePool")
def average_pool(g):
    """y[p] = sum_{k in window p} xpad[p s + k d] / count[p]  ->  dx = ConvTranspose(dy / count, ones)
    cropped to x; count is the kernel size, or (count_include_pad=0) the number of real inputs in the
    window, itself computed with a Conv of ones. A window that runs past the padded end (ceil_mode=1)
    counts only its positions inside the padded input, as onnxruntime and torch divide by."""
    x = g.x[0]
    geo = _pool_geometry(g, x)
    ones_k = np.ones([1, 1] + geo.k)
    pe0 = auto_pads(g, x, geo.k, geo.s, geo.d)[1]
    extra = [e - e0 for e, e0 in zip(geo.pe, pe0)]
    include = g.attr("count_include_pad", 0) or not any(geo.pb + pe0)
    if include and not any(extra):
        scaled = g.Mul(g.dy, g.scalar(1.0 / float(np.prod(geo.k))))
    else:
        # ones over the input (count_include_pad=0) or over the input and its pads; what lies beyond is 0
        grow = [b + e for b, e in zip(geo.pb, pe0)] if include else [0] * geo.n
        pads = [0] * geo.n + extra if include else geo.pb + geo.pe
        size = g.Add(g.shape(x, 2), g.ints(grow))
        ones_x = g.ConstantOfShape(g.Concat(g.ints([1, 1]), size, axis=0), value=_one(g))
        count = g.Conv(ones_x, g.const(ones_k.astype(g.dtype)), strides=geo.s, dilations=geo.d,
                       pads=pads, kernel_shape=geo.k)
        scaled = g.Div(g.dy, count)
    return [_scatter_windows(g, g.unsqueeze(scaled, [2]), ones_k.reshape([1, 1] + geo.k), x, geo)]


def _one(g):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.ones([1], g.dtype))


@rule("GlobalAveragePool")
def global_average_pool(g):
    """y[n, c] = mean over the spatial axes of x[n, c]  ->  dx = dy / (H W ...) broadcast over them"""
    x = g.x[0]
    r = g.rank(x)
    s = g.static_dims(x)
    inv = g.scalar(1.0 / float(np.prod(s[2:]))) if s is not None else g.Reciprocal(g.count(x, list(range(2, r))))
    return [g.Expand(g.Mul(g.dy, inv), g.Shape(x))]


@rule("GlobalMaxPool")
def global_max_pool(g):
    """y[n, c] = max over the spatial axes of x[n, c]  ->  dx = dy where x == y, split evenly between ties"""
    x = g.x[0]
    r = g.rank(x)
    mask = g.Equal(x, g.y[0])
    ties = g.reduce_sum(g.Cast(mask, to=g.elem), list(range(2, r)), keepdims=1)
    return [g.Mul(g.Div(g.dy, ties), g.mask(mask))]



@rule("LpPool")
def lp_pool(g):
    """y[p] = (sum_{k in window p} |xpad[p s + k d]|^P)^(1/P), the pads zeros  ->
    dx[i] = sign(x_i) |x_i|^(P-1) sum over the windows p holding i of dy[p] / y[p]^(P-1), the sum a
    ConvTranspose of ones as AveragePool's (P = 1: sign(x) times the summed dy; P = 2: x sum dy / y). A
    window of zeros (y = 0) passes no gradient."""
    x, y = g.x[0], g.y[0]
    p = int(g.attr("p", 2))
    if p < 1:
        raise g.fail(f"p={p} is not a norm (LpPool needs p >= 1)")
    geo = _pool_geometry(g, x)
    if p == 1:
        z, f = g.dy, g.Sign(x)
    else:
        yp = y if p == 2 else g.Pow(y, g.scalar(float(p - 1)))
        z = g.Where(g.Equal(y, g.scalar(0.0)), g.scalar(0.0), g.Div(g.dy, yp))
        f = x if p == 2 else g.Mul(g.Sign(x), g.Pow(g.Abs(x), g.scalar(float(p - 1))))
    ones_k = np.ones([1, 1] + geo.k)
    return [g.Mul(_scatter_windows(g, g.unsqueeze(z, [2]), ones_k, x, geo), f)]


@rule("GlobalLpPool")
def global_lp_pool(g):
    """y[n, c] = (sum over the spatial axes of |x[n, c]|^P)^(1/P)  ->  dx = dy sign(x) |x|^(P-1) / y^(P-1)
    (P = 1: dy sign(x); P = 2: dy x / y); a channel of zeros (y = 0) passes no gradient"""
    x, y = g.x[0], g.y[0]
    p = float(g.attr("p", 2))
    if p < 1:
        raise g.fail(f"p={p:g} is not a norm (GlobalLpPool needs p >= 1)")
    if p == 1:
        return [g.Mul(g.dy, g.Sign(x))]
    yp = y if p == 2 else g.Pow(y, g.scalar(p - 1))
    z = g.Where(g.Equal(y, g.scalar(0.0)), g.scalar(0.0), g.Div(g.dy, yp))
    f = x if p == 2 else g.Mul(g.Sign(x), g.Pow(g.Abs(x), g.scalar(p - 1)))
    return [g.Mul(z, f)]


@rule("MaxUnpool")
def max_unpool(g):
    """y = zeros (output_shape or the default unpooled shape), y.flat[I[i]] = X[i] (I: MaxPool's indices
    into the flattened output, written in order)  ->  dX[i] = dy.flat[I[i]] where X[i] is the last write
    to I[i], else 0 (overlapping windows repeat indices: onnxruntime keeps the last write)"""
    if g.opset < 11:
        raise g.needs_opset(11, "MaxUnpool (a ScatterElements)")
    x, idx = g.x[0], g.x[1]
    at = g.flat(idx)
    dx = g.Gather(g.flat(g.dy), at, axis=0)
    # which write wins each output position: scatter each write's own position, read it back
    n = g.Size(x)
    ids = g.Range(g.const(np.array(0, np.int64)), n, g.const(np.array(1, np.int64)))
    blank = g.ConstantOfShape(g.Reshape(g.Size(g.y[0]), g.ints([1])),
                              value=numpy_helper.from_array(np.full([1], -1, np.int64)))
    won = g.Gather(g.b.op("ScatterElements", blank, at, ids, axis=0), at, axis=0)
    return [g.Reshape(g.Mul(dx, g.mask(g.Equal(won, ids))), g.Shape(x))]
