"""A weights-only quantized model (int8 weights behind DequantizeLinear, float activations: what a
weight-only QDQ quantizer writes) against its float original is a quantized model against a float one:
``diff`` judged it by the float default (|a-b| <= 1e-4 + 1e-3|b|) and failed every layer of a healthy
model (ResNet-50 with per-channel int8 weights: 55 of 55 pairs failing at 31-45 dB, output 37 dB), and said
it measured "float". QA.

Oracle: numpy float64 (the SQNR of the model's output from the two weight sets, computed here)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api


def _models(tmp_path) -> tuple[str, str, np.ndarray, np.ndarray]:
    """x(1x16) @ W1 -> Relu -> @ W2 -> y, in float (B) and with W1, W2 int8 behind DequantizeLinear (A,
    per-tensor symmetric, 8 bits): the float weights and their dequantized copies."""
    rng = np.random.default_rng(3)
    w = [rng.normal(0, 0.5, (16, 16)).astype(np.float32) for _ in range(2)]
    vi = helper.make_tensor_value_info
    io = ([vi("x", TensorProto.FLOAT, [1, 16])], [vi("y", TensorProto.FLOAT, [1, 16])])

    def nodes(names):
        return [helper.make_node("MatMul", ["x", names[0]], ["h"], name="mm1"), helper.make_node("Relu", ["h"], ["r"], name="relu"),
                helper.make_node("MatMul", ["r", names[1]], ["y"], name="mm2")]

    b = make_model(nodes(["w1", "w2"]), *io, [numpy_helper.from_array(w[0], "w1"), numpy_helper.from_array(w[1], "w2")])
    inits, deq, dq = [], [], []
    for i, wi in enumerate(w, 1):
        s = np.float32(np.abs(wi).max() / 127)
        q = np.clip(np.round(wi / s), -127, 127).astype(np.int8)
        inits += [numpy_helper.from_array(q, f"w{i}_q"), numpy_helper.from_array(np.array(s, np.float32), f"w{i}_s"),
                  numpy_helper.from_array(np.array(0, np.int8), f"w{i}_z")]
        deq.append(helper.make_node("DequantizeLinear", [f"w{i}_q", f"w{i}_s", f"w{i}_z"], [f"w{i}_dq"], name=f"dq{i}"))
        dq.append(q.astype(np.float64) * np.float64(s))
    a = make_model(deq + nodes(["w1_dq", "w2_dq"]), *io, inits)
    pa, pb = tmp_path / "a_wonly.onnx", tmp_path / "b.onnx"
    pa.write_bytes(a.SerializeToString())
    pb.write_bytes(b.SerializeToString())
    return str(pa), str(pb), np.stack(w).astype(np.float64), np.stack(dq)


def test_a_weights_only_quantized_model_is_judged_as_a_quantized_one(tmp_path):
    a, b, w, dq = _models(tmp_path)
    r = api.diff(a, b)
    feed = np.asarray(r.feed["x"], np.float64)
    ya = np.maximum(feed @ dq[0], 0) @ dq[1]
    yb = np.maximum(feed @ w[0], 0) @ w[1]
    sqnr = 10 * np.log10((yb ** 2).sum() / ((ya - yb) ** 2).sum())
    assert 25 < sqnr < 60  # int8 rounding: far from float32 agreement, far above 10 dB
    assert np.abs(ya - yb).max() > 1e-4 + 1e-3 * np.abs(yb).max()  # the float default cannot pass it
    out = next(p for p in r.results if p.pair.a.name == "y")
    assert abs(out.metrics.sqnr_db - sqnr) < 0.01
    assert "quantized model against a float one" in r.criterion
    assert r.verdict()[0] == "pass"
    assert r.measured != "float" and "weight" in r.measured


def _nbits(tmp_path) -> tuple[str, str, np.ndarray, np.ndarray]:
    """x(1x32) @ W(32x16) -> h -> Relu -> y, in float (B) and with h from onnxruntime's MatMulNBits (A: W in
    4 bits, blocks of 16 along K, what its weight-only quantizer writes): W and its dequantized copy."""
    rng = np.random.default_rng(4)
    k, n, block = 32, 16, 16
    w = rng.normal(0, 0.5, (k, n)).astype(np.float32)
    wt = w.T.reshape(n, k // block, block)  # MatMulNBits keeps W transposed, [N, blocks, block]
    scale = (np.abs(wt).max(-1) / 7).astype(np.float32)
    q = np.clip(np.round(wt / scale[..., None]), -8, 7).astype(np.int64) + 8  # zero point 8 (the default)
    packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)  # element 2i in the low nibble
    dq = ((q - 8) * scale[..., None].astype(np.float64)).reshape(n, k).T
    vi = helper.make_tensor_value_info
    io = ([vi("x", TensorProto.FLOAT, [1, k])], [vi("y", TensorProto.FLOAT, [1, n])])
    relu = helper.make_node("Relu", ["h"], ["y"], name="relu")
    b = make_model([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), relu], *io, [numpy_helper.from_array(w, "w")])
    a = make_model([helper.make_node("MatMulNBits", ["x", "w_q", "w_s"], ["h"], name="mm", domain="com.microsoft",
                                     K=k, N=n, bits=4, block_size=block), relu], *io,
                   [numpy_helper.from_array(packed, "w_q"), numpy_helper.from_array(scale.reshape(-1), "w_s")])
    a.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    pa, pb = tmp_path / "a_nbits.onnx", tmp_path / "b.onnx"
    pa.write_bytes(a.SerializeToString())
    pb.write_bytes(b.SerializeToString())
    return str(pa), str(pb), w.astype(np.float64), dq


def test_matmulnbits_pairs_with_the_matmul_it_quantizes_and_is_judged_as_quantized(tmp_path):
    """Its 4-bit weight is packed two to a byte, with a scale per block: counted by those arrays' sizes (256
    and 32 elements), the MatMulNBits output was refused as "another layer" than the MatMul of the 512-element
    W it computes (BERT-tiny from onnxruntime's MatMulNBitsQuantizer: all 12 refused, the rest failing
    the float default)."""
    a, b, w, dq = _nbits(tmp_path)
    r = api.diff(a, b)
    feed = np.asarray(r.feed["x"], np.float64)
    ha, hb = feed @ dq, feed @ w
    want = 10 * np.log10((hb ** 2).sum() / ((ha - hb) ** 2).sum())
    assert 10 < want < 40
    h = next((p for p in r.results if p.pair.a.name == "h"), None)
    assert h is not None, [(u.obs.name, u.reason) for u in r.matching.unmatched_a]
    assert h.pair.b.name == "h" and abs(h.metrics.sqnr_db - want) < 0.05
    assert "quantized model against a float one" in r.criterion
    assert r.verdict()[0] == "pass"
