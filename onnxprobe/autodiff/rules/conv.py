"""Convolutions, expressed with convolutions: dX with ConvTranspose (or Conv), dW with a Conv whose batch
and channel axes are swapped, so that they run wherever the forward pass runs. Any group, stride,
dilation and padding; auto_pad is turned into explicit pads (which needs the spatial shape when it is
SAME_UPPER / SAME_LOWER)."""

from __future__ import annotations

from dataclasses import dataclass

from onnxprobe.autodiff.registry import rule


@dataclass
class Geometry:
    n: int  # spatial rank
    k: list[int]
    s: list[int]
    d: list[int]
    pb: list[int]  # pads at the beginning of each spatial axis
    pe: list[int]  # pads at the end
    group: int


def _auto_pads(g, x: str, k, s, d, transposed: bool = False):
    """Explicit (begin, end) pads for the node's auto_pad / pads attributes."""
    n = len(k)
    auto = g.attr("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    pads = g.attr("pads")
    if auto in ("NOTSET", "") and pads:
        return list(pads[:n]), list(pads[n:])
    if auto in ("NOTSET", "", "VALID"):
        return [0] * n, [0] * n
    xs = g.sshape(x)
    sp = None if xs is None else xs[2:]
    if sp is None or not all(isinstance(v, int) for v in sp):
        raise g.fail(f"auto_pad={auto} needs the spatial shape of {x!r}; fix the input size with --shape")
    pb, pe = [], []
    for i in range(n):
        if transposed:
            total = s[i] * (sp[i] - 1) + (k[i] - 1) * d[i] + 1 - sp[i] * s[i]
        else:
            out = -(-sp[i] // s[i])
            total = max((out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - sp[i], 0)
        small, big = total // 2, total - total // 2
        pb.append(big if auto == "SAME_LOWER" else small)
        pe.append(small if auto == "SAME_LOWER" else big)
    return pb, pe


def geometry(g, x: str, w: str, transposed: bool = False) -> Geometry:
    r = g.rank(x)
    n = r - 2
    k = g.attr("kernel_shape")
    if not k:
        ws = g.sshape(w)
        if ws is None or not all(isinstance(v, int) for v in ws[2:]):
            raise g.fail("kernel shape unknown")
        k = list(ws[2:])
    k = list(k)
    s = list(g.attr("strides") or [1] * n)
    d = list(g.attr("dilations") or [1] * n)
    pb, pe = _auto_pads(g, x, k, s, d, transposed)
    return Geometry(n, k, s, d, pb, pe, int(g.attr("group", 1)))


def _perm01(r: int) -> list[int]:
    return [1, 0] + list(range(2, r))


def weight_grad(g, x: str, dy: str, geo: Geometry, c_in: int | None, out_ref: str | None = None) -> str:
    """dW[o, c, k] = sum_{n, p} dy[n, o, p] xpad[n, grp(o) Cg + c, p s + k d], as one batched GEMM over
    an im2col of x, (N, G, Cg K, P), times dy^T (N, G, P, Og), summed over the batch. The im2col is one
    Conv of each channel of x with K one-hot kernels (same strides, dilations and pads). ``out_ref``
    holds the output's spatial shape (dy's by default)."""
    r = geo.n + 2
    G = geo.group
    if c_in is None:
        raise g.fail("the channel count of the convolution input is unknown")
    cg = c_in // G
    out_ref = out_ref or dy
    kk = 1
    for v in geo.k:
        kk *= v
    if kk == 1 and all(v == 1 for v in geo.s) and not any(geo.pb + geo.pe):
        cols = x  # 1x1 convolution: x is its own im2col
    else:
        # im2col in one Conv: every channel on its own, against K one-hot kernels -> (N C, K, *out)
        import numpy as np

        onehot = np.eye(kk, dtype=g.dtype).reshape([kk, 1] + list(geo.k))
        xs = g.static_dims(x)
        per_channel = g.ints([-1, 1] + list(xs[2:])) if xs is not None else g.Concat(g.ints([-1, 1]), g.shape(x, 2), axis=0)
        cols = g.Conv(g.Reshape(x, per_channel), g.const(onehot), strides=geo.s, dilations=geo.d,
                      pads=geo.pb + geo.pe, kernel_shape=geo.k)
    p_dim = _p_dim(g, out_ref)
    x4 = g.Reshape(cols, g.Concat(g.ints([-1, G, cg * kk]), p_dim, axis=0))  # (N, G, Cg K, P)
    dy4 = g.Reshape(dy, g.Concat(g.ints([0, G, -1]), p_dim, axis=0))  # (N, G, Og, P)
    prod = g.MatMul(x4, g.Transpose(dy4, perm=[0, 1, 3, 2]))  # (N, G, Cg K, Og)
    s = g.reduce_sum(prod, [0], keepdims=0)  # (G, Cg K, Og)
    s = g.Transpose(s, perm=[0, 2, 1])  # (G, Og, Cg K)
    return g.Reshape(s, g.ints([-1, cg] + list(geo.k)))


def _p_dim(g, t: str) -> str:
    """[P]: the number of spatial positions of t (static when known)."""
    s = g.static_dims(t)
    if s is not None:
        p = 1
        for v in s[2:]:
            p *= v
        return g.ints([p])
    return g.reduce("ReduceProd", g.shape(t, 2), [0], keepdims=1)


def _offsets(k):
    import numpy as np

    return list(np.ndindex(*k))


def input_grad_transposed(g, dy: str, w: str, x: str, geo: Geometry) -> str:
    """dX = ConvTranspose(dy, W) cropped to x: pads at the start are cut, and the rows past the last
    window (when (H + pads - k) is not a multiple of the stride) get zeros."""
    r = geo.n + 2
    xs = g.static_dims(x)
    ys = g.static_dims(g.y[0])
    if xs is not None and ys is not None:
        op = [xs[2 + i] + geo.pb[i] + geo.pe[i] - (geo.s[i] * (ys[2 + i] - 1) + (geo.k[i] - 1) * geo.d[i] + 1)
              for i in range(geo.n)]
        if all(0 <= v < max(geo.s[i], geo.d[i]) for i, v in enumerate(op)):
            return g.ConvTranspose(dy, w, strides=geo.s, dilations=geo.d, pads=geo.pb + geo.pe, group=geo.group,
                                   kernel_shape=geo.k, output_padding=op if any(op) else None)
    full = g.ConvTranspose(dy, w, strides=geo.s, dilations=geo.d, group=geo.group, kernel_shape=geo.k)
    return crop(g, full, x, geo)


def crop(g, full: str, x: str, geo: Geometry) -> str:
    """Cut a full-size scatter result (covering [0, (Ho-1) s + (k-1) d + 1) of the padded input) down to x."""
    r = geo.n + 2
    extra = [v - 1 for v in geo.s]
    if any(extra):
        full = g.pad(full, [0] * r + [0, 0] + extra)
    axes = list(range(2, r))
    ends = g.Add(g.shape(x, 2), g.ints(geo.pb))
    return g.slice(full, geo.pb, ends, axes)


@rule("Conv", inputs=(0, 1, 2))
def conv(g):
    """y[n, o, p] = sum_{c, k} W[o, c, k] xpad[n, grp(o) Cg + c, p s + k d] + B[o]  ->
    dX = ConvTranspose(dy, W) (same strides, dilations, group, pads),
    dW = Conv(x^T, dy^T) with stride d and dilation s (see weight_grad),  dB = sum(dy, all axes but 1)"""
    x, w = g.x[0], g.x[1]
    geo = geometry(g, x, w)
    dx = dw = db = None
    if g.wants(0):
        dx = input_grad_transposed(g, g.dy, w, x, geo)
    if g.wants(1):
        ws = g.sshape(w)
        c_in = ws[1] * geo.group if ws is not None and isinstance(ws[1], int) else None
        dw = weight_grad(g, x, g.dy, geo, c_in, out_ref=g.y[0])
    if g.wants(2):
        db = g.reduce_sum(g.dy, [0] + list(range(2, geo.n + 2)), keepdims=0)
    return [dx, dw, db]


def _convtranspose_pads(g, x: str, geo: Geometry) -> Geometry:
    """ConvTranspose crops its full output by pads; output_shape / auto_pad decide them when given."""
    out_shape = g.attr("output_shape")
    auto = g.attr("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    op = list(g.attr("output_padding") or [0] * geo.n)
    if not out_shape and auto in ("NOTSET", "", "VALID"):
        return geo
    xs = g.static_dims(x)
    if xs is None:
        raise g.fail("output_shape / auto_pad need the input's static shape; fix it with --shape")
    target = list(out_shape)[-geo.n:] if out_shape else [v * s for v, s in zip(xs[2:], geo.s)]
    pb, pe = [], []
    for i in range(geo.n):
        total = geo.s[i] * (xs[2 + i] - 1) + op[i] + (geo.k[i] - 1) * geo.d[i] + 1 - target[i]
        small, big = total // 2, total - total // 2
        lower = auto == "SAME_LOWER"
        pb.append(big if lower else small)
        pe.append(small if lower else big)
    return Geometry(geo.n, geo.k, geo.s, geo.d, pb, pe, geo.group)


@rule("ConvTranspose", inputs=(0, 1, 2))
def conv_transpose(g):
    """y = crop(full), full[n, g Cg_out + o, p s + k d] += x[n, c, p] W[c, o, k] (+ B)  ->
    dX = Conv(dy, W) with the same pads, strides, dilations and group (W read as a conv weight),
    dW = weight_grad(dy, x) (a conv weight gradient with the roles of x and dy swapped),  dB = sum(dy)"""
    x, w = g.x[0], g.x[1]
    geo = geometry(g, x, w)
    geo = _convtranspose_pads(g, x, geo)
    # the full output is padded at the end by output_padding: the Conv below reads zeros there
    dx = dw = db = None
    if g.wants(0):
        dx = g.Conv(g.dy, w, strides=geo.s, dilations=geo.d, pads=geo.pb + geo.pe, group=geo.group, kernel_shape=geo.k)
    if g.wants(1):
        ws = g.sshape(w)
        ys = g.sshape(g.y[0])
        c_out = ys[1] if ys is not None and isinstance(ys[1], int) else (
            ws[1] * geo.group if ws is not None and isinstance(ws[1], int) else None)
        dw = weight_grad(g, g.dy, x, geo, c_out, out_ref=x)
    if g.wants(2):
        db = g.reduce_sum(g.dy, [0] + list(range(2, geo.n + 2)), keepdims=0)
    return [dx, dw, db]
