"""MaxPool and ConvTranspose as their specification says, N-D, for the reference runner (``corrected_ops``).

onnx.reference (1.23 at least) gets both wrong: MaxPool reads ``pads`` as [x1_begin, x1_end, x2_begin, ...]
where the specification's order is [x1_begin, x2_begin, ..., x1_end, x2_end, ...] (an asymmetric pad gives
another output shape), gives SAME_LOWER with strides floor(in / stride) outputs instead of ceil, ignores
``storage_order`` for Indices, fails on int8/uint8 inputs and on 3-D pooling with Indices; ConvTranspose with
``group`` > 1 computes wrong values (or fails to reshape), and fails with ``output_shape``."""

from __future__ import annotations

import math

import numpy as np

from onnx.reference.op_run import OpRun

from onnxprobe.types import element_count


def _pool_geometry(sp, kernel, strides, dilations, pads, auto_pad, ceil_mode):
    """(output sizes, pads at the beginning) of a pooling window, as the MaxPool specification computes them."""
    n = len(sp)
    strides = list(strides or [1] * n)
    dilations = list(dilations or [1] * n)
    pads = list(pads or [0] * 2 * n)
    ext = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    out, begin = [], []
    for i in range(n):
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-sp[i] // strides[i])
            total = max(0, (o - 1) * strides[i] + ext[i] - sp[i])
            b = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        elif auto_pad == "VALID":
            o, b = (sp[i] - ext[i]) // strides[i] + 1, 0
        else:
            b = pads[i]
            span = sp[i] + pads[i] + pads[i + n] - ext[i]
            o = (math.ceil(span / strides[i]) if ceil_mode else span // strides[i]) + 1
            if ceil_mode and (o - 1) * strides[i] >= sp[i] + pads[i]:
                o -= 1  # a window that would start in the right padding is ignored
        out.append(o)
        begin.append(b)
    return out, begin, strides, dilations


class MaxPool(OpRun):
    """The maximum of each window, padding excluded; Indices are flat indices into X (batch and channel
    included), the spatial part in row-major order, or column-major with storage_order=1; the first of equal
    maxima. A window that holds no input element gives the type's lowest value, as onnxruntime."""

    op_domain = ""

    def _run(self, x, auto_pad=None, ceil_mode=None, dilations=None, kernel_shape=None, pads=None,
             storage_order=None, strides=None):
        sp = x.shape[2:]
        out, begin, strides, dilations = _pool_geometry(sp, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
        low = np.finfo(x.dtype).min if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        y = np.full(x.shape[:2] + tuple(out), low, dtype=x.dtype)
        idx = np.zeros(y.shape, dtype=np.int64)
        seen = np.zeros(y.shape, dtype=bool)
        place = np.cumprod((1,) + tuple(sp[:-1])) if storage_order else np.cumprod((1,) + tuple(sp[::-1][:-1]))[::-1]
        base = (np.arange(x.shape[0] * x.shape[1]).reshape(x.shape[:2] + (1,) * len(sp)) * element_count(sp))
        for k in np.ndindex(*kernel_shape):
            coords = [np.arange(o) * s - b + kk * d for o, s, b, kk, d in zip(out, strides, begin, k, dilations)]
            inside = [(c >= 0) & (c < n) for c, n in zip(coords, sp)]
            take = x[(slice(None), slice(None)) + np.ix_(*[np.clip(c, 0, n - 1) for c, n in zip(coords, sp)])]
            ok = np.ones(tuple(out), dtype=bool)
            flat = np.zeros(tuple(out), dtype=np.int64)
            for i, (c, v) in enumerate(zip(coords, inside)):
                shape = [1] * len(sp)
                shape[i] = -1
                ok = ok & v.reshape(shape)
                flat = flat + c.reshape(shape) * int(place[i])
            better = ok & (~seen | (take > y))
            y = np.where(better, take, y)
            idx = np.where(better, base + flat, idx)
            seen |= ok
        return (y, idx) if len(self.onnx_node.output) > 1 else (y,)


class ConvTranspose(OpRun):
    """The transposed convolution of each group: every input element scatters x * W[c_in, c_out] into the
    output at stride * i + dilation * k, then pads are cropped off both ends (or the pads that give
    ``output_shape``, SAME_UPPER putting the odd one at the end, otherwise at the beginning; a negative one adds
    zeros); output_padding extends the end."""

    op_domain = ""

    def _run(self, X, W, B=None, auto_pad=None, dilations=None, group=None, kernel_shape=None, output_padding=None,
             output_shape=None, pads=None, strides=None):
        sp, kernel, n = X.shape[2:], W.shape[2:], X.ndim - 2
        group = group or 1
        strides, dilations = list(strides or [1] * n), list(dilations or [1] * n)
        opad = list(output_padding or [0] * n)
        pads = list(pads or [0] * 2 * n)
        full = [s * (i - 1) + op + (k - 1) * d + 1 for s, i, op, k, d in zip(strides, sp, opad, kernel, dilations)]
        if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            want = list(output_shape)[-n:] if output_shape is not None else [i * s for i, s in zip(sp, strides)]
            total = [f - w for f, w in zip(full, want)]
            first = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
            pads = first + [t - f for t, f in zip(total, first)]
        elif auto_pad == "VALID":
            pads = [0] * 2 * n
        cin_g, cout_g = X.shape[1] // group, W.shape[1]
        xg = X.astype(np.float64).reshape((X.shape[0], group, cin_g) + tuple(sp))
        wg = W.astype(np.float64).reshape((group, cin_g, cout_g) + tuple(kernel))
        y = np.zeros((X.shape[0], group * cout_g) + tuple(full))
        for k in np.ndindex(*kernel):
            part = np.einsum("ngi...,gio->ngo...", xg, wg[(slice(None),) * 3 + k])
            at = tuple(slice(kk * d, kk * d + s * (i - 1) + 1, s) for kk, d, s, i in zip(k, dilations, strides, sp))
            y[(slice(None), slice(None)) + at] += part.reshape((X.shape[0], group * cout_g) + tuple(sp))
        # a negative pad (SAME or output_shape asking for more than the kernels cover) extends the output with
        # zeros: cropping by it would wrap around (y[-1:] is the last element)
        y = np.pad(y, [(0, 0), (0, 0)] + [(max(0, -b), max(0, -e)) for b, e in zip(pads[:n], pads[n:])])
        y = y[(slice(None), slice(None)) + tuple(slice(max(0, b), m - max(0, e)) for b, e, m in zip(pads[:n], pads[n:], y.shape[2:]))]
        if B is not None:
            y = y + B.astype(np.float64).reshape((1, -1) + (1,) * n)
        return (y.astype(X.dtype),)
