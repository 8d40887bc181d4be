"""Sampling at computed positions: GridSample (w.r.t. the image and the grid), Col2Im, RoiAlign (w.r.t. the
image). A value read at a position is a gather, so its gradient is a scatter-add of dy at that position;
the image is laid out as rows of channels (N * spatial, C) so that one int64 index per sample point, not
one per channel, addresses it (ScatterND with reduction add, Gather)."""

from __future__ import annotations

import itertools

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnxprobe.autodiff.registry import rule

DOUBLE, FLOAT = TensorProto.DOUBLE, TensorProto.FLOAT


def _s(v):
    return v.decode() if isinstance(v, bytes) else v


def _c(g, v: float, ct: int) -> str:
    return g.const(np.array(v, np.float64 if ct == DOUBLE else np.float32))


def _cast(g, t: str, to: int) -> str:
    return t if g.engine.elem(t) == to else g.Cast(t, to=to)


def _dims(g, x: str, n: int) -> list[str]:
    """The spatial sizes of ``x`` (N, C, *S), each an int64 tensor of shape [1] (a constant when static)."""
    s = g.static_dims(x)
    if s is not None:
        return [g.ints([s[2 + a]]) for a in range(n)]
    return [g.shape(x, 2 + a, 3 + a) for a in range(n)]


def _rows(g, x: str, n: int) -> str:
    """(N, C, *S) -> (N * prod(S), C): one row of channels per pixel."""
    return g.Reshape(g.Transpose(x, perm=[0] + list(range(2, n + 2)) + [1]), g.Concat(g.ints([-1]), g.shape(x, 1, 2), axis=0))


def _unrows(g, rows: str, x: str, n: int) -> str:
    """The inverse of ``_rows``: (N * prod(S), C) -> the shape of x."""
    s = g.Concat(g.shape(x, 0, 1), g.shape(x, 2), g.shape(x, 1, 2), axis=0)
    return g.Transpose(g.Reshape(rows, s), perm=[0, n + 1] + list(range(1, n + 1)))


def _scatter_rows(g, x: str, n: int, idx: str, upd: str) -> str:
    """dx shaped like x (N, C, *S): zeros with the rows ``upd`` (M, C) added at the pixel rows ``idx`` (M,)."""
    size = g.Concat(g.Reshape(g.Div(g.Size(x), g.Reshape(g.shape(x, 1, 2), g.ints([]))), g.ints([1])),
                    g.shape(x, 1, 2), axis=0)
    zeros = g.ConstantOfShape(size, value=numpy_helper.from_array(np.zeros([1], g.dtype)))
    return _unrows(g, g.ScatterND(zeros, g.unsqueeze(idx, [1]), upd, reduction="add"), x, n)


def _flat_index(g, per_axis: list[str], dims: list[str]) -> str:
    """Row-major index of a pixel from its per-axis indices (Horner's scheme, sizes possibly runtime)."""
    acc = per_axis[0]
    for i, d in zip(per_axis[1:], dims[1:]):
        acc = g.Add(g.Mul(acc, d), i)
    return acc


def _image_offsets(g, x: str, n: int, dims: list[str]) -> str:
    """(N, 1, 1): the first row of each image n in the (N * prod(S), C) layout."""
    pix = dims[0]
    for d in dims[1:]:
        pix = g.Mul(pix, d)
    pix = g.Reshape(pix, g.ints([]))
    nb = g.Reshape(g.shape(x, 0, 1), g.ints([]))
    return g.Reshape(g.Range(g.const(np.array(0, np.int64)), g.Mul(nb, pix), pix), g.ints([-1, 1, 1]))


def _corner(g, f: str, lf: str, ct: int):
    """Validity of integer-valued coordinates ``f`` (float) on an axis of size ``lf``: the 0/1 mask, and the
    index as int64, 0 where invalid (NaN and infinite coordinates included: nothing is read out of bounds)."""
    valid = g.And(g.GreaterOrEqual(f, _c(g, 0.0, ct)), g.Less(f, lf))
    idx = g.Cast(g.Where(valid, f, _c(g, 0.0, ct)), to=TensorProto.INT64)
    return g.Cast(valid, to=ct), idx, valid


@rule("GridSample", inputs=(0, 1))
def grid_sample(g):
    """y[n, c, p] = sum over the corners q of the cell around i(p) of w_q(i) x[n, c, q], i = the grid's
    normalized position unnormalized per axis ((g + 1)(L - 1) / 2 with align_corners, ((g + 1) L - 1) / 2
    without; border: clamped to [0, L - 1]); linear: w_q = prod over axes of (1 - |i - q|), nearest: the one
    pixel round(i) (half to even), zeros outside the image  ->  dx = dy w_q scatter-added at q;
    d grid (linear) = sum_c dy sum_q x[q] dw_q/di di/dg, with dw/di = +-(the other axes' weights), di/dg =
    (L - 1) / 2 or L / 2 (0 where border clamped); nearest: 0. Not cubic or reflection padding."""
    x, grid = g.x[0], g.x[1]
    mode = _s(g.attr("mode", "bilinear" if g.opset < 20 else "linear"))
    pad = _s(g.attr("padding_mode", "zeros"))
    align = int(g.attr("align_corners", 0))
    if mode not in ("bilinear", "linear", "nearest"):
        raise g.fail(f"mode={mode} is not supported (linear and nearest are)")
    if pad not in ("zeros", "border"):
        raise g.fail(f"padding_mode={pad} is not supported (zeros and border are)")
    n = g.rank(x) - 2
    ct = DOUBLE if g.engine.elem(grid) == DOUBLE else FLOAT
    gr = g.Reshape(_cast(g, grid, ct), g.ints([0, -1, n]))  # (N, P, n)
    comps = g.split(gr, 2, [1] * n, n) if n > 1 else [gr]
    dims = _dims(g, x, n)
    axes = []  # per spatial axis: [(index, weight incl. validity, validity)] for each corner, slope, inside
    for a in range(n):
        c = comps[n - 1 - a]  # the grid's last axis lists x (the last spatial axis) first
        lf = g.Cast(dims[a], to=ct)
        one = _c(g, 1.0, ct)
        if align:
            slope = g.Div(g.Sub(lf, one), _c(g, 2.0, ct))
            i = g.Mul(g.Add(c, one), slope)
        else:
            slope = g.Div(lf, _c(g, 2.0, ct))
            i = g.Div(g.Sub(g.Mul(g.Add(c, one), lf), one), _c(g, 2.0, ct))
        inside = None
        if pad == "border":
            hi = g.Sub(lf, one)
            inside = g.Cast(g.And(g.Greater(i, _c(g, 0.0, ct)), g.Less(i, hi)), to=ct)
            i = g.Max(g.Min(i, hi), _c(g, 0.0, ct))
        if mode == "nearest":
            vm, idx, _ = _corner(g, g.Round(i), lf, ct)
            corners = [(idx, vm, vm)]
        else:
            f = g.Floor(i)
            w1 = g.Sub(i, f)  # NaN at an infinite coordinate: a corner outside weighs 0 (Where), not NaN
            v0, i0, b0 = _corner(g, f, lf, ct)
            v1, i1, b1 = _corner(g, g.Add(f, one), lf, ct)
            zero = _c(g, 0.0, ct)
            corners = [(i0, g.Where(b0, g.Sub(one, w1), zero), g.Neg(v0)), (i1, g.Where(b1, w1, zero), v1)]
        axes.append((corners, slope, inside))
    combos = list(itertools.product(*[range(len(ax[0])) for ax in axes]))
    k = len(combos)

    def stack(parts):
        return parts[0] if len(parts) == 1 else g.Concat(*parts, axis=2)

    def weight(combo, skip=None):
        w = None
        for a, q in enumerate(combo):
            if a != skip:
                w = axes[a][0][q][1] if w is None else g.Mul(w, axes[a][0][q][1])
        return w

    idx = g.Add(stack([_flat_index(g, [axes[a][0][q][0] for a, q in enumerate(cb)], dims) for cb in combos]),
                _image_offsets(g, x, n, dims))  # (N, P, K)
    idx = g.Reshape(idx, g.ints([-1]))
    chans = g.shape(x, 1, 2)
    dyt = g.Reshape(g.Transpose(g.dy, perm=[0] + list(range(2, n + 2)) + [1]),
                    g.Concat(g.ints([-1, 1]), chans, axis=0))  # (N P, 1, C)
    dx = dgrid = None
    if g.wants(0):
        w = g.Reshape(_cast(g, stack([weight(cb) for cb in combos]), g.elem), g.ints([-1, k, 1]))
        upd = g.Reshape(g.Mul(dyt, w), g.Concat(g.ints([-1]), chans, axis=0))
        dx = _scatter_rows(g, x, n, idx, upd)
    if g.wants(1):
        gt = g.engine.elem(grid) or ct
        if mode == "nearest":
            dgrid = g.ConstantOfShape(g.Shape(grid), value=numpy_helper.from_array(
                np.zeros([1], helper.tensor_dtype_to_np_dtype(gt))))
        else:
            xv = g.Reshape(g.Gather(_rows(g, x, n), idx, axis=0), g.Concat(g.ints([-1, k]), chans, axis=0))
            t = _cast(g, g.reduce_sum(g.Mul(xv, dyt), [2], keepdims=0), ct)  # (N P, K): sum_c dy x[q]
            # (N, P, K); allowzero: a run-time P of 0 (no sample points) is a 0, not "copy the dimension"
            t = g.Reshape(t, g.Concat(g.shape(gr, 0, 2), g.ints([k]), axis=0), allowzero=1)
            parts = []
            for a in range(n - 1, -1, -1):
                corners, slope, inside = axes[a]
                coef = []
                for cb in combos:
                    o = weight(cb, skip=a)
                    coef.append(corners[cb[a]][2] if o is None else g.Mul(o, corners[cb[a]][2]))
                d = g.Mul(g.reduce_sum(g.Mul(t, stack(coef)), [2], keepdims=1), slope)
                parts.append(d if inside is None else g.Mul(d, inside))
            dgrid = _cast(g, g.Reshape(stack(parts), g.Shape(grid)), gt)
    return [dx, dgrid]


@rule("Col2Im")
def col2im(g):
    """y = Col2Im(x, image_shape, block_shape): column l of x holds the block at position l, value k of a
    channel's block (C K channels) added to the padded image at l s + k d  ->  dx = Im2Col(dy): dy
    zero-padded, each image flattened, and gathered at the (K, L) padded-pixel indices (a constant)"""
    size, block = g.ints_input(1), g.ints_input(2)
    if size is None or block is None:
        raise g.fail("image_shape and block_shape must be constants")
    n = len(size)
    d = list(g.attr("dilations") or [1] * n)
    s = list(g.attr("strides") or [1] * n)
    p = list(g.attr("pads") or [0] * 2 * n)
    padded = [size[i] + p[i] + p[n + i] for i in range(n)]
    counts = [(padded[i] - d[i] * (block[i] - 1) - 1) // s[i] + 1 for i in range(n)]
    if any(c <= 0 for c in counts):
        raise g.fail(f"block_shape {block} does not fit in the padded image {padded}")
    xs = g.static_dims(g.x[0])
    if xs is not None and xs[-1] != int(np.prod(counts)):
        raise g.fail(f"its input has {xs[-1]} columns where the image holds {int(np.prod(counts))} blocks")
    offs = np.array(list(np.ndindex(*block)), np.int64).reshape(-1, 1, n) * np.array(d)  # (K, 1, n)
    pos = np.array(list(np.ndindex(*counts)), np.int64).reshape(1, -1, n) * np.array(s)  # (1, L, n)
    coords = offs + pos
    idx = np.ravel_multi_index(tuple(coords[..., i] for i in range(n)), padded).astype(np.int64)  # (K, L)
    dy = g.pad(g.dy, [0, 0] + p[:n] + [0, 0] + p[n:]) if any(p) else g.dy
    cols = g.Gather(g.Reshape(dy, g.ints([0, 0, -1])), g.const(idx), axis=2)  # (N, C, K, L)
    return [g.Reshape(cols, g.ints([0, -1, idx.shape[1]]))]


def _roi_axis(g, start: str, extent: str, out: int, size: str, ratio: int, ct: int):
    """One axis of RoiAlign's sample points, as onnxruntime places them: for each roi (R, 1), output bin
    p < out and sample i < G (the grid: sampling_ratio, or ceil(extent / out) per roi, G its largest),
    pos = start + p bin + (i + 1/2) bin / grid, bin = extent / out. A point below -1 or past the size reads
    nothing; else it is clamped to >= 0 and read linearly from its two pixels (both the last one from
    size - 1 on). Returns the pixel indices and the weights (R, out, G, 2) (0 for samples past a roi's grid)
    and the roi's grid size (R, 1)."""
    zero, one = _c(g, 0.0, ct), _c(g, 1.0, ct)
    bins = g.Div(extent, _c(g, float(out), ct))
    if ratio > 0:
        grid, n = _c(g, float(ratio), ct), g.const(np.array(ratio, np.int64))
    else:
        grid = g.Ceil(bins)
        n = g.Max(g.Cast(g.reduce("ReduceMax", grid, None, keepdims=0), to=TensorProto.INT64),
                  g.const(np.array(1, np.int64)))
    p = g.Reshape(g.const(np.arange(out, dtype=np.float64 if ct == DOUBLE else np.float32)), g.ints([1, -1, 1]))
    i = g.Reshape(g.Cast(g.Range(g.const(np.array(0, np.int64)), n, g.const(np.array(1, np.int64))), to=ct),
                  g.ints([1, 1, -1]))
    b3, s3 = g.unsqueeze(bins, [2]), g.unsqueeze(start, [2])  # (R, 1, 1)
    grid3 = grid if ratio > 0 else g.unsqueeze(grid, [2])
    pos = g.Add(g.Add(s3, g.Mul(p, b3)), g.Div(g.Mul(g.Add(i, _c(g, 0.5, ct)), b3), grid3))  # (R, out, G)
    lf = g.Cast(size, to=ct)
    valid = g.And(g.Less(i, grid3), g.And(g.GreaterOrEqual(pos, _c(g, -1.0, ct)), g.LessOrEqual(pos, lf)))
    last = g.Sub(lf, one)
    pos = g.Max(pos, zero)
    low = g.Floor(pos)
    top = g.GreaterOrEqual(low, last)
    low = g.Where(top, last, low)
    high = g.Where(top, last, g.Add(low, one))
    frac = g.Sub(g.Where(top, last, pos), low)
    idx = [g.Cast(g.Where(valid, v, zero), to=TensorProto.INT64) for v in (low, high)]
    wts = [g.Where(valid, v, zero) for v in (g.Sub(one, frac), frac)]
    return (g.Concat(*[g.unsqueeze(v, [3]) for v in idx], axis=3), g.Concat(*[g.unsqueeze(v, [3]) for v in wts], axis=3),
            grid)


@rule("RoiAlign")
def roi_align(g):
    """y[r, c, ph, pw] = the mean over roi r's sample points in bin (ph, pw) of x[b(r), c] read bilinearly
    there (avg mode; points placed as onnxruntime does, see _roi_axis; half_pixel shifts the roi by -1/2
    pixel, output_half_pixel makes it at least 1 x 1)  ->  dx = dy[r, c, ph, pw] wy wx / count scatter-added
    at each point's four pixels of image b(r); the rois and batch indices get none. Not max mode."""
    mode = _s(g.attr("mode", "avg"))
    if mode != "avg":
        raise g.fail(f"mode={mode} is not supported (avg is)")
    ctm = _s(g.attr("coordinate_transformation_mode", "half_pixel" if g.opset >= 16 else "output_half_pixel"))
    if ctm not in ("half_pixel", "output_half_pixel"):
        raise g.fail(f"coordinate_transformation_mode={ctm} is not supported")
    if g.opset < 16:
        raise g.needs_opset(16, "RoiAlign (a scatter-add)")
    x, rois, bidx = g.x[0], g.x[1], g.x[2]
    ct = DOUBLE if g.engine.elem(rois) == DOUBLE else FLOAT
    scale, off = float(g.attr("spatial_scale", 1.0)), 0.5 if ctm == "half_pixel" else 0.0
    corners = [g.Sub(g.Mul(c, _c(g, scale, ct)), _c(g, off, ct)) for c in g.split(_cast(g, rois, ct), 1, [1] * 4, 4)]
    dims = _dims(g, x, 2)
    ratio = int(g.attr("sampling_ratio", 0))
    axes = []
    for a, out in ((0, int(g.attr("output_height", 1))), (1, int(g.attr("output_width", 1)))):
        start, extent = corners[1 - a], g.Sub(corners[3 - a], corners[1 - a])
        if ctm == "output_half_pixel":
            extent = g.Max(extent, _c(g, 1.0, ct))
        axes.append(_roi_axis(g, start, extent, out, dims[a], ratio, ct))
    (iy, wy, gy), (ix, wx, gx) = axes
    count = g.Reshape(g.Max(g.Mul(gy, gx), _c(g, 1.0, ct)), g.ints([-1, 1, 1, 1, 1, 1, 1]))
    # (R, oh, ow, Gh, Gw, 2, 2): one weight and one pixel row per sample point and corner
    w = g.Div(g.Mul(g.unsqueeze(wy, [2, 4, 6]), g.unsqueeze(wx, [1, 3, 5])), count)
    first = g.Mul(g.Reshape(g.Cast(bidx, to=TensorProto.INT64), g.ints([-1, 1, 1, 1, 1, 1, 1])), g.Mul(dims[0], dims[1]))
    idx = g.Add(g.Add(first, g.Mul(g.unsqueeze(iy, [2, 4, 6]), dims[1])), g.unsqueeze(ix, [1, 3, 5]))
    chans = g.shape(x, 1, 2)
    dyt = g.unsqueeze(g.Transpose(g.dy, perm=[0, 2, 3, 1]), [3, 4, 5, 6])  # (R, oh, ow, 1, 1, 1, 1, C)
    upd = g.Reshape(g.Mul(dyt, g.unsqueeze(_cast(g, w, g.elem), [7])), g.Concat(g.ints([-1]), chans, axis=0))
    return [_scatter_rows(g, x, 2, g.Reshape(idx, g.ints([-1])), upd)]


@rule("AffineGrid")
def affine_grid(g):
    """grid[n, p, i] = sum_j theta[n, i, j] b[p, j], b = the (x, y[, z], 1) of each output position p
    (opset 20, the grid torch's affine_grid makes)  ->  dtheta[n, i, j] = sum_p dgrid[n, p, i] b[p, j];
    b is the node's own grid for one identity theta, with a column of ones"""
    size = g.x[1]
    k = g.rank(g.dy) - 2  # spatial axes: 2 or 3
    eye = np.eye(k, k + 1, dtype=g.dtype)[None]
    size1 = g.Concat(g.ints([1]), g.slice(size, [1], [k + 2], [0]), axis=0)
    base = g.AffineGrid(g.const(eye), size1, align_corners=g.attr("align_corners", 0))  # (1, ..., k)
    ones = g.ConstantOfShape(g.Concat(g.slice(size1, [0], [1], [0]), g.slice(size, [2], [k + 2], [0]), g.ints([1]),
                                      axis=0), value=numpy_helper.from_array(np.ones([1], g.dtype)))
    # P, the number of positions, given (not -1): with N = 0 a -1 could not be worked out
    p = g.reduce("ReduceProd", g.slice(size, [2], [k + 2], [0]), None, keepdims=1)
    b = g.Reshape(g.Concat(base, ones, axis=-1), g.Concat(g.ints([1]), p, g.ints([k + 1]), axis=0))  # (1, P, k + 1)
    dy = g.Reshape(g.dy, g.Concat(g.slice(size, [0], [1], [0]), p, g.ints([k]), axis=0))  # (N, P, k)
    return [g.MatMul(g.Transpose(dy, perm=[0, 2, 1]), b)]
