"""A float model A against its quantized model B (``diff fp32.onnx int8.onnx``) pairs A's float X with B's
DequantizeLinear(QuantizeLinear(X)), as the other order does: the pair said strategy "name" and "same
tensor name" for 'h' <-> 'h_DequantizeLinear_Output', two different names and a quantized value; the
order of the models is no reason to describe one pairing two ways. QA.

Oracle: the pairing the other order gives (strategy "qdq"), and numpy float64 for the SQNR of the pair."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api


def _models(tmp_path) -> tuple[str, str]:
    """x(1x8) @ w -> h -> Sigmoid -> y, in float and with h quantized to uint8 (Q -> DQ) before the Sigmoid."""
    vi = helper.make_tensor_value_info
    w = numpy_helper.from_array(np.random.default_rng(1).normal(0, 0.5, (8, 8)).astype(np.float32), "w")
    io = ([vi("x", TensorProto.FLOAT, [1, 8])], [vi("y", TensorProto.FLOAT, [1, 8])])
    f = make_model([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Sigmoid", ["h"], ["y"], name="sig")],
                   *io, [w])
    q = make_model([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                    helper.make_node("QuantizeLinear", ["h", "s", "z"], ["h_QuantizeLinear_Output"], name="hq"),
                    helper.make_node("DequantizeLinear", ["h_QuantizeLinear_Output", "s", "z"], ["h_DequantizeLinear_Output"], name="hdq"),
                    helper.make_node("Sigmoid", ["h_DequantizeLinear_Output"], ["y"], name="sig")], *io,
                   [w, numpy_helper.from_array(np.array(0.03, np.float32), "s"), numpy_helper.from_array(np.array(128, np.uint8), "z")])
    pf, pq = tmp_path / "f.onnx", tmp_path / "q.onnx"
    pf.write_bytes(f.SerializeToString())
    pq.write_bytes(q.SerializeToString())
    return str(pf), str(pq)


def _h(r):
    return next(p for p in r.results if "h" in (p.pair.a.key, p.pair.b.key) and not p.pair.a.is_output)


def test_a_float_model_against_its_quantized_one_pairs_by_qdq_as_the_other_order_does(tmp_path):
    f, q = _models(tmp_path)
    fwd, rev = _h(api.diff(q, f)), _h(api.diff(f, q))
    assert (fwd.pair.a.name, fwd.pair.b.name, fwd.pair.strategy) == ("h_DequantizeLinear_Output", "h", "qdq")
    assert (rev.pair.a.name, rev.pair.b.name) == ("h", "h_DequantizeLinear_Output")
    assert rev.pair.strategy == "qdq"
    assert "same tensor name" not in rev.pair.reason and "DequantizeLinear(QuantizeLinear(h))" in rev.pair.reason
    assert "in B" in rev.pair.reason  # which model holds the quantized value
    # the numbers are those of the pair: B's quantized h against A's float h
    x = np.random.default_rng(0).random((1, 8))
    w = np.random.default_rng(1).normal(0, 0.5, (8, 8)).astype(np.float32).astype(np.float64)
    h = x.astype(np.float32).astype(np.float64) @ w
    hq = (np.clip(np.round(h.astype(np.float32) / np.float32(0.03)) + 128, 0, 255) - 128) * 0.03
    want = 10 * np.log10((hq ** 2).sum() / ((h - hq) ** 2).sum())
    assert abs(rev.metrics.sqnr_db - want) < 0.05
