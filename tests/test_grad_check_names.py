"""`grad --check` on valid models that use the names the check adds (the perturbed copy 'W.perturbed', the delta
input 'onnxprobe.delta:W', the Add node 'onnxprobe.check/W'): onnxruntime refused the perturbable model ("two nodes
with same node name", "Duplicate definition") and the error called the model invalid. The names are fresh now, and
the check agrees with finite differences computed here in numpy float64."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api

RNG = np.random.default_rng(5)
W = RNG.normal(size=(3, 2)).astype(np.float32)
X = RNG.normal(size=(2, 3)).astype(np.float32)


def model(clash: str):
    """y = sum-able Tanh(x @ W), with a name of the check's own in it: a node name, a tensor, or a graph input."""
    vi = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)  # noqa: E731
    mm = helper.make_node("MatMul", ["x", "W"], ["h"], name="onnxprobe.check/W" if clash == "node" else "mm")
    nodes, inputs = [mm], [vi("x", [2, 3])]
    h = "h"
    if clash == "tensor":  # a tensor named as the check's perturbed copy of W
        nodes.append(helper.make_node("Identity", ["h"], ["W.perturbed"]))
        h = "W.perturbed"
    if clash == "input":  # a graph input named as the check's delta of W, added to the output
        inputs.append(vi("onnxprobe.delta:W", [2, 2]))
        nodes.append(helper.make_node("Add", [h, "onnxprobe.delta:W"], ["h2"]))
        h = "h2"
    nodes.append(helper.make_node("Tanh", [h], ["y"]))
    return make_model(nodes, inputs, [vi("y", [2, 2])], [numpy_helper.from_array(W, "W")])


@pytest.mark.parametrize("clash", ["node", "tensor", "input"])
def test_the_check_runs_on_a_model_that_uses_its_names(clash):
    d = np.full((2, 2), 0.25, np.float32)
    feed = {"x": X, **({"onnxprobe.delta:W": d} if clash == "input" else {})}
    res = api.grad(model(clash), api.Selection(names=("W",)), api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays=feed),
                   check=True, save=True)
    row = next(r for r in res.rows if r.target.ref.name == "W")
    assert row.check is not None and row.check["ok"] is True, row.check
    # the oracle: d sum(tanh(x W + d)) / dW in float64, by central differences
    def loss(w):
        return np.tanh(X.astype(np.float64) @ w + (d if clash == "input" else 0)).sum()
    num = np.zeros_like(W, np.float64)
    for idx in np.ndindex(W.shape):
        e = np.zeros_like(num)
        e[idx] = 1e-6
        num[idx] = (loss(W + e) - loss(W - e)) / 2e-6
    np.testing.assert_allclose(res.arrays["W"], num, rtol=1e-4, atol=1e-5)
