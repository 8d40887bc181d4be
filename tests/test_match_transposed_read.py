"""onnxruntime's transpose optimizer (basic level, what quant_pre_process writes before every quantization) moves a
Slice and a Squeeze above a Transpose and keeps their node names: A's Slice reads x where B's reads Transpose(x), two
functions of the data (README, node-name: unmatched as another function). Behind a Reshape to a shape computed at run
time no static shape told them apart, so they were paired by node name and then "not compared: shapes differ at run
time", B's Transposes said to be computed inside A's Slice and Relu, and the intro dB behind them lost. The oracle:
each model's tensors from plain onnxruntime, their shapes and values."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from conftest import saved_and_ort_copy
from onnxprobe import api
from test_diff import _run_with_outputs


def _models(tmp_path) -> tuple[str, str]:
    inits = [nh.from_array(np.array([1], np.int64), "st"), nh.from_array(np.array([2], np.int64), "en"),
             nh.from_array(np.array([0], np.int64), "ax")]
    nodes = [h.make_node("Shape", ["x"], ["xs"], name="shape"), h.make_node("Reshape", ["x", "xs"], ["x2"], name="reshape"),
             h.make_node("Transpose", ["x2"], ["t"], name="tr1", perm=[2, 0, 3, 1, 4]),
             h.make_node("Slice", ["t", "st", "en", "ax"], ["s_out"], name="sl"),
             h.make_node("Squeeze", ["s_out", "ax"], ["q_out"], name="sq"),
             h.make_node("Transpose", ["q_out"], ["z"], name="tr2", perm=[0, 2, 1, 3]),
             h.make_node("Relu", ["z"], ["y"], name="relu")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 20, 3, 8, 15])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 20, 8, 15])], inits)
    return saved_and_ort_copy(g, tmp_path, "basic", opset=13)


def test_a_slice_moved_above_a_transpose_is_another_function_not_a_pair(tmp_path):
    a, b = _models(tmp_path)
    nodes_a = {n.name: n for n in onnx.load(a).graph.node}
    assert "sl" in nodes_a and nodes_a["sl"].input[0] != "t"  # the optimizer moved it: it reads what B's Transpose reads
    x = np.random.default_rng(0).standard_normal((1, 20, 3, 8, 15)).astype(np.float32)
    res = api.diff(a, b, selection=api.Selection(all=True), inputs=api.InputSpec(arrays={"x": x}),
                   config=api.RunConfig(device="cpu", cache=False))
    # the oracle: the two Slice outputs are of other shapes (other functions); every pair made has equal values
    sa = _run_with_outputs(a, [nodes_a["sl"].output[0]], {"x": x})[nodes_a["sl"].output[0]]
    sb = _run_with_outputs(b, ["s_out"], {"x": x})["s_out"]
    assert sa.shape != sb.shape
    assert all(r.metrics is not None for r in res.results), [(r.pair.a.name, r.problem) for r in res.results]
    assert "s_out" not in {r.pair.b.name for r in res.results}
    other = {u.obs.name: u for u in res.unmatched_in("b")}
    assert other["s_out"].cause == "different-function" and other["q_out"].cause == "different-function"
    for r in res.results:
        va = _run_with_outputs(a, [r.pair.a.name], {"x": x})[r.pair.a.name]
        vb = _run_with_outputs(b, [r.pair.b.name], {"x": x})[r.pair.b.name]
        assert va.shape == vb.shape and np.array_equal(va, vb)
    y = next(r for r in res.results if r.pair.b.name == "y")
    assert y.introduced is not None  # measured behind them, not lost
    assert res.verdict()[0] == "pass"
