"""The ``folded`` reasons of ``match.regions`` named the wrong op (QA on PP-OCRv4 and BERT quantized):
- on a QDQ model whose quantizer dropped a Relu/Clip(0, ...) into the quantization range of the tensor before it
  (PP-OCRv4's Add before a HardSwish's Clip, BatchNormalization before a Relu), B's tensor before the activation
  was "computed inside A's Add 'add', one node there": A's Add computes that very tensor; the activation is what
  A folded, into its quantization range, not into the Add;
- a QOperator value compared through its DequantizeLinear was "A's Add 'y_DequantizeLinear'": the
  DequantizeLinear named as the Add; the node that computes it is the QLinearAdd.

Oracle: the graphs themselves (which node writes what, the zero point that starts the range at 0)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from conftest import make_model
from onnxprobe import api
from test_match_clip_folded import _feeds, _models

CPU = api.RunConfig(device="cpu", cache=False)


def test_qdq_activation_folded_into_the_range_is_said_so(tmp_path):
    pa, pb = _models(tmp_path, "qdq")
    a = onnx.load(pa)
    (add,) = [n for n in a.graph.node if n.op_type == "Add"]
    (q,) = [n for n in a.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == add.output[0]]
    zp = onnx.numpy_helper.to_array(next(t for t in a.graph.initializer if t.name == q.input[2]))
    assert zp == np.iinfo(zp.dtype).min  # the case: a range that starts at 0, A's Add reads x and w as B's does
    res = api.diff(pa, pb, selection=api.Selection(all=True), config=CPU, inputs=api.InputSpec(arrays=_feeds(5, 1)[0]))
    (u,) = [u for u in res.matching.unmatched_b if u.obs.name == "a"]
    assert u.cause == "folded"
    assert "one node there" not in u.reason and "computed inside" not in u.reason, u.reason
    assert "Clip 'c'" in u.reason and "quantization range" in u.reason, u.reason


def test_a_dequantized_qoperator_value_names_the_node_that_computes_it(tmp_path):
    """B: y = x1 - Neg(x2), A: y = DQ(QLinearAdd(Q(x1), Q(x2))): B's Neg output lies inside A's QLinearAdd."""
    vi = helper.make_tensor_value_info
    f = lambda v, n, t=np.float32: onnx.numpy_helper.from_array(np.array(v, t), n)  # noqa: E731
    io = ([vi("x1", TensorProto.FLOAT, [1, 8]), vi("x2", TensorProto.FLOAT, [1, 8])], [vi("y", TensorProto.FLOAT, [1, 8])])
    b = make_model([helper.make_node("Neg", ["x2"], ["n"], name="neg"), helper.make_node("Sub", ["x1", "n"], ["y"], name="sub")], *io)
    a = make_model([helper.make_node("QuantizeLinear", ["x1", "s", "z"], ["x1_q"], name="q1"),
                    helper.make_node("QuantizeLinear", ["x2", "s", "z"], ["x2_q"], name="q2"),
                    helper.make_node("QLinearAdd", ["x1_q", "s", "z", "x2_q", "s", "z", "sy", "z"], ["y_quantized"],
                                     name="the_add", domain="com.microsoft"),
                    helper.make_node("DequantizeLinear", ["y_quantized", "sy", "z"], ["y"], name="y_DequantizeLinear")],
                   *io, [f(0.02, "s"), f(0.04, "sy"), f(128, "z", np.uint8)])
    a.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    pa, pb = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(a, pa)
    onnx.save(b, pb)
    rng = np.random.default_rng(1)
    feeds = {k: rng.normal(size=(1, 8)).astype(np.float32) for k in ("x1", "x2")}
    res = api.diff(pa, pb, selection=api.Selection(all=True), config=CPU, inputs=api.InputSpec(arrays=feeds))
    (u,) = [u for u in res.matching.unmatched_b if u.obs.name == "n"]
    assert u.cause == "folded" and "'the_add'" in u.reason and "y_DequantizeLinear" not in u.reason, u.reason
