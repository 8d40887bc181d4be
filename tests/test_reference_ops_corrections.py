"""The reference runner's corrections of onnx.reference (runners.reference_ops, runners.reference_pool): each op
as onnx.reference gets it wrong or cannot run it, through the runner, against a float64 oracle of the op's
specification (torch's functional ops where they compute the same thing, explicit loops otherwise)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conftest import reference_node

RNG = np.random.default_rng(7)


def _r(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _run(op, opset, inputs, consts=None, nout=1, **attrs):
    return reference_node(op, inputs, nout, opset, consts, **attrs)


def _t(a):
    return torch.tensor(np.asarray(a, np.float64))


@pytest.mark.parametrize("opset", [10, 13, 18])
@pytest.mark.parametrize("per_axis", [False, True])
def test_dequantize_linear_before_19(opset, per_axis):
    if per_axis and opset < 13:
        pytest.skip("per-axis is DequantizeLinear-13's")
    x = RNG.integers(0, 256, (2, 3, 4)).astype(np.uint8)
    scale = np.array([0.5, 0.02, 3.0], np.float32) if per_axis else np.array(0.07, np.float32)
    zp = np.array([3, 128, 0], np.uint8) if per_axis else np.array(128, np.uint8)
    (got,) = _run("DequantizeLinear", opset, {"x": x}, {"s": scale, "z": zp})
    want = np.empty(x.shape)
    for idx in np.ndindex(*x.shape):
        c = idx[1] if per_axis else ()
        want[idx] = (float(x[idx]) - float(zp[c])) * float(scale[c])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("opset", [10, 13])
def test_dequantize_linear_one_element_scale_of_a_vector(opset):
    # an int32 bias [C] with scale and zero point of shape [1] (as exporters write them): per tensor, as onnxruntime
    # takes a one-element vector; axis 1 (the default) is not an axis of a 1-D input
    x = np.array([-7, 0, 12, 300], np.int32)
    (got,) = _run("DequantizeLinear", opset, {"x": x}, {"s": np.array([0.25], np.float32), "z": np.array([2], np.int32)})
    np.testing.assert_array_equal(got, ((x.astype(np.float64) - 2) * 0.25).astype(np.float32))


def _roi_align_ohp(X, roi, oh, ow, ss, sr):
    """RoiAlign-10 (opset 16's output_half_pixel): roi * spatial_scale, at least 1 x 1, sampled on a
    sampling_ratio (or ceil(roi / output)) grid per bin, bilinear, averaged."""
    x1, y1, x2, y2 = (float(v) * ss for v in roi)
    rh, rw = max(y2 - y1, 1.0), max(x2 - x1, 1.0)
    gh, gw = sr or math.ceil(rh / oh), sr or math.ceil(rw / ow)
    H, W = X.shape
    out = np.zeros((oh, ow))
    for i, j in itertools.product(range(oh), range(ow)):
        acc = 0.0
        for a, b in itertools.product(range(gh), range(gw)):
            y = y1 + i * rh / oh + (a + 0.5) * rh / oh / gh
            x = x1 + j * rw / ow + (b + 0.5) * rw / ow / gw
            if y < -1 or y > H or x < -1 or x > W:
                continue
            y, x = min(max(y, 0.0), H - 1), min(max(x, 0.0), W - 1)
            y0, x0 = int(y), int(x)
            y1_, x1_ = min(y0 + 1, H - 1), min(x0 + 1, W - 1)
            ly, lx = y - y0, x - x0
            acc += ((1 - ly) * (1 - lx) * X[y0, x0] + (1 - ly) * lx * X[y0, x1_] + ly * (1 - lx) * X[y1_, x0]
                    + ly * lx * X[y1_, x1_])
        out[i, j] = acc / (gh * gw)
    return out


@pytest.mark.parametrize("opset", [10, 11, 13, 15])
def test_roi_align_10_samples_without_the_half_pixel_shift(opset):
    X = _r(1, 2, 8, 8)
    rois = np.array([[0.5, 1.2, 6.1, 5.3], [2, 2, 2.4, 2.2]], np.float32)
    (got,) = _run("RoiAlign", opset, {"x": X, "r": rois, "b": np.zeros(2, np.int64)}, output_height=3,
                  output_width=2, spatial_scale=0.9, sampling_ratio=2)
    for k in range(2):
        for c in range(2):
            want = _roi_align_ohp(X[0, c].astype(np.float64), rois[k], 3, 2, 0.9, 2)
            np.testing.assert_allclose(got[k, c], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode,torch_mode", [("bilinear", "bilinear"), ("bicubic", "bicubic"), ("nearest", "nearest")])
@pytest.mark.parametrize("padding_mode", ["zeros", "reflection"])
def test_grid_sample_16_modes_by_their_opset_16_names(mode, torch_mode, padding_mode):
    X, grid = _r(1, 2, 4, 5), np.clip(_r(1, 3, 3, 2), -1.1, 1.1)
    (got,) = _run("GridSample", 16, {"x": X, "g": grid}, mode=mode, padding_mode=padding_mode, align_corners=0)
    want = F.grid_sample(_t(X), _t(grid), mode=torch_mode, padding_mode=padding_mode, align_corners=False).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(3, 7, 2, 3), (2, 6, 5)])
def test_lrn_sums_squares_across_channels(shape):
    x = _r(*shape)
    (got,) = _run("LRN", 13, {"x": x}, size=3, alpha=0.3, beta=0.6, bias=1.5)
    want = F.local_response_norm(_t(x), 3, alpha=0.3, beta=0.6, k=1.5).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("p,axis", [(1, 1), (2, -1), (1, 0)])
def test_lp_normalization_uses_absolute_values(p, axis):
    x = _r(2, 3, 4)
    (got,) = _run("LpNormalization", 13, {"x": x}, p=p, axis=axis)
    f = x.astype(np.float64)
    want = f / (np.abs(f) ** p).sum(axis=axis, keepdims=True) ** (1 / p)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_mean_broadcasts_to_a_shape_larger_than_its_first_input():
    a, b, c = _r(3, 1), _r(1, 4), _r(4)
    (got,) = _run("Mean", 13, {"a": a, "b": b, "c": c})
    want = (a.astype(np.float64) + b + c) / 3
    assert got.shape == (3, 4)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("depth", [np.array(5, np.int64), np.array([5], np.int64), np.array([5.0], np.float32)])
def test_one_hot_depth_scalar_or_one_element(depth):
    idx = np.array([[0, 4], [-1, 2]], np.int64)
    (got,) = _run("OneHot", 11, {"i": idx}, {"d": depth, "v": np.array([-2.0, 7.0], np.float32)}, axis=1)
    want = np.full((2, 5, 2), -2.0)
    for a, b in np.ndindex(2, 2):
        want[a, idx[a, b] % 5, b] = 7.0
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_global_lp_pool(p):
    x = _r(2, 3, 4, 5)
    (got,) = _run("GlobalLpPool", 13, {"x": x}, p=p)
    want = (np.abs(x.astype(np.float64)) ** p).sum(axis=(2, 3), keepdims=True) ** (1 / p)
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("axis", [0, 1])
def test_scatter_9(axis):
    data, upd = _r(3, 4), _r(2, 2)
    idx = np.array([[1, 0], [2, 3]], np.int64) if axis else np.array([[1, 0], [2, 1]], np.int64)
    (got,) = _run("Scatter", 9, {"x": data, "i": idx, "u": upd}, axis=axis)
    want = data.copy()
    for a, b in np.ndindex(2, 2):
        want[(idx[a, b], b) if axis == 0 else (a, idx[a, b])] = upd[a, b]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("opset", [7, 11, 18])
@pytest.mark.parametrize("pads", [[0, -1, 2, 1, 0, 0, -1, 2], [1, 1, 1, 1, 1, 1, 1, 1], [0, 2, -1, 0, -1, 0, 1, -2]])
def test_pad_removes_where_negative(opset, pads):
    x = _r(2, 3, 4, 5)
    if opset < 11:
        (got,) = _run("Pad", opset, {"x": x}, pads=pads, value=1.5)
    else:
        (got,) = _run("Pad", opset, {"x": x}, {"p": np.array(pads, np.int64), "c": np.array(1.5, np.float32)})
    torch_pads = []  # torch: last axis first, (begin, end) pairs; negative crops
    for ax in reversed(range(4)):
        torch_pads += [pads[ax], pads[ax + 4]]
    want = F.pad(_t(x), torch_pads, mode="constant", value=1.5).numpy()
    np.testing.assert_array_equal(got, want.astype(np.float32))


def test_pad_1_reads_its_paddings_attribute():
    # Pad-1 names its pads "paddings" (onnx.reference runs it; the correction must not break it)
    x = _r(2, 3)
    (got,) = _run("Pad", 1, {"x": x}, paddings=[1, 0, -1, 2], value=5.0)
    want = np.pad(x[:1], [(1, 0), (0, 2)], constant_values=5.0)  # axis 0: one added, one removed
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("begin,end", [(1, -3), (-3, 1), (-3, 3), (4, -3), (0, -2), (-1, -1)])
def test_pad_removing_more_than_the_axis_holds(begin, end):
    # out[j] = x[j - begin] where that is inside x, the constant elsewhere: n + begin + end elements, the crop
    # of one end eating into the padding of the other when it passes the axis's end
    x = np.array([[1.0, 2.0]], np.float32)
    (got,) = _run("Pad", 13, {"x": x}, {"p": np.array([0, begin, 0, end], np.int64), "c": np.array(9.0, np.float32)})
    want = [x[0, j - begin] if 0 <= j - begin < 2 else 9.0 for j in range(max(0, 2 + begin + end))]
    assert got.shape == (1, len(want))
    np.testing.assert_array_equal(got[0], np.array(want, np.float32))


@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_pad_modes_unchanged(mode):
    x = _r(1, 2, 4, 5)
    (got,) = _run("Pad", 13, {"x": x}, {"p": np.array([0, 0, 2, 1, 0, 0, 1, 3], np.int64)}, mode=mode)
    want = F.pad(_t(x), [1, 3, 2, 1], mode="reflect" if mode == "reflect" else "replicate").numpy()
    np.testing.assert_array_equal(got, want.astype(np.float32))


def test_resize_10_nearest_downsampling_is_the_specification_example():
    # Resize-10's own example (onnx's test_resize_downsample_nearest at opset 10, what onnxruntime gives): scales
    # 0.6 of [[1, 2, 3, 4], [5, 6, 7, 8]] are [[1, 3]]: x_in = x_out / scale, ceil when downsampling (floor: [[1, 2]])
    x = np.array([[[[1, 2, 3, 4], [5, 6, 7, 8]]]], np.float32)
    (got,) = _run("Resize", 10, {"x": x}, {"s": np.array([1, 1, 0.6, 0.6], np.float32)}, mode="nearest")
    np.testing.assert_array_equal(got, np.array([[[[1, 3]]]], np.float32))


@pytest.mark.parametrize("scale,at,want", [(2.7, 27, 10), (0.7, 7, 10)])
def test_resize_10_nearest_index_in_the_scales_float32(scale, at, want):
    # out 27 of scale 2.7 is in 10 (float32 27 / 2.7f, as onnxruntime), not 9 (27 / 2.70000005 in float64)
    x = np.arange(40, dtype=np.float32).reshape(1, 1, 40)
    (got,) = _run("Resize", 10, {"x": x}, {"s": np.array([1, 1, scale], np.float32)}, mode="nearest")
    assert got[0, 0, at] == want


def _resize_asymmetric(x, scales, mode):
    """Upsample-7/9, Resize-10: out = floor(in * scale); x_in = x_out / scale; nearest floor(x_in) (the
    specification's example), linear between floor(x_in) and the next, clamped."""
    out_shape = [math.floor(n * s) for n, s in zip(x.shape, scales)]
    y = np.zeros(out_shape)
    for o in np.ndindex(*out_shape):
        pos = [i / s for i, s in zip(o, scales)]
        if mode == "nearest":
            y[o] = x[tuple(min(math.floor(p), n - 1) for p, n in zip(pos, x.shape))]
            continue
        for corner in itertools.product((0, 1), repeat=x.ndim):
            w, at = 1.0, []
            for p, c, n in zip(pos, corner, x.shape):
                f = min(math.floor(p), n - 1)
                frac = p - f
                w *= frac if c else 1 - frac
                at.append(min(f + c, n - 1))
            y[o] += w * x[tuple(at)]
    return y


@pytest.mark.parametrize("op,opset", [("Upsample", 7), ("Upsample", 9), ("Resize", 10)])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 1.7, 2.5], [1, 2, 0.5, 1]])
def test_upsample_and_resize_10_are_asymmetric(op, opset, mode, scales):
    x = _r(1, 2, 3, 4)
    s = np.array(scales, np.float32)
    if opset == 7:
        (got,) = _run(op, opset, {"x": x}, mode=mode, scales=[float(v) for v in s])
    else:
        (got,) = _run(op, opset, {"x": x}, {"s": s}, mode=mode)
    np.testing.assert_allclose(got, _resize_asymmetric(x.astype(np.float64), [float(v) for v in s], mode), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("scales,sizes", [([1, 1, 2, 1.5], None), ([1, 1, 0.5, 0.7], None), (None, [1, 2, 3, 5])])
def test_resize_11_tf_half_pixel_for_nn(nearest_mode, scales, sizes):
    x = _r(1, 2, 4, 6)
    consts = {"roi": np.array([], np.float32), "s": np.array(scales or [], np.float32)}
    if sizes is not None:
        consts["z"] = np.array(sizes, np.int64)
    (got,) = _run("Resize", 11, {"x": x}, consts, mode="nearest", coordinate_transformation_mode="tf_half_pixel_for_nn",
                  nearest_mode=nearest_mode)
    out = sizes or [math.floor(n * s) for n, s in zip(x.shape, scales)]
    sc = [float(v) for v in np.array(scales, np.float32)] if scales else [o / n for o, n in zip(out, x.shape)]
    rnd = {"round_prefer_floor": lambda v: math.ceil(v - 0.5), "round_prefer_ceil": lambda v: math.floor(v + 0.5),
           "floor": math.floor, "ceil": math.ceil}[nearest_mode]
    want = np.empty(out, np.float32)
    for o in np.ndindex(*out):
        want[o] = x[tuple(min(max(rnd((i + 0.5) / s), 0), n - 1) for i, s, n in zip(o, sc, x.shape))]
    np.testing.assert_array_equal(got, want)
