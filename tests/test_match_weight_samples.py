"""match.weights: a weight's sample values are taken at the positions np.linspace(0, size - 1, n) gives,
truncated (as they were, before _positions computed them without ~10 us of array calls for each weight).
Checked against numpy's linspace itself and against the values at those positions of each float type."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxprobe.match.weights import SAMPLES, _positions, float_constants


def test_positions_are_linspaces():
    rng = np.random.default_rng(0)
    sizes = list(range(1, 3000)) + [int(s) for s in rng.integers(2, 2**45, 20000)] + [2**53 - 1, 2**31 + 1]
    for size in sizes:
        want = np.linspace(0, size - 1, min(size, SAMPLES)).astype(np.int64).tolist()
        assert _positions(size) == want, size


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("size", [2, 7, 16, 17, 1000, 4099])
def test_sample_values_are_the_weights_at_linspace_positions(dtype, size):
    w = np.random.default_rng(size).standard_normal(size).astype(dtype)
    t = numpy_helper.from_array(w, "W")
    g = helper.make_graph([helper.make_node("Identity", ["W"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", t.data_type, [size])], initializer=[t])
    got = float_constants(helper.make_model(g))["W"]
    at = np.linspace(0, size - 1, min(size, SAMPLES)).astype(np.int64)
    assert got.sample == tuple(float(v) for v in w[at])
    assert all(type(v) is float for v in got.sample) and got.size == size


def test_bfloat16_samples_are_the_top_halves():
    w = np.random.default_rng(3).standard_normal(40).astype(np.float32)
    top = (w.view(np.uint32) >> 16).astype(np.uint16)
    t = helper.make_tensor("W", TensorProto.BFLOAT16, [40], top.tobytes(), raw=True)
    g = helper.make_graph([helper.make_node("Identity", ["W"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [40])], initializer=[t])
    got = float_constants(helper.make_model(g))["W"]
    at = np.linspace(0, 39, SAMPLES).astype(np.int64)
    want = (top.astype(np.uint32) << 16).view(np.float32)[at]
    assert got.sample == tuple(float(v) for v in want)
