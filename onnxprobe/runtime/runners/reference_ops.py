"""Our implementations of ops onnx.reference (1.23 at least) gets wrong or cannot run, as their specification
says (``corrected_ops`` in runners.reference adds them for the opsets where they apply): ``diff
--vs-reference`` would otherwise blame onnxruntime for onnx.reference's mistake, or not run at all.

Each was found comparing one-node models of every op and opset under onnxruntime and onnx.reference, and
decided against the op's documentation with a float64 numpy oracle (tests/test_reference_ops_*.py)."""

from __future__ import annotations

import numpy as np

from onnx.reference.op_run import OpRun
from onnx.reference.ops.op_grid_sample import GridSample as _GridSample
from onnx.reference.ops.op_one_hot import OneHot as _OneHot
from onnx.reference.ops.op_resize import Resize as _Resize
from onnx.reference.ops.op_roi_align import RoiAlign as _RoiAlign
from onnx.reference.ops.op_scatter_elements import scatter_elements

from onnxprobe.runtime.runners.reference_control import Loop, Scan, Scan8
from onnxprobe.runtime.runners.reference_pool import ConvTranspose, MaxPool
from onnxprobe.runtime.runners.reference_rnn import GRU, LSTM, RNN


class DequantizeLinear(OpRun):
    """DequantizeLinear-10/13 (opsets 10-18), which onnx.reference has no implementation of (it has 19 and
    later): y = (x - x_zero_point) * x_scale, per tensor (a scalar or one-element scale) or (13) per slice along
    ``axis`` (default 1)."""

    op_domain = ""

    def _run(self, x, x_scale, x_zero_point=None, axis=None, **_):  # onnx.reference passes the latest schema's defaults too
        axis = 1 if axis is None else axis
        scale = np.asarray(x_scale, np.float64)
        zp = np.zeros((), np.float64) if x_zero_point is None else np.asarray(x_zero_point, np.float64)
        if scale.size == 1:  # a one-element vector is per tensor too (as onnxruntime), whatever x's rank
            scale, zp = scale.reshape(()), zp.reshape(())
        elif scale.ndim == 1 and x.ndim > 0:
            shape = [1] * x.ndim
            shape[axis] = -1
            scale, zp = scale.reshape(shape), zp.reshape(shape) if zp.ndim == 1 else zp
        return (((x.astype(np.float64) - zp) * scale).astype(x_scale.dtype),)


class RoiAlign(_RoiAlign):
    """RoiAlign-10 (opsets 10-15): onnx.reference runs it with opset 16's default coordinate_transformation_mode
    (half_pixel, a -0.5 pixel shift), where RoiAlign-10 has no such attribute and samples as opset 16's
    "output_half_pixel" does."""

    op_domain = ""

    def _run(self, X, rois, batch_indices, coordinate_transformation_mode=None, **kw):  # noqa: ARG002
        return super()._run(X, rois, batch_indices, coordinate_transformation_mode="output_half_pixel", **kw)


class GridSample(_GridSample):
    """GridSample-16 (opsets 16-19): its modes are "bilinear", "nearest" and "bicubic", which opset 20 renamed
    "linear" and "cubic"; onnx.reference knows the new names only (bicubic: "only supports nearest, linear, and
    cubic")."""

    op_domain = ""

    def _run(self, X, grid, mode=None, padding_mode=None, align_corners=None, **_):
        mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode or "bilinear", mode)
        return super()._run(X, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners)


class LRN(OpRun):
    """LRN: onnx.reference's loop runs over the batch instead of the channels (a wrong sum of squares for every
    channel past the batch size) and takes 4-D inputs only. The specification: the sum of squares over channels
    [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)], y = x / (bias + alpha / size * square_sum) ^ beta."""

    op_domain = ""

    def _run(self, x, alpha=None, beta=None, bias=None, size=None, **_):
        alpha, beta, bias = (1e-4 if alpha is None else alpha), (0.75 if beta is None else beta), (1.0 if bias is None else bias)
        f = x.astype(np.float64)
        sq = np.zeros_like(f)
        lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
        for c in range(x.shape[1]):
            sq[:, c] = (f[:, max(0, c - lo):c + hi + 1] ** 2).sum(axis=1)
        return ((f / (bias + alpha / size * sq) ** beta).astype(x.dtype),)


class LpNormalization(OpRun):
    """LpNormalization: onnx.reference sums x ** p, not |x| ** p (its p=1 norm is sum(x), which can be 0 or
    negative). The specification: x / ||x||_p along ``axis`` (0 where the norm is 0, as onnxruntime)."""

    op_domain = ""

    def _run(self, x, axis=None, p=None, **_):
        axis, p = (-1 if axis is None else axis), (2 if p is None else p)
        f = x.astype(np.float64)
        norm = (np.abs(f) ** p).sum(axis=axis, keepdims=True) ** (1.0 / p)
        with np.errstate(all="ignore"):
            return (np.where(norm == 0, 0.0, f / norm).astype(x.dtype),)


class Mean(OpRun):
    """Mean-8 and later: onnx.reference adds into a copy of the first input, which fails when the inputs
    broadcast to a larger shape than the first's (multidirectional broadcasting is the specification's)."""

    op_domain = ""

    def _run(self, *args):
        return ((sum(a.astype(np.float64) for a in args) / len(args)).astype(args[0].dtype),)


class OneHot(_OneHot):
    """OneHot: ``depth`` is a "scalar or rank 1 tensor containing exactly one element" (cast to int64); onnx.reference
    fails on the rank-1 one."""

    op_domain = ""

    def _run(self, indices, depth, values, axis=None, **_):
        return super()._run(indices, np.asarray(depth).reshape(()).astype(np.int64), values, axis=-1 if axis is None else axis)


class GlobalLpPool(OpRun):
    """GlobalLpPool, which onnx.reference has no implementation of: (sum |x| ^ p) ^ (1 / p) over the spatial
    axes, kept as 1s (p default 2)."""

    op_domain = ""

    def _run(self, x, p=None, **_):
        p = 2 if p is None else p
        ax = tuple(range(2, x.ndim))
        return (((np.abs(x.astype(np.float64)) ** p).sum(axis=ax, keepdims=True) ** (1.0 / p)).astype(x.dtype),)


class Scatter(OpRun):
    """Scatter-9 (opsets 9-10; deprecated for ScatterElements, which it equals), which onnx.reference has no
    implementation of."""

    op_domain = ""

    def _run(self, data, indices, updates, axis=None, **_):
        return (scatter_elements(data, indices, updates, axis=0 if axis is None else axis),)


class Pad(OpRun):
    """Pad: a negative pad removes elements ("the number of padding elements to add or remove (if negative)");
    onnx.reference fails on one ("index can't contain negative values"). The pads as an attribute (Pad-2) or an
    input (11), with ``axes`` (18) and the modes constant, reflect, edge and wrap (19); Pad-1 calls them ``paddings``."""

    op_domain = ""

    def _run(self, data, pads=None, constant_value=None, axes=None, mode=None, value=None, paddings=None, **_):
        pads = np.asarray(paddings if pads is None else pads, np.int64).reshape(-1)
        axes = list(range(data.ndim)) if axes is None else [int(a) % data.ndim for a in np.asarray(axes).reshape(-1)]
        begin, end = [0] * data.ndim, [0] * data.ndim
        for i, a in enumerate(axes):
            begin[a], end[a] = int(pads[i]), int(pads[i + len(axes)])
        # out[j] = data[j - begin]: n + begin + end elements; crops that pass each other keep nothing of the
        # data, and what is left of the other end's padding is all there is (a slice past n would wrap)
        x = data[tuple(slice(min(n, max(0, -b)), max(0, n - max(0, -e))) for b, e, n in zip(begin, end, data.shape))]
        widths = [(max(0, b), max(0, e)) if k else (max(0, n + b + e), 0)
                  for b, e, n, k in zip(begin, end, data.shape, x.shape)]
        mode = mode or "constant"
        if mode == "constant":
            fill = value if constant_value is None else np.asarray(constant_value).reshape(-1)[0] if np.size(constant_value) else None
            fill = ("" if data.dtype.kind in "OSU" else 0) if fill is None else fill
            return (np.pad(x, widths, mode="constant", constant_values=fill).astype(data.dtype),)
        return (np.pad(x, widths, mode=mode).astype(data.dtype),)


class Upsample(OpRun):
    """Upsample-7/9 (opsets 7-9) and Resize-10 (as ``Resize``), which onnx.reference cannot run (Upsample: integer
    nearest scales only; Resize-10: "output_size is None and scale_factors is None"). Their specification has
    no coordinate_transformation_mode: asymmetric, x_in = x_out / scale; "nearest" takes floor(x_in) (the
    Upsample example: scales 3 repeat each value 3 times), or ceil(x_in) where scale < 1 (Resize-10's example:
    scales 0.6 of [[1, 2, 3, 4], [5, 6, 7, 8]] give [[1, 3]]; onnxruntime's too), "linear" interpolates x[floor(x_in)] and the next
    (clamped at the edge); output_dimension = floor(input_dimension * scale)."""

    op_domain = ""

    def _run(self, x, scales=None, mode=None, **_):  # onnx.reference passes the latest Resize's defaults too
        scales = self.scales if scales is None else scales  # Upsample-7: an attribute
        out = x.astype(np.float64) if mode == "linear" else x
        for ax, s in enumerate(float(v) for v in np.asarray(scales).reshape(-1)):
            if s == 1.0:
                continue
            n = x.shape[ax]
            pos = np.arange(int(np.floor(n * s)), dtype=np.float64) / s
            i0 = np.minimum(np.floor(pos).astype(np.int64), n - 1)
            if mode != "linear":  # x_in in float32, as the scales are: 27 / 2.7 is 10 (not 9.9999998), 7 / 0.7 is 10
                p32 = np.arange(len(pos), dtype=np.float32) / np.float32(s)
                out = np.take(out, np.minimum((np.ceil(p32) if s < 1 else np.floor(p32)).astype(np.int64), n - 1), axis=ax)
                continue
            w = (pos - i0).reshape([-1] + [1] * (x.ndim - 1 - ax))
            out = np.take(out, i0, axis=ax) * (1 - w) + np.take(out, np.minimum(i0 + 1, n - 1), axis=ax) * w
        return (out.astype(x.dtype),)


class Resize(Upsample):
    """Resize-10 (opset 10): as Upsample-9 (``Upsample``); its second input is ``scales``."""


class Unique(OpRun):
    """Unique: onnx.reference returns Y sorted with sorted=0 when Y is the only output, and with sorted=0 and an
    axis or a multi-dimensional input fails or takes the slices along axis 0. The specification: the unique
    elements (or slices along ``axis``) in order of first occurrence (sorted=0) or ascending; indices of first
    occurrences, inverse_indices and counts."""

    op_domain = ""

    def _run(self, x, axis=None, sorted=None, **_):  # noqa: A002 - the attribute's name
        flat = x.reshape(-1) if axis is None else np.moveaxis(x, axis, 0)
        y, first, inverse, counts = np.unique(flat, return_index=True, return_inverse=True, return_counts=True,
                                              **({} if axis is None else {"axis": 0}))  # not for strings
        inverse = inverse.reshape(-1)
        if sorted == 0:
            order = np.argsort(first, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            y, first, inverse, counts = y[order], first[order], rank[inverse], counts[order]
        y = y if axis is None else np.moveaxis(y, 0, axis)
        outs = (y, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64))
        return outs[:len(self.onnx_node.output)]


class GatherElements(OpRun):
    """GatherElements: the output has the shape of ``indices``, which may be smaller than the data in the axes
    other than ``axis``; onnx.reference refuses that ("all dimensions of index and self should be the same
    size"). Negative indices count from the end."""

    op_domain = ""

    def _run(self, data, indices, axis=None, **_):
        axis = (axis or 0) % data.ndim
        at = list(np.indices(indices.shape, sparse=True))
        at[axis] = np.where(indices < 0, indices + data.shape[axis], indices)
        return (data[tuple(at)],)


class Resize11(_Resize):
    """Resize-11 (opsets 11-12) with coordinate_transformation_mode "tf_half_pixel_for_nn" (removed in opset 13),
    which onnx.reference does not know, in its "nearest" mode (what the name says it is for; other modes stay
    onnx.reference's error): x_original = (x_resized + 0.5) / scale, rounded by nearest_mode (default
    round_prefer_floor) and clamped to the input; the scale is the scales input's, or output / input size
    with ``sizes``."""

    op_domain = ""

    def _run(self, X, roi=None, scales=None, sizes=None, **kw):
        if kw.get("coordinate_transformation_mode") != "tf_half_pixel_for_nn" or (kw.get("mode") or "nearest") != "nearest":
            return super()._run(X, roi, scales, sizes, **kw)
        if sizes is not None and np.size(sizes):
            out = [int(v) for v in sizes]
            scales = [o / n for o, n in zip(out, X.shape)]
        else:
            scales = [float(v) for v in scales]
            out = [int(np.floor(n * s)) for n, s in zip(X.shape, scales)]
        rnd = {"round_prefer_ceil": lambda v: np.floor(v + 0.5), "floor": np.floor, "ceil": np.ceil}.get(
            kw.get("nearest_mode") or "round_prefer_floor", lambda v: np.ceil(v - 0.5))
        y = X
        for ax, (o, s, n) in enumerate(zip(out, scales, X.shape)):
            y = np.take(y, np.clip(rnd((np.arange(o) + 0.5) / s).astype(np.int64), 0, n - 1), axis=ax)
        return (y,)


Resize11.__name__ = "Resize"  # onnx.reference finds a correction by its class name


def version_corrections(opset: int) -> list[type[OpRun]]:
    """The corrections above that apply to a model of this ai.onnx opset."""
    ops = [LRN, LpNormalization, Mean, OneHot, GlobalLpPool, Pad, MaxPool, ConvTranspose, LSTM, GRU, RNN, Unique, GatherElements,
           Loop]
    ops += [Scan8] if opset < 9 else [Scan]
    ops += [DequantizeLinear] if opset < 19 else []
    ops += [RoiAlign] if opset < 16 else []
    ops += [GridSample] if 16 <= opset < 20 else []
    ops += [Scatter] if 9 <= opset < 11 else []
    ops += [Upsample] if opset < 10 else []
    ops += [Resize] if opset == 10 else [Resize11] if opset in (11, 12) else []
    return ops
