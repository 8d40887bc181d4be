"""``diff --vs-reference`` on LRN: onnx.reference's LRN (1.23 at least) loops over the batch axis where it
means the channels (``for c in range(x.shape[0])``), so with a batch of 1 only channel 0 is normalised and
every other channel is divided by bias ** beta alone: AlexNet's and GoogLeNet's LRN layers read 60 dB and
9 dB against onnxruntime, and onnxruntime (right) was blamed. The reference runner corrects it (onnxruntime takes odd sizes and 4-D inputs). The oracle:
the specification's formula in numpy float64 (the window of channels c - floor((size-1)/2) .. c +
ceil((size-1)/2), square sums scaled by alpha / size)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from conftest import make_model
from onnxprobe import api


def _oracle(x: np.ndarray, size: int, alpha: float, beta: float, bias: float) -> np.ndarray:
    x = x.astype(np.float64)
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    sq = np.zeros_like(x)
    for c in range(x.shape[1]):
        sq[:, c] = (x[:, max(0, c - lo):min(x.shape[1], c + hi + 1)] ** 2).sum(axis=1)
    return x / (bias + alpha / size * sq) ** beta


@pytest.mark.parametrize("shape,size", [((1, 6, 3, 3), 5), ((2, 5, 2, 2), 3), ((1, 4, 1, 2), 7)])
@pytest.mark.parametrize("opset", [9, 13])
def test_vs_reference_follows_the_specifications_lrn(shape, size, opset, tmp_path):
    alpha, beta, bias = 0.3, 0.75, 1.5  # large enough for the window to matter at float32
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"], name="sq"),
             helper.make_node("LRN", ["sq"], ["y"], name="lrn", size=size, alpha=alpha, beta=beta, bias=bias)]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))], [], opset=opset, ir=7)
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    x = (3 * np.random.default_rng(4).standard_normal(shape)).astype(np.float32)
    res = api.diff(p, vs_reference=True, selection=api.Selection(all=True), inputs=api.InputSpec(arrays={"x": x}))
    assert res.verdict()[0] == "pass", res.verdict()
    obs = next(r.pair.b for r in res.results if r.pair.b.name == "y")
    got = res.b.values([obs], {"x": x})[obs.probe]  # what onnx.reference computes, through the runner
    np.testing.assert_allclose(got, _oracle(x * x, size, alpha, beta, bias), rtol=1e-5, atol=1e-6)
