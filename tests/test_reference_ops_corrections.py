"""The reference runner's corrections of onnx.reference (runners.reference_ops, runners.reference_pool): each op
as onnx.reference gets it wrong or cannot run it, through the runner, against a float64 oracle of the op's
specification (torch's functional ops where they compute the same thing, explicit loops otherwise)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from onnx import helper, numpy_helper

from conftest import make_model
from onnxprobe.runtime.runners.reference import ReferenceRunner

RNG = np.random.default_rng(7)


def _r(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _run(op, opset, inputs, consts=None, nout=1, **attrs):
    """One ``op`` node at ``opset`` through the reference runner: its outputs."""
    consts = consts or {}
    names = list(inputs) + list(consts)
    node = helper.make_node(op, [n if n else "" for n in names], [f"y{i}" for i in range(nout)], name="n", **attrs)
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in inputs.items()]
    outs = [helper.make_empty_tensor_value_info(f"y{i}") for i in range(nout)]
    m = make_model([node], vi, outs, [numpy_helper.from_array(a, n) for n, a in consts.items() if n], opset=opset, ir=7)
    res, _ = ReferenceRunner(m).execute(m, dict(inputs), [f"y{i}" for i in range(nout)])
    return [res[f"y{i}"] for i in range(nout)]


def _t(a):
    return torch.tensor(np.asarray(a, np.float64))


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


@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_pad_modes_unchanged(mode):
    x = _r(1, 2, 4, 5)
    (got,) = _run("Pad", 13, {"x": x}, {"p": np.array([0, 0, 2, 1, 0, 0, 1, 3], np.int64)}, mode=mode)
    want = F.pad(_t(x), [1, 3, 2, 1], mode="reflect" if mode == "reflect" else "replicate").numpy()
    np.testing.assert_array_equal(got, want.astype(np.float32))
