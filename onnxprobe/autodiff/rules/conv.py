"""Convolutions, expressed with convolutions and GEMMs, so that they run wherever the forward pass runs.
Any group, stride, dilation and padding; auto_pad is turned into explicit pads (which needs the spatial
shape when it is SAME_UPPER / SAME_LOWER).

Which formulation is used is a matter of speed in onnxruntime (CPU numbers, measured per layer of
MobileNet-like models; every formulation computes the same values):

- dX, unit strides: a Conv of dy with the flipped, group-transposed kernel. The kernel transform reads
  only W, so onnxruntime folds it into a constant and runs the Conv with its fast (NCHWc) kernels, as it
  does the forward Conv: about 3x faster than ConvTranspose for depthwise layers;
- dX, other strides: ConvTranspose (a Conv of a zero-dilated dy wastes stride^2 of its work);
- dW, 1x1 kernels at unit stride: one GEMM, x is its own im2col;
- dW, dense kernels at unit stride with more output positions than output channels (early layers): one
  GEMM per kernel offset over a window of the padded x (no im2col tensor; ~1.5x faster there);
- dW, depthwise (one input and one output channel per group) at unit stride: for each kernel offset k,
  sum(dy * x shifted by k) (a Slice, a Mul and a ReduceSum): no im2col tensor K times the size of x;
- dW otherwise: an im2col (one Conv with one-hot kernels) and a batched GEMM with dy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onnxprobe.autodiff.registry import rule
from onnxprobe.text import clip


# The per-offset dW formulation (K GEMMs, K windows) pays off over one im2col GEMM once the im2col tensor
# is large; below this many elements (1 MiB of float32) the K extra nodes cost more than they save.
PER_OFFSET_MIN_COLUMNS = 1 << 18
# ... and while its weight-sized last transpose stays small next to the GEMMs: output channels O at most this
# many times the output positions P (ResNet-18: 64 and 128 channels on 56x56 and 28x28 outputs qualify,
# 256 and 512 channels on 14x14 and 7x7 do not)
PER_OFFSET_MAX_CHANNELS_PER_POSITION = 1.0


@dataclass
class Geometry:
    n: int  # spatial rank
    k: list[int]
    s: list[int]
    d: list[int]
    pb: list[int]  # pads at the beginning of each spatial axis
    pe: list[int]  # pads at the end
    group: int


def auto_pads(g, x: str, k, s, d, transposed: bool = False):
    """Explicit (begin, end) pads for the node's auto_pad / pads attributes (the window's attributes checked
    first: ``check_window``)."""
    n = len(k)
    auto = g.attr("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    pads = g.attr("pads")
    check_window(g, g.rank(x) - 2, k, s, d, pads if auto in ("NOTSET", "") else None)
    if auto in ("NOTSET", "") and pads:
        return list(pads[:n]), list(pads[n:])
    if auto in ("NOTSET", "", "VALID"):
        return [0] * n, [0] * n
    xs = g.sshape(x)
    sp = None if xs is None else xs[2:]
    if sp is None or not all(isinstance(v, int) for v in sp):
        raise g.unknown_size(f"auto_pad={auto} needs the spatial shape of {x!r}")
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


def check_window(g, n: int, k, s, d, pads) -> None:
    """A ModelError naming the node and the attribute when a window is impossible (a kernel, stride or
    dilation under 1, one of another rank than the input's, pads negative or not 2 per spatial axis), as
    onnxruntime refuses the model: the rules would otherwise build shapes of size 0 or divide by 0."""
    for name, v in (("kernel_shape", k), ("strides", s), ("dilations", d)):
        if len(v) != n or any(int(e) < 1 for e in v):
            raise g.fail(f"its {name} {clip(str(list(v)), 60)} is not {n} sizes of at least 1 (onnxruntime refuses it too)")
    if pads and (len(pads) != 2 * n or any(int(e) < 0 for e in pads)):
        raise g.fail(f"its pads {clip(str(list(pads)), 60)} are not {2 * n} sizes of at least 0 (onnxruntime refuses them too)")


def geometry(g, x: str, w: str, transposed: bool = False) -> Geometry:
    """The window of a Conv or ConvTranspose node of input ``x`` and weight ``w``; a ModelError when the
    two are not of one rank of at least 3 (onnxruntime refuses such a node, and the rules read W's
    dimensions 0, 1 and 2 on: a weight rewired to a 1-D tensor failed with an IndexError, QA fuzzing)."""
    r = g.rank(x)
    ws = g.sshape(w)
    if r < 3 or (ws is not None and len(ws) != r):
        raise g.fail(f"its input {x!r} is of rank {r} and its weight {w!r} of rank {'?' if ws is None else len(ws)}: "
                     "both must be of one rank, at least 3 (onnxruntime fails on it too)")
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
    pb, pe = auto_pads(g, x, k, s, d, transposed)
    group = int(g.attr("group", 1))
    if group < 1:
        raise g.fail(f"its group {group} is under 1 (onnxruntime refuses it too)")
    return Geometry(n, k, s, d, pb, pe, group)


def _perm01(r: int) -> list[int]:
    return [1, 0] + list(range(2, r))


def weight_grad(g, x: str, dy: str, geo: Geometry, c_in: int | None, out_ref: str | None = None) -> str:
    """dW[o, c, k] = sum_{n, p} dy[n, o, p] xpad[n, grp(o) Cg + c, p s + k d], by the fastest formulation
    that applies (see the module docstring)."""
    if c_in is None:
        raise g.fail("the channel count of the convolution input is unknown")
    cg = c_in // geo.group
    c_out = _channels(g, out_ref or dy)
    og = c_out // geo.group if c_out is not None else None
    unit = all(v == 1 for v in geo.s)
    if cg == 1 and og == 1 and unit:
        return _weight_grad_depthwise(g, x, dy, geo)
    kk = 1
    for v in geo.k:
        kk *= v
    xs, ds = g.static_dims(x), g.static_dims(dy)
    if (geo.group == 1 and kk == 1 and unit and not any(geo.pb + geo.pe) and xs is not None and ds is not None
            and xs[0] == 1 and xs[2:] == ds[2:]):
        # a 1x1 convolution of one image: dW (O, C) = dy (O, P) @ x (C, P)^T
        x2 = g.Reshape(x, g.ints([xs[1], -1]))
        d2 = g.Reshape(dy, g.ints([ds[1], -1]))
        return g.Reshape(g.Gemm(d2, x2, transB=1), g.ints([ds[1], xs[1]] + [1] * geo.n))
    ys = g.static_dims(out_ref or dy)
    if (geo.group == 1 and kk > 1 and unit and xs is not None and ys is not None
            and ys[1] <= PER_OFFSET_MAX_CHANNELS_PER_POSITION * int(np.prod(ys[2:]))
            and kk * int(np.prod(xs)) >= PER_OFFSET_MIN_COLUMNS):
        return _weight_grad_per_offset(g, x, dy, geo, xs, ys)
    return _weight_grad_im2col(g, x, dy, geo, c_in, out_ref)


def _weight_grad_per_offset(g, x: str, dy: str, geo: Geometry, xs, ys) -> str:
    """Dense, unit strides: dW[:, :, k] = dy (O, P) @ xpad[:, p + k d]^T (P, C), one GEMM per kernel offset
    k over a window of the padded x, then (K, O, C) -> (O, C, K). No im2col tensor (K times x, which
    onnxruntime also writes in its blocked layout and converts back); the last transpose is weight-sized,
    so this is used where the outputs outnumber the output channels (O <= P: the early layers) and the im2col
    would be large (PER_OFFSET_MIN_COLUMNS)."""
    n, c, o = xs[0], xs[1], ys[1]
    p = int(np.prod(ys[2:]))
    xp = g.pad(x, [0, 0] + geo.pb + [0, 0] + geo.pe) if any(geo.pb + geo.pe) else x
    axes = list(range(2, geo.n + 2))
    if n == 1:
        d2 = g.Reshape(dy, g.ints([o, p]))
    else:
        d3t = g.Transpose(g.Reshape(dy, g.ints([n, o, p])), perm=[0, 2, 1])  # (N, P, O)
    parts = []
    for off in np.ndindex(*geo.k):
        start = [k * d for k, d in zip(off, geo.d)]
        win = g.slice(xp, start, [b + e for b, e in zip(start, ys[2:])], axes)  # (N, C, *out)
        if n == 1:
            parts.append(g.Gemm(d2, g.Reshape(win, g.ints([c, p])), transB=1))  # (O, C)
        else:
            prod = g.MatMul(g.Reshape(win, g.ints([n, c, p])), d3t)  # (N, C, O)
            parts.append(g.Transpose(g.reduce_sum(prod, [0], keepdims=0), perm=[1, 0]))
    # (k..., O, C) -> (O, C, k...) by the Transpose itself: a Reshape after it would copy the weight-sized
    # result once more when it is a graph output
    cat = g.Reshape(g.Concat(*parts, axis=0), g.ints(list(geo.k) + [o, c]))
    return g.Transpose(cat, perm=[geo.n, geo.n + 1] + list(range(geo.n)))


def _channels(g, t: str) -> int | None:
    s = g.sshape(t)
    return s[1] if s is not None and len(s) > 1 and isinstance(s[1], int) else None


def _weight_grad_depthwise(g, x: str, dy: str, geo: Geometry) -> str:
    """Depthwise, unit strides: dW[c, 0, k] = sum_{n, p} dy[n, c, p] xpad[n, c, p + k d], one Slice of the
    padded x, one Mul and one ReduceSum per kernel offset k. With static shapes the spatial axes are
    flattened (dy padded to x's padded row length, zeros past its own): every shift by k is then one
    contiguous slice of the flat padded x (onnxruntime copies those far faster than 2-D windows)."""
    r = geo.n + 2
    xs, ds = g.static_dims(x), g.static_dims(dy)
    if xs is None or ds is None:
        return _weight_grad_depthwise_windows(g, x, dy, geo)
    padded = [xs[2 + i] + geo.pb[i] + geo.pe[i] for i in range(geo.n)]
    stride = [int(np.prod(padded[i + 1:])) for i in range(geo.n)]
    # one extra row at the end of the first spatial axis: the last shift reads up to a row past the end
    xp = g.pad(x, [0, 0] + geo.pb + [0, 0, geo.pe[0] + 1] + geo.pe[1:])
    xf = g.Reshape(xp, g.ints([xs[0], xs[1], -1]))
    dpad = [padded[i] - ds[2 + i] for i in range(1, geo.n)]
    dyp = g.pad(dy, [0] * r + [0, 0, 0] + dpad) if any(dpad) else dy
    length = ds[2] * stride[0]
    dyf = g.Reshape(dyp, g.ints([ds[0], ds[1], length]))
    sums = []
    for off in np.ndindex(*geo.k):
        start = sum(o * d * st for o, d, st in zip(off, geo.d, stride))
        shifted = g.slice(xf, [start], [start + length], [2])
        sums.append(g.reduce_sum(g.Mul(dyf, shifted), [0, 2], keepdims=1))  # (1, C, 1)
    cat = sums[0] if len(sums) == 1 else g.Concat(*sums, axis=2)  # (1, C, K)
    return g.Reshape(cat, g.ints([-1, 1] + list(geo.k)))


def _weight_grad_depthwise_windows(g, x: str, dy: str, geo: Geometry) -> str:
    """The same sums with 2-D windows of the padded x, for dynamic shapes."""
    r = geo.n + 2
    xp = g.pad(x, [0, 0] + geo.pb + [0, 0] + geo.pe) if any(geo.pb + geo.pe) else x
    out_sp = g.shape(dy, 2)
    sums = []
    axes = [0] + list(range(2, r))
    for off in np.ndindex(*geo.k):
        start = [o * d for o, d in zip(off, geo.d)]
        shifted = g.slice(xp, start, g.Add(out_sp, g.ints(start)), list(range(2, r)))
        sums.append(g.reduce_sum(g.Mul(dy, shifted), axes, keepdims=1))  # (1, C, 1, ...)
    cat = sums[0] if len(sums) == 1 else g.Concat(*sums, axis=0)  # (K, C, 1, ...)
    return g.Reshape(g.Transpose(g.Reshape(cat, g.ints([len(sums), -1])), perm=[1, 0]),
                     g.ints([-1, 1] + list(geo.k)))


def _weight_grad_im2col(g, x: str, dy: str, geo: Geometry, c_in: int, out_ref: str | None = None) -> str:
    """dW[o, c, k] = sum_{n, p} dy[n, o, p] xpad[n, grp(o) Cg + c, p s + k d], as one batched GEMM over
    an im2col of x, (N, G, Cg K, P), times dy^T (N, G, P, Og), summed over the batch. The im2col is one
    Conv of each channel of x with K one-hot kernels (same strides, dilations and pads). ``out_ref``
    holds the output's spatial shape (dy's by default)."""
    G = geo.group
    cg = c_in // G
    out_ref = out_ref or dy
    kk = 1
    for v in geo.k:
        kk *= v
    if kk == 1 and all(v == 1 for v in geo.s) and not any(geo.pb + geo.pe):
        cols = x  # 1x1 convolution: x is its own im2col
    else:
        # im2col in one Conv: every channel on its own, against K one-hot kernels -> (N C, K, *out)
        onehot = np.eye(kk, dtype=g.dtype).reshape([kk, 1] + list(geo.k))
        xs = g.static_dims(x)
        per_channel = g.ints([-1, 1] + list(xs[2:])) if xs is not None else g.Concat(g.ints([-1, 1]), g.shape(x, 2), axis=0)
        cols = g.Conv(g.Reshape(x, per_channel), g.const(onehot), strides=geo.s, dilations=geo.d,
                      pads=geo.pb + geo.pe, kernel_shape=geo.k)
    xs, ys = g.static_dims(x), g.static_dims(out_ref)
    if xs is not None and ys is not None and xs[0] == 1:
        # one image: dW (G, Og, Cg K) = dy (G, Og, P) @ cols (G, Cg K, P)^T, no sum over the batch
        p = int(np.prod(ys[2:]))
        if G == 1:
            prod = g.Gemm(g.Reshape(dy, g.ints([-1, p])), g.Reshape(cols, g.ints([cg * kk, p])), transB=1)
        else:
            c3 = g.Reshape(cols, g.ints([G, cg * kk, p]))
            prod = g.MatMul(g.Reshape(dy, g.ints([G, -1, p])), g.Transpose(c3, perm=[0, 2, 1]))
        return g.Reshape(prod, g.ints([-1, cg] + list(geo.k)))
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


def input_grad(g, dy: str, w: str, x: str, geo: Geometry) -> str:
    """dX: a Conv with the flipped kernel at unit strides, else ConvTranspose (see the module docstring)."""
    if all(v == 1 for v in geo.s) and g.opset >= 10:
        back = [(k - 1) * d for k, d in zip(geo.k, geo.d)]
        pb = [b - p for b, p in zip(back, geo.pb)]
        pe = [b - p for b, p in zip(back, geo.pe)]
        wf = flipped_kernel(g, w, geo)
        if wf is not None and min(pb + pe) >= 0:
            return g.Conv(dy, wf, dilations=geo.d, pads=pb + pe, group=geo.group, kernel_shape=geo.k)
    return input_grad_transposed(g, dy, w, x, geo)


def flipped_kernel(g, w: str, geo: Geometry) -> str | None:
    """W (G Og, Cg, *k) -> W' (G Cg, Og, *k) with every spatial axis reversed: the kernel of the Conv
    that computes dX = sum_o W[o, c, k] dy[o, p - k d] at unit strides. None when W's shape is unknown."""
    ws = g.static_dims(w)
    if ws is None:
        return None
    G, og, cg = geo.group, ws[0] // geo.group, ws[1]
    t = w
    if G == 1:
        if og > 1 or cg > 1:
            t = g.Transpose(w, perm=_perm01(geo.n + 2))
    elif og > 1 and cg > 1:
        t = g.Reshape(w, g.ints([G, og, cg] + list(geo.k)))
        t = g.Transpose(t, perm=[0, 2, 1] + list(range(3, geo.n + 3)))
        t = g.Reshape(t, g.ints([G * cg, og] + list(geo.k)))
    elif og > 1:  # cg == 1: (G Og, 1, k) -> (G, Og, k)
        t = g.Reshape(w, g.ints([G, og] + list(geo.k)))
    elif cg > 1:  # og == 1: (G, Cg, k) -> (G Cg, 1, k)
        t = g.Reshape(w, g.ints([G * cg, 1] + list(geo.k)))
    flip = [i for i, k in enumerate(geo.k) if k > 1]
    if not flip:
        return t
    return g.slice(t, [-1] * len(flip), [-(2 ** 63)] * len(flip), [i + 2 for i in flip], [-1] * len(flip))


def input_grad_transposed(g, dy: str, w: str, x: str, geo: Geometry) -> str:
    """dX = ConvTranspose(dy, W) cropped to x: pads at the start are cut, and the rows past the last
    window (when (H + pads - k) is not a multiple of the stride) get zeros."""
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
    dX = ConvTranspose(dy, W) (same strides, dilations, group, pads; a Conv with the flipped kernel at
    unit strides), dW = the correlation of x with dy (see weight_grad),  dB = sum(dy, all axes but 1)"""
    x, w = g.x[0], g.x[1]
    geo = geometry(g, x, w)
    dx = dw = db = None
    if g.wants(0):
        dx = input_grad(g, g.dy, w, x, geo)
    if g.wants(1):
        ws = g.sshape(w)
        c_in = ws[1] * geo.group if ws is not None and isinstance(ws[1], int) else None
        dw = weight_grad(g, x, g.dy, geo, c_in, out_ref=g.y[0])
    if g.wants(2):
        db = g.reduce_sum(g.dy, [0] + list(range(2, geo.n + 2)), keepdims=0)
    return [dx, dw, db]


def _convtranspose_pads(g, x: str, geo: Geometry) -> Geometry:
    """ConvTranspose crops its full output by pads; output_shape / auto_pad decide them when given. As in
    the ONNX spec and onnxruntime, the odd unit of a crop goes to the start except with SAME_UPPER. An
    output_shape larger than the full output (up to stride - 1 past it) is the full output followed by
    zeros (plus the bias): its end pad is negative, and the caller drops those gradient rows."""
    out_shape = g.attr("output_shape")
    auto = g.attr("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    op = list(g.attr("output_padding") or [0] * geo.n)
    if not out_shape and auto in ("NOTSET", "", "VALID"):
        return geo
    xs = g.static_dims(x)
    if xs is None:
        raise g.unknown_size("output_shape / auto_pad need the input's static shape")
    target = list(out_shape)[-geo.n:] if out_shape else [v * s for v, s in zip(xs[2:], geo.s)]
    pb, pe = [], []
    for i in range(geo.n):
        total = geo.s[i] * (xs[2 + i] - 1) + op[i] + (geo.k[i] - 1) * geo.d[i] + 1 - target[i]
        if not out_shape:  # auto_pad alone never grows the output (onnxruntime, onnx shape inference)
            total = max(total, 0)
        small, big = total // 2, total - total // 2
        if total < 0:  # onnxruntime: no crop, the full output at the start
            small, big = 0, 0
        upper = auto == "SAME_UPPER"
        pb.append(small if upper else big)
        pe.append((big if upper else small) + min(total, 0))
    return Geometry(geo.n, geo.k, geo.s, geo.d, pb, pe, geo.group)


@rule("ConvTranspose", inputs=(0, 1, 2))
def conv_transpose(g):
    """y = crop(full), full[n, g Cg_out + o, p s + k d] += x[n, c, p] W[c, o, k] (+ B)  ->
    dX = Conv(dy, W) with the same pads, strides, dilations and group (W read as a conv weight),
    dW = weight_grad(dy, x) (a conv weight gradient with the roles of x and dy swapped),  dB = sum(dy)"""
    x, w = g.x[0], g.x[1]
    geo = geometry(g, x, w)
    geo = _convtranspose_pads(g, x, geo)
    dy = g.dy
    if any(v < 0 for v in geo.pe):
        # y's last rows past the full output are zeros (+ B), which x and W do not reach
        axes = [2 + i for i in range(geo.n) if geo.pe[i] < 0]
        dy = g.slice(dy, [0] * len(axes), [geo.pe[a - 2] for a in axes], axes)
        geo = Geometry(geo.n, geo.k, geo.s, geo.d, geo.pb, [max(v, 0) for v in geo.pe], geo.group)
    # the full output is padded at the end by output_padding: the Conv below reads zeros there
    dx = dw = db = None
    if g.wants(0):
        dx = g.Conv(dy, w, strides=geo.s, dilations=geo.d, pads=geo.pb + geo.pe, group=geo.group, kernel_shape=geo.k)
    if g.wants(1):
        ws = g.sshape(w)
        ys = g.sshape(g.y[0])
        c_out = ys[1] if ys is not None and isinstance(ys[1], int) else (
            ws[1] * geo.group if ws is not None and isinstance(ws[1], int) else None)
        dw = weight_grad(g, dy, x, geo, c_out, out_ref=x)
    if g.wants(2):
        db = g.reduce_sum(g.dy, [0] + list(range(2, geo.n + 2)), keepdims=0)
    return [dx, dw, db]
