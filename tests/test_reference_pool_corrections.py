"""MaxPool and ConvTranspose through the reference runner (runners.reference_pool) against oracles of their
specification: MaxPool by a loop over each window (pads in [x1_begin, x2_begin, ..., x1_end, ...] order, the
specification's output shapes, Indices in row- or column-major order), ConvTranspose by torch's, cropped by
the pads. onnx.reference got asymmetric pads, SAME_LOWER, storage_order, int8, 3-D Indices and grouped
transposed convolutions wrong."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conftest import reference_node

RNG = np.random.default_rng(11)


_run = reference_node  # (op, inputs, nout=1, opset=13, **attrs)


def _max_pool_oracle(x, k, s, d, pads, auto_pad, ceil_mode, storage_order):
    sp, n = x.shape[2:], x.ndim - 2
    out, begin = [], []
    for i in range(n):
        ext = (k[i] - 1) * d[i] + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            o = math.floor((sp[i] - 1) / s[i]) + 1
            total = max(0, (o - 1) * s[i] + ext - sp[i])
            begin.append(total // 2 if auto_pad == "SAME_UPPER" else (total + 1) // 2)
        elif auto_pad == "VALID":
            o = math.floor((sp[i] - ext) / s[i]) + 1
            begin.append(0)
        else:
            rnd = math.ceil if ceil_mode else math.floor
            o = rnd((sp[i] + pads[i] + pads[i + n] - ext) / s[i] + 1)
            if ceil_mode and (o - 1) * s[i] >= sp[i] + pads[i]:
                o -= 1  # "sliding windows that would start in the right padded region are ignored"
            begin.append(pads[i])
        out.append(o)
    y = np.zeros(x.shape[:2] + tuple(out), x.dtype)
    ind = np.zeros(y.shape, np.int64)
    for nc in np.ndindex(*x.shape[:2]):
        for o in np.ndindex(*out):
            best, at = None, None
            for kk in np.ndindex(*k):
                c = [o[i] * s[i] - begin[i] + kk[i] * d[i] for i in range(n)]
                if all(0 <= c[i] < sp[i] for i in range(n)):
                    v = x[nc + tuple(c)]
                    if best is None or v > best:
                        best, at = v, c
            y[nc + o] = best
            flat = 0
            order = range(n - 1, -1, -1) if storage_order else range(n)  # column-major: the first axis fastest
            for i in order:
                flat = flat * sp[i] + at[i]
            ind[nc + o] = (nc[0] * x.shape[1] + nc[1]) * int(np.prod(sp)) + flat
    return y, ind


CASES = [
    dict(kernel_shape=[3, 3], pads=[1, 1, 0, 0]),
    dict(kernel_shape=[3, 3], pads=[1, 2, 0, 1], strides=[2, 2]),
    dict(kernel_shape=[3, 3], auto_pad="SAME_LOWER", strides=[2, 2]),
    dict(kernel_shape=[2, 3], auto_pad="SAME_UPPER", strides=[2, 2]),
    dict(kernel_shape=[2, 2], auto_pad="SAME_LOWER"),
    dict(kernel_shape=[3, 3], auto_pad="VALID", strides=[2, 1]),
    dict(kernel_shape=[2, 2], storage_order=1, pads=[1, 1, 0, 0]),
    dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
    dict(kernel_shape=[3, 2], strides=[2, 2], ceil_mode=1, pads=[1, 1, 1, 1], dilations=[1, 2]),
]


@pytest.mark.parametrize("attrs", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.uint8])
def test_max_pool_2d(attrs, dtype):
    x = RNG.integers(-100, 100, (2, 3, 7, 6)) if dtype is not np.uint8 else RNG.integers(0, 255, (2, 3, 7, 6))
    x = x.astype(dtype) if dtype in (np.int8, np.uint8) else (RNG.standard_normal((2, 3, 7, 6)) * 5).astype(dtype)
    y, ind = _run("MaxPool", {"x": x}, nout=2, opset=12, **attrs)
    n = 2
    want_y, want_i = _max_pool_oracle(x, attrs["kernel_shape"], attrs.get("strides", [1] * n), attrs.get("dilations", [1] * n),
                                      attrs.get("pads", [0] * 2 * n), attrs.get("auto_pad", "NOTSET"), attrs.get("ceil_mode", 0),
                                      attrs.get("storage_order", 0))
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(ind, want_i)


@pytest.mark.parametrize("shape,attrs", [((1, 2, 9), dict(kernel_shape=[3], pads=[2, 0], strides=[2])),
                                         ((1, 2, 5, 4, 6), dict(kernel_shape=[2, 3, 2], pads=[1, 0, 1, 0, 1, 0]))])
def test_max_pool_1d_3d(shape, attrs):
    x = RNG.standard_normal(shape).astype(np.float32)
    n = len(shape) - 2
    y, ind = _run("MaxPool", {"x": x}, nout=2, **attrs)
    want_y, want_i = _max_pool_oracle(x, attrs["kernel_shape"], attrs.get("strides", [1] * n), [1] * n,
                                      attrs["pads"], "NOTSET", 0, 0)
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(ind, want_i)


def test_max_pool_single_output_matches_torch():
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    (y,) = _run("MaxPool", {"x": x}, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
    want = F.max_pool2d(torch.tensor(x), 3, 2, 1, ceil_mode=True).numpy()
    np.testing.assert_array_equal(y, want)


def _conv_t_oracle(x, w, b, group, strides, dilations, opad, pads):
    n = x.ndim - 2
    fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[n]
    y = fn(torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64),
           None if b is None else torch.tensor(b, dtype=torch.float64), stride=strides, output_padding=opad,
           groups=group, dilation=dilations).numpy()
    return y[(slice(None), slice(None)) + tuple(slice(pads[i], y.shape[2 + i] - pads[i + n]) for i in range(n))]


@pytest.mark.parametrize("group,cout_g,strides,dilations,pads", [
    (4, 1, [2, 2], [1, 1], [0, 0, 0, 0]),
    (2, 3, [1, 1], [1, 1], [1, 1, 1, 0]),
    (2, 3, [1, 2], [2, 1], [0, 1, 2, 0]),
    (1, 2, [3, 2], [1, 1], [1, 0, 0, 1]),
])
def test_conv_transpose_groups_and_pads(group, cout_g, strides, dilations, pads):
    x = RNG.standard_normal((2, 4, 5, 6)).astype(np.float32)
    w = RNG.standard_normal((4, cout_g, 3, 2)).astype(np.float32)
    b = RNG.standard_normal(group * cout_g).astype(np.float32)
    (y,) = _run("ConvTranspose", {"x": x, "w": w, "b": b}, group=group, strides=strides, dilations=dilations, pads=pads)
    np.testing.assert_allclose(y, _conv_t_oracle(x, w, b, group, strides, dilations, [0, 0], pads), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("auto_pad", ["NOTSET", "SAME_UPPER", "SAME_LOWER"])
def test_conv_transpose_output_shape(auto_pad):
    x = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    w = RNG.standard_normal((2, 3, 3, 3)).astype(np.float32)
    out = [8, 7]
    (y,) = _run("ConvTranspose", {"x": x, "w": w}, strides=[2, 2], output_shape=out, auto_pad=auto_pad)
    assert y.shape == (1, 3, 8, 7)
    full = [2 * (4 - 1) + 3] * 2  # stride * (in - 1) + kernel
    total = [f - o for f, o in zip(full, out)]
    first = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
    pads = first + [t - f for t, f in zip(total, first)]
    np.testing.assert_allclose(y, _conv_t_oracle(x, w, None, 1, [2, 2], [1, 1], [0, 0], pads), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,kernel,strides", [((1, 2, 5), [4], [3]), ((1, 2, 3, 4, 3), [2, 2, 2], [2, 1, 2])])
def test_conv_transpose_1d_3d_output_padding(shape, kernel, strides):
    x = RNG.standard_normal(shape).astype(np.float32)
    w = RNG.standard_normal((2, 2) + tuple(kernel)).astype(np.float32)
    opad = [min(1, s - 1) for s in strides]
    (y,) = _run("ConvTranspose", {"x": x, "w": w}, strides=strides, output_padding=opad)
    np.testing.assert_allclose(y, _conv_t_oracle(x, w, None, 1, strides, [1] * len(kernel), opad, [0] * 2 * len(kernel)),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs,want_len", [(dict(auto_pad="SAME_UPPER", strides=[3]), 9),
                                            (dict(auto_pad="SAME_LOWER", strides=[4]), 12),
                                            (dict(output_shape=[8], strides=[3]), 8)])
def test_conv_transpose_output_larger_than_its_extent(attrs, want_len):
    # a 1-wide kernel at stride s covers s * (in - 1) + 1 positions; SAME asks for in * s (and output_shape may ask
    # for more): the spec's pads are negative, the output extends past the computed positions with the bias alone
    x = np.array([[[1.0, 2.0, 3.0]]], np.float32)
    w = np.ones((1, 1, 1), np.float32)
    b = np.array([100.0], np.float32)
    (y,) = _run("ConvTranspose", {"x": x, "w": w, "b": b}, **attrs)
    s = attrs["strides"][0]
    full = np.full(s * 2 + 1, 100.0)
    full[::s] += [1.0, 2.0, 3.0]
    total = len(full) - want_len  # negative
    first = total // 2 if attrs.get("auto_pad") == "SAME_UPPER" else total - total // 2
    want = np.concatenate([np.full(-first, 100.0), full, np.full(first - total, 100.0)])
    assert y.shape == (1, 1, want_len)
    np.testing.assert_array_equal(y[0, 0], want)
