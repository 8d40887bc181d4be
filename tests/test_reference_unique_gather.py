"""Unique and GatherElements through the reference runner (runners.reference_ops), against loops of their
specification. onnx.reference returned Unique's values sorted with sorted=0 when Y is its only output, and
failed (or took the wrong axis) with sorted=0 and an axis or a multi-dimensional input; its GatherElements
refused indices smaller than the data in the other axes (their shape is the output's)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import reference_node


_run = reference_node  # (op, inputs, nout=1, opset=13, **attrs)


def _unique_oracle(x, axis, sorted_):
    """Slices along ``axis`` (elements of the flattened x without one), in order of first occurrence or sorted."""
    flat = x.reshape(-1) if axis is None else np.moveaxis(x, axis, 0)
    keys = [flat[i].tobytes() for i in range(flat.shape[0])]
    first = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    order = list(first.values())
    if sorted_:
        order.sort(key=lambda i: tuple(np.asarray(flat[i]).reshape(-1)))
    rank = {keys[i]: r for r, i in enumerate(order)}
    y = np.stack([flat[i] for i in order])
    y = y if axis is None else np.moveaxis(y, 0, axis)
    return y, np.array(order), np.array([rank[k] for k in keys]), np.array([keys.count(keys[i]) for i in order])


@pytest.mark.parametrize("x,axis", [
    (np.array([2, 1, 1, 3, 4, 3], np.float32), None),
    (np.array([[2, 1, 2], [3, 4, 3]], np.int64), None),
    (np.array([[2, 1, 1], [3, 4, 3]], np.float32), 1),
    (np.array([[2, 1, 2], [3, 4, 3]], np.float32), -1),
    (np.array([[5, 5], [1, 2], [5, 5]], np.int32), 0),
])
@pytest.mark.parametrize("sorted_", [0, 1])
@pytest.mark.parametrize("nout", [1, 4])
def test_unique(x, axis, sorted_, nout):
    attrs = {"sorted": sorted_} | ({} if axis is None else {"axis": axis})
    got = _run("Unique", {"x": x}, nout=nout, opset=11, **attrs)
    want = _unique_oracle(x, axis, sorted_)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements_indices_smaller_than_the_data(axis):
    data = np.arange(20, dtype=np.float32).reshape(4, 5)
    idx = np.array([[1, -1], [0, 2], [-2, 3]], np.int64)
    (got,) = _run("GatherElements", {"x": data, "i": idx}, axis=axis)
    want = np.empty(idx.shape, np.float32)
    ax = axis % 2
    for a, b in np.ndindex(*idx.shape):
        j = idx[a, b] % data.shape[ax]
        want[a, b] = data[j, b] if ax == 0 else data[a, j]
    np.testing.assert_array_equal(got, want)
