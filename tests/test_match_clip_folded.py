"""A quantizer drops a Clip(x, 0, max) (Relu6, a HardSwish's clip) as it drops a Relu when the clipped
tensor's quantization range holds it: A's quantized x then holds Clip(x), not x. onnxruntime's QOperator
quantizer keeps x's name on the QLinearAdd's output (``a_quantized``), so the diff paired it by name with
B's x, the values before the clip: a pair of different functions of the data (on PP-OCRv4 rec, 6.5 dB where
A's values against B's Clip output measure 23 dB), a false failure marked as where the error starts."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api


class _Reader:
    def __init__(self, feeds):
        self.it = iter(feeds)

    def get_next(self):
        return next(self.it, None)


def _feeds(seed, n):
    rng = np.random.default_rng(seed)
    return [{"x": rng.normal(size=(1, 64)).astype(np.float32) * 4} for _ in range(n)]


def _models(tmp_path, fmt):
    """B: x -> Add(x, w) a -> Clip(a, 0, 6) c -> Mul(x, c) y (a HardSwish without its /6). A: B quantized."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    inits = [numpy_helper.from_array(np.full(64, 3, np.float32), "w"),
             numpy_helper.from_array(np.array(0, np.float32), "lo"), numpy_helper.from_array(np.array(6, np.float32), "hi")]
    nodes = [helper.make_node("Add", ["x", "w"], ["a"], name="add"),
             helper.make_node("Clip", ["a", "lo", "hi"], ["c"], name="clip"),
             helper.make_node("Mul", ["x", "c"], ["y"], name="mul")]
    b = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], inits, opset=13)
    pb, pa = tmp_path / "b.onnx", tmp_path / f"a_{fmt}.onnx"
    onnx.save(b, pb)
    quantize_static(str(pb), str(pa), _Reader(_feeds(0, 4)), activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    quant_format=QuantFormat.QOperator if fmt == "qop" else QuantFormat.QDQ)
    assert not any(n.op_type == "Clip" for n in onnx.load(pa).graph.node)  # the case under test: the Clip is dropped
    return pa, pb


def _check(tmp_path, fmt):
    pa, pb = _models(tmp_path, fmt)
    x = _feeds(5, 1)[0]["x"]
    res = api.diff(pa, pb, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays={"x": x}))
    by_b = {r.pair.b.name: r for r in res.results}
    assert "a" not in by_b, (by_b["a"].pair.a.name, by_b["a"].pair.reason)  # never the values before the clip
    r = by_b["c"]
    # the oracle: B's Clip output in float64 against A's quantized add output, dequantized by hand
    a = onnx.load(pa)
    inits = {t.name: numpy_helper.to_array(t) for t in a.graph.initializer}
    add = next(n for n in a.graph.node if n.op_type in ("QLinearAdd", "Add"))
    if fmt == "qop":
        scale, zp = inits[add.input[6]], inits[add.input[7]]
    else:
        q = next(n for n in a.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == add.output[0])
        scale, zp = inits[q.input[1]], inits[q.input[2]]
    codes_name = add.output[0] if fmt == "qop" else q.output[0]
    a.graph.output.append(helper.make_empty_tensor_value_info(codes_name))  # A's integer codes, as onnxruntime gives them
    import onnxruntime as ort
    codes = ort.InferenceSession(a.SerializeToString(), providers=["CPUExecutionProvider"]).run([codes_name], {"x": x})[0]
    got = (codes.astype(np.float64) - zp) * scale
    xa = x.astype(np.float64)
    want = np.clip(xa + 3, 0, 6)
    sqnr = 10 * np.log10((want ** 2).sum() / ((got - want) ** 2).sum())
    assert abs(r.metrics.sqnr_db - sqnr) < 0.05, (r.metrics.sqnr_db, sqnr, r.pair.a.name)
    assert r.metrics.sqnr_db > 30 and r.passed, r.metrics.sqnr_db
    assert res.verdict()[0] == "pass"


def test_qoperator_add_whose_clip_the_quantizer_dropped_pairs_with_the_clip_output(tmp_path):
    _check(tmp_path, "qop")


def test_qdq_add_whose_clip_the_quantizer_dropped_pairs_with_the_clip_output(tmp_path):
    _check(tmp_path, "qdq")


def test_range_from_zero_whose_clip_the_quantized_model_keeps_pairs_by_name(tmp_path):
    """A Sigmoid's quantized range starts at 0 by itself; where A keeps the Clip after it, A's QLinearSigmoid
    output is B's s (no Clip was folded into its range) and A's Clip output is B's."""
    f = lambda v, n, t=np.float32: numpy_helper.from_array(np.array(v, t), n)  # noqa: E731
    io = ([helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])])
    b = make_model([helper.make_node("Sigmoid", ["x"], ["s"], name="sig"), helper.make_node("Clip", ["s", "lo", "hi"], ["c"], name="clip"),
                    helper.make_node("Mul", ["x", "c"], ["y"], name="mul")], *io, [f(0, "lo"), f(6, "hi")], opset=13)
    a = make_model([helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["x_quantized"], name="x_QuantizeLinear"),
                    helper.make_node("QLinearSigmoid", ["x_quantized", "sx", "zx", "ss", "zs"], ["s_quantized"], name="sig_quant", domain="com.microsoft"),
                    helper.make_node("DequantizeLinear", ["s_quantized", "ss", "zs"], ["s"], name="s_DequantizeLinear"),
                    helper.make_node("Clip", ["s", "lo", "hi"], ["c"], name="clip"),
                    helper.make_node("Mul", ["x", "c"], ["y"], name="mul")], *io,
                   [f(0, "lo"), f(6, "hi"), f(0.05, "sx"), f(128, "zx", np.uint8), f(1 / 255, "ss"), f(0, "zs", np.uint8)], opset=13)
    a.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    pa, pb = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(a, pa)
    onnx.save(b, pb)
    res = api.diff(pa, pb, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays=_feeds(5, 1)[0]))
    pairs = {r.pair.b.name: r.pair.a.name for r in res.results}
    assert pairs.get("s") == "s" and pairs.get("c") == "c", [(r.pair.a.name, r.pair.b.name, r.pair.reason) for r in res.results]
