"""Codes that no QLinear* node writes, but that QLinear* nodes read (onnxruntime's QOperator quantizer gathers
a quantized embedding table: Gather(wemb_quantized, ids) -> e_quantized, read by a QLinearAdd with the table's
scale and zero point in its input slots), were listed ``no-scale`` ("nothing dequantizes them"), which is false,
and B's Gathers were said "computed inside A's Add, one node there" though A computes them as nodes of their
own (BERT quantized: its three embedding Gathers). Their scale and zero point are now read from the consumer's
input slots, so they are compared. QA.

Oracle: onnxruntime's codes of A dequantized by hand with the table's scale and zero point (numpy float64),
against numpy's gather of B's float table."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.match.observe import observe

vi = helper.make_tensor_value_info


class _Reader:
    def __init__(self, feeds):
        self.it = iter(feeds)

    def get_next(self):
        return next(self.it, None)


def _models(tmp_path):
    """B: e = Gather(wemb, ids), p = Gather(pemb, pos), s = e + p, y = s @ w2. A: B quantized (QOperator)."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    rng = np.random.default_rng(0)
    tables = {k: rng.normal(size=(10, 16)).astype(np.float32) for k in ("wemb", "pemb")}
    inits = [numpy_helper.from_array(v, k) for k, v in tables.items()]
    inits.append(numpy_helper.from_array(rng.normal(size=(16, 8)).astype(np.float32), "w2"))
    nodes = [helper.make_node("Gather", ["wemb", "ids"], ["e"], name="ge"),
             helper.make_node("Gather", ["pemb", "pos"], ["p"], name="gp"),
             helper.make_node("Add", ["e", "p"], ["s"], name="add"),
             helper.make_node("MatMul", ["s", "w2"], ["y"], name="mm")]
    b = make_model(nodes, [vi("ids", TensorProto.INT64, [1, 6]), vi("pos", TensorProto.INT64, [1, 6])],
                   [vi("y", TensorProto.FLOAT, [1, 6, 8])], inits, opset=13)
    pb, pa = tmp_path / "b.onnx", tmp_path / "a.onnx"
    onnx.save(b, pb)
    feeds = [{"ids": rng.integers(0, 10, (1, 6)), "pos": np.arange(6)[None]} for _ in range(4)]
    quantize_static(str(pb), str(pa), _Reader(feeds), quant_format=QuantFormat.QOperator,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    a = onnx.load(pa)
    (add,) = [n for n in a.graph.node if n.op_type == "QLinearAdd"]
    assert add.input[0] == "e_quantized" and not any("DequantizeLinear" == n.op_type and n.input[0] == "e_quantized"
                                                     for n in a.graph.node)  # the case: only the QLinearAdd reads it
    return pa, pb, tables


def test_codes_a_qlinear_add_reads_are_compared_with_its_input_scale(tmp_path):
    pa, pb, tables = _models(tmp_path)
    feeds = {"ids": np.array([[3, 1, 4, 1, 5, 9]], np.int64), "pos": np.arange(6, dtype=np.int64)[None]}
    res = api.diff(pa, pb, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays=feeds))
    assert not [u.obs.name for u in res.matching.unmatched_a + res.matching.unmatched_b], \
        [(u.obs.name, u.reason) for u in res.matching.unmatched_a + res.matching.unmatched_b]
    by_b = {r.pair.b.name: r for r in res.results}
    a = onnx.load(pa)
    inits = {t.name: numpy_helper.to_array(t) for t in a.graph.initializer}
    import onnxruntime as ort

    for name, table, idx in (("e", "wemb", "ids"), ("p", "pemb", "pos")):
        r = by_b[name]
        assert r.pair.a.name == f"{name}_quantized", r.pair.a.name
        m = onnx.load(pa)
        m.graph.output.append(helper.make_empty_tensor_value_info(f"{name}_quantized"))
        codes = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run([f"{name}_quantized"], feeds)[0]
        got = (codes.astype(np.float64) - inits[f"{table}_zero_point"].astype(np.float64)) * inits[f"{table}_scale"].astype(np.float64)
        want = tables[table].astype(np.float64)[feeds[idx]]
        sqnr = 10 * np.log10((want ** 2).sum() / ((got - want) ** 2).sum())
        assert abs(r.metrics.sqnr_db - sqnr) < 0.05, (name, r.metrics.sqnr_db, sqnr)
        assert abs(r.metrics.max_abs - np.abs(got - want).max()) < 1e-5


def _hand_built(second_scale: float):
    """Gather(codes, idx) -> g read by a QLinearAdd (slot 0, scale s1) and a QLinearMul (slot 3, scale s2)."""
    inits = [numpy_helper.from_array(np.arange(12, dtype=np.uint8).reshape(3, 4), "codes"),
             numpy_helper.from_array(np.array(0.5, np.float32), "s1"), numpy_helper.from_array(np.array(second_scale, np.float32), "s2"),
             numpy_helper.from_array(np.array(3, np.uint8), "z"), numpy_helper.from_array(np.array(0.1, np.float32), "ys"),
             numpy_helper.from_array(np.array(128, np.uint8), "yz")]
    nodes = [helper.make_node("Gather", ["codes", "idx"], ["g"], name="ga"),
             helper.make_node("QLinearAdd", ["g", "s1", "z", "xq", "ys", "yz", "ys", "yz"], ["u"], name="qa", domain="com.microsoft"),
             helper.make_node("QLinearMul", ["xq", "ys", "yz", "g", "s2", "z", "ys", "yz"], ["v"], name="qm", domain="com.microsoft")]
    m = make_model(nodes, [vi("idx", TensorProto.INT64, [2]), vi("xq", TensorProto.UINT8, [2, 4])],
                   [vi("u", TensorProto.UINT8, [2, 4]), vi("v", TensorProto.UINT8, [2, 4])], inits)
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return m


def test_consumers_that_agree_give_the_scale_and_ones_that_differ_give_none():
    obs = observe(_hand_built(0.5))  # s2 == s1 by value: one scale
    (g,) = [o for o in obs.observables if o.name == "g"]
    assert g.kind == "qoperator" and not obs.unscaled
    (d,) = [d for d in obs.dequantize if d.quantized == "g"]
    assert (d.scale, d.zero_point) == ("s1", "z")
    obs = observe(_hand_built(0.25))  # two scales: which one the codes stand for is not known
    assert [o.name for o in obs.unscaled] == ["g"] and not [o for o in obs.observables if o.name == "g"]
