"""onnxruntime's extended level fuses a MatMul and bias Add into a 2-D Gemm it reshapes back, and the spelled-out Gelu
behind them into one com.microsoft Gelu that reads the reshaped value: the Div, Erf and Add inside B's Gelu were "no
counterpart in A", where the README says folded into A's Gelu (the walk took the Gemm's output, which the Reshape
before the Gelu reads, for one more input of the Gelu). The oracle: the graphs as onnxruntime wrote them."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from conftest import saved_and_ort_copy
from onnxprobe import api


def test_a_spelled_out_gelu_is_folded_into_the_fused_one(tmp_path):
    rng = np.random.default_rng(0)
    inits = [nh.from_array(rng.standard_normal((16, 16)).astype(np.float32), "W"), nh.from_array(rng.standard_normal(16).astype(np.float32), "b"),
             nh.from_array(np.array(1.4142135, np.float32), "sqrt2"), nh.from_array(np.array(1.0, np.float32), "one"),
             nh.from_array(np.array(0.5, np.float32), "half")]
    nodes = [h.make_node("MatMul", ["x", "W"], ["mm"]), h.make_node("Add", ["mm", "b"], ["fc"]),
             h.make_node("Div", ["fc", "sqrt2"], ["d"]), h.make_node("Erf", ["d"], ["e"]), h.make_node("Add", ["e", "one"], ["a"]),
             h.make_node("Mul", ["fc", "a"], ["m"]), h.make_node("Mul", ["m", "half"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 5, 16])], [h.make_tensor_value_info("y", T.FLOAT, [1, 5, 16])], inits)
    a, b = saved_and_ort_copy(g, tmp_path, "extended")
    ops = {n.op_type for n in onnx.load(a).graph.node}
    assert "Gelu" in ops and "Erf" not in ops, ops  # the oracle: onnxruntime fused them
    x = rng.standard_normal((1, 5, 16)).astype(np.float32)
    res = api.diff(a, b, selection=api.Selection(all=True), inputs=api.InputSpec(arrays={"x": x}),
                   config=api.RunConfig(device="cpu", cache=False))
    assert "y" in {r.pair.b.name for r in res.results}
    inner = {u.obs.name: u for u in res.unmatched_in("b")}
    for t in ("d", "e", "a"):
        assert inner[t].cause == "folded" and "Gelu" in inner[t].reason, (t, inner[t].cause, inner[t].reason)
    assert res.verdict()[0] == "pass"
