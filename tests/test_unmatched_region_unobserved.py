"""``folded`` "computed inside A's <Op> '<node>', one node there" was said of a B tensor where A's node reads,
between it and the tensors paired with the region's inputs, a tensor that A computes with a node of its own
and compares nowhere (int8 codes of no known scale): A does not compute the region as one node, so the
claim was false (QA on quantized BERT: its embedding Gathers). A's node is now checked against the graph:
walking back from its inputs through tensors A does not observe, none is one A computes and never compares.

Oracle: the graphs themselves (A's Gather writes the codes its QLinearAdd reads, and no DequantizeLinear or
QLinear* slot gives them one scale)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.match.observe import observe

vi = helper.make_tensor_value_info
CPU = api.RunConfig(device="cpu", cache=False)


def _models(tmp_path):
    """B: e1 = Gather(w, ids), y1 = e1 + Relu(x); e2 = Gather(w, ids), y2 = e2 * Relu(x).
    A: one Gather of w's uint8 codes, read by a QLinearAdd and a QLinearMul with two scales (so none is known)."""
    rng = np.random.default_rng(3)
    w = rng.normal(size=(10, 8)).astype(np.float32)
    io = ([vi("ids", TensorProto.INT64, [1, 4]), vi("x", TensorProto.FLOAT, [1, 4, 8])],
          [vi("y1", TensorProto.FLOAT, [1, 4, 8]), vi("y2", TensorProto.FLOAT, [1, 4, 8])])
    b = make_model([helper.make_node("Relu", ["x"], ["h"], name="relu"),
                    helper.make_node("Gather", ["w", "ids"], ["e1"], name="g1"),
                    helper.make_node("Add", ["e1", "h"], ["y1"], name="add"),
                    helper.make_node("Gather", ["w", "ids"], ["e2"], name="g2"),
                    helper.make_node("Mul", ["e2", "h"], ["y2"], name="mul")], *io, [numpy_helper.from_array(w, "w")], opset=13)
    s = float(np.abs(w).max() / 127)
    codes = np.clip(np.round(w / s) + 128, 0, 255).astype(np.uint8)
    f = lambda v, n, t=np.float32: numpy_helper.from_array(np.array(v, t), n)  # noqa: E731
    a = make_model([helper.make_node("Relu", ["x"], ["h"], name="relu"),
                    helper.make_node("QuantizeLinear", ["h", "sh", "z"], ["h_q"], name="qh"),
                    helper.make_node("Gather", ["w_q", "ids"], ["e_q"], name="gather"),
                    helper.make_node("QLinearAdd", ["e_q", "s1", "z", "h_q", "sh", "z", "sy", "z"], ["y1_q"],
                                     name="the_add", domain="com.microsoft"),
                    helper.make_node("DequantizeLinear", ["y1_q", "sy", "z"], ["y1"], name="dq1"),
                    helper.make_node("QLinearMul", ["e_q", "s2", "z", "h_q", "sh", "z", "sy", "z"], ["y2_q"],
                                     name="the_mul", domain="com.microsoft"),
                    helper.make_node("DequantizeLinear", ["y2_q", "sy", "z"], ["y2"], name="dq2")],
                   *io, [numpy_helper.from_array(codes, "w_q"), f(s, "s1"), f(2 * s, "s2"), f(0.02, "sh"),
                         f(0.05, "sy"), f(128, "z", np.uint8)], opset=13)
    a.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    pa, pb = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(a, pa)
    onnx.save(b, pb)
    return pa, pb


def test_a_node_that_reads_codes_compared_nowhere_is_no_one_node_region(tmp_path):
    pa, pb = _models(tmp_path)
    # the case: A computes e_q with its Gather and compares it nowhere (no scale), its QLinearAdd reads it
    assert "e_q" in {o.name for o in observe(onnx.load(pa)).unscaled}
    rng = np.random.default_rng(0)
    feeds = {"ids": np.array([[3, 1, 4, 1]], np.int64), "x": rng.normal(size=(1, 4, 8)).astype(np.float32)}
    res = api.diff(pa, pb, selection=api.Selection(all=True), config=CPU, inputs=api.InputSpec(arrays=feeds))
    assert {"y1", "y2"} <= {r.pair.b.name for r in res.results}  # the regions' ends are paired
    lost = {u.obs.name: u for u in res.matching.unmatched_b}
    for name in ("e1", "e2"):
        u = lost[name]
        assert "one node there" not in u.reason and "computed inside" not in u.reason, u.reason
        # nor "no tensor of its own in A, folded into its consumer": A's Gather writes one, compared nowhere
        assert u.cause == "no-counterpart", (u.cause, u.reason)
    # A's codes are still listed for what they are
    (e_q,) = [u for u in res.matching.unmatched_a if u.obs.name == "e_q"]
    assert e_q.cause == "no-scale", e_q.reason
