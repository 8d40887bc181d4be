"""`diff --grad` of a weight one model shares between two nodes and the other gives each node its own copy
of: a weight's gradient sums over the nodes that read it, so the shared one is another function of the
data than the copy read once, and the pair is refused (cause "different-function"), not measured as a
FAIL (GPT-2's legacy export reads one zero tensor as LayerNorm and, through Identity, Gemm biases).

Oracle: a numpy float64 backward pass of Gemm -> Relu -> Gemm under the sum loss.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api
from onnxprobe.match.engine import DIFFERENT_FUNCTION

CPU = api.RunConfig(device="cpu", opt_level="off")


def _two_gemms(path, shared: bool, w: dict[str, np.ndarray]):
    """x[1,3] -> Gemm(W1, b) -> Relu -> Gemm(W2, b') -> y; b' is b through an Identity (``shared``) or
    its own initializer 'b2' holding the same values."""
    second = "b_id" if shared else "b2"
    nodes = [helper.make_node("Gemm", ["x", "W1", "b"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "W2", second], ["y"])]
    inits = {"W1": w["W1"], "b": w["b"], "W2": w["W2"]}
    if shared:
        nodes.insert(0, helper.make_node("Identity", ["b"], ["b_id"]))
    else:
        inits["b2"] = w["b"]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
                          [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _grads(w, x) -> dict[str, np.ndarray]:
    """d(sum y)/d b for its two readers: the first Gemm's bias slot and the second's, float64."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    h = x.astype(np.float64) @ w["W1"] + w["b"]
    g_h = (np.ones((1, 3)) @ w["W2"].T) * (h > 0)
    return {"first": g_h.sum(0), "second": np.ones(3)}


def _case(tmp_path):
    rng = np.random.default_rng(3)
    w = {"W1": rng.standard_normal((3, 3)), "b": rng.standard_normal(3), "W2": rng.standard_normal((3, 3))}
    x = rng.standard_normal((1, 3)).astype(np.float32)
    return w, x, api.InputSpec(arrays={"x": x})


def test_a_shared_weight_is_not_paired_with_a_copy_read_once(tmp_path):
    w, x, inputs = _case(tmp_path)
    g = _grads(w, x)
    # the oracle: the shared bias's gradient differs from the copy's by the second reader's share
    assert np.abs((g["first"] + g["second"]) - g["first"]).max() > 0.5
    a = _two_gemms(tmp_path / "a.onnx", True, w)
    b = _two_gemms(tmp_path / "b.onnx", False, w)
    res = api.diff_grad(a, b, config=CPU, inputs=inputs)
    assert "b_grad" not in {r.pair.a.name for r in res.results}  # was a pair, and a FAIL
    assert not [r for r in res.results if r.passed is False]
    refused = {u.obs.name: u for u in res.matching.unmatched_a}
    assert refused["b_grad"].cause == DIFFERENT_FUNCTION
    assert "2 in A" in refused["b_grad"].reason and "1 in B" in refused["b_grad"].reason
    # the weights read once each side still pair and agree
    assert {r.pair.a.name for r in res.results if r.passed} >= {"W1_grad", "W2_grad"}


def test_weights_shared_alike_on_both_sides_still_pair(tmp_path):
    """Read by two nodes in both (an Identity copy on one side is the same weight): compared, and equal."""
    w, x, inputs = _case(tmp_path)
    a = _two_gemms(tmp_path / "a.onnx", True, w)
    b = _two_gemms(tmp_path / "b.onnx", True, w)
    res = api.diff_grad(a, b, config=CPU, inputs=inputs)
    pair = {r.pair.a.name: r for r in res.results}["b_grad"]
    assert pair.passed and pair.metrics.max_abs == 0
