"""A QDQ model quantized with DedicatedQDQPair (onnxruntime's option: one QuantizeLinear/DequantizeLinear
pair per consumer of a tensor) holds several DQ(Q(x)) of one tensor x with the same scale and zero point:
the same values. Each extra one was observed as a tensor of its own, listed as having no counterpart, and
one was paired structurally with another tensor of B (the BatchNormalization output before the Relu the
quantization clamps), a pair of different functions of the data."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api


class _Reader:
    def __init__(self):
        rng = np.random.default_rng(0)
        self.it = iter([{"x": rng.random((1, 3, 8, 8), dtype=np.float32)} for _ in range(4)])

    def get_next(self):
        return next(self.it, None)


def _models(tmp_path):
    """B: x -> Conv -> BatchNormalization -> Relu r; r read by GlobalAveragePool and by Mul(r, pool): two
    consumers, so DedicatedQDQPair gives r two Q/DQ pairs. A: B quantized so."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.normal(size=(4, 3, 3, 3)).astype(np.float32) * 0.3, "W"),
             numpy_helper.from_array(np.ones(4, np.float32) * 1.5, "bn_s"), numpy_helper.from_array(np.full(4, -0.2, np.float32), "bn_b"),
             numpy_helper.from_array(np.zeros(4, np.float32), "bn_m"), numpy_helper.from_array(np.ones(4, np.float32), "bn_v")]
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"], name="bn"),
             helper.make_node("Relu", ["bn"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
             helper.make_node("Mul", ["r", "p"], ["y"], name="mul")]
    b = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], inits, opset=13)
    pb, pa = tmp_path / "b.onnx", tmp_path / "a.onnx"
    onnx.save(b, pb)
    quantize_static(str(pb), str(pa), _Reader(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, extra_options={"DedicatedQDQPair": True})
    a = onnx.load(pa)
    qs = [n for n in a.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "r"]
    assert len(qs) == 2, [(n.op_type, list(n.input)) for n in a.graph.node]  # the case under test
    return pa, pb


def test_dedicated_qdq_pairs_of_one_tensor_are_one_observable(tmp_path):
    pa, pb = _models(tmp_path)
    x = np.random.default_rng(2).random((1, 3, 8, 8), dtype=np.float32)
    res = api.diff(pa, pb, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays={"x": x}))
    pairs = {(r.pair.a.name, r.pair.b.name): r.pair.strategy for r in res.results}
    on_r = [k for k in pairs if k[1] == "r"]
    assert len(on_r) == 1 and pairs[on_r[0]] == "qdq", pairs
    # no DQ(Q(r)) is paired with another tensor of B: bn is Relu's input, the values before the clamp
    assert not [k for k in pairs if k[0].startswith("r_DequantizeLinear") and k[1] != "r"], pairs
    assert not [u for u in res.matching.unmatched_a if u.obs.name.startswith("r_DequantizeLinear")], \
        [(u.obs.name, u.reason) for u in res.matching.unmatched_a]
