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
