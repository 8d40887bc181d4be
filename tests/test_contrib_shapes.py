"""The shapes of com.microsoft's quantized ops' outputs, and of everything after them (graph.contrib_shapes):
onnx's inference knows none of these ops, so a QOperator model's tensors after its first QLinearConcat /
QLinearAdd / QLinearGlobalAveragePool had no shape before a run, and a QOperator model against a QDQ model of
the same float model left most Convs unpaired (matching aligns by op and shape). Oracle: the shapes
onnxruntime's run gives each tensor; the pairs: each QLinearConv's node name is the QDQ Conv's plus '_quant'."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.graph.model import Model
from onnxprobe.graph.shapes import static_shape, value_types
from quantize_fixtures import RandomReader


def _float_model() -> onnx.ModelProto:
    """Two Conv+Relu branches concatenated, a Conv, a residual Add, a Sigmoid, an average pool and a global
    pool, a Gemm head: each of these becomes a com.microsoft QLinear* op in onnxruntime's QOperator format."""
    rng = np.random.default_rng(0)
    w = lambda name, *s: numpy_helper.from_array(rng.normal(scale=0.3, size=s).astype(np.float32), name)  # noqa: E731
    inits = [w("w1", 4, 3, 3, 3), w("b1", 4), w("w2", 4, 3, 1, 1), w("b2", 4), w("w3", 8, 8, 3, 3), w("b3", 8),
             w("w4", 8, 8, 1, 1), w("b4", 8), w("wg", 8, 5), w("bg", 5)]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]), n("Relu", ["c1"], ["r1"], name="relu1"),
             n("Conv", ["x", "w2", "b2"], ["c2"], name="conv2"), n("Relu", ["c2"], ["r2"], name="relu2"),
             n("Concat", ["r1", "r2"], ["cat"], name="cat", axis=1),
             n("Conv", ["cat", "w3", "b3"], ["c3"], name="conv3", pads=[1, 1, 1, 1]), n("Relu", ["c3"], ["r3"], name="relu3"),
             n("Conv", ["r3", "w4", "b4"], ["c4"], name="conv4"), n("Add", ["c4", "r3"], ["res"], name="add"),
             n("Sigmoid", ["res"], ["sig"], name="sig"),
             n("AveragePool", ["sig"], ["ap"], name="avgpool", kernel_shape=[2, 2], strides=[2, 2]),
             n("Conv", ["ap", "w4", "b4"], ["c5"], name="conv5"), n("Relu", ["c5"], ["r5"], name="relu5"),
             n("GlobalAveragePool", ["r5"], ["gap"], name="gap"), n("Flatten", ["gap"], ["flat"], name="flat"),
             n("Gemm", ["flat", "wg", "bg"], ["y"], name="head")]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits, opset=13)


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    d = tmp_path_factory.mktemp("contrib_shapes")
    onnx.save(_float_model(), d / "f.onnx")
    out = {}
    for kind, fmt in (("qop", QuantFormat.QOperator), ("qdq", QuantFormat.QDQ)):
        out[kind] = d / f"{kind}.onnx"
        quantize_static(str(d / "f.onnx"), str(out[kind]), RandomReader(d / "f.onnx"), quant_format=fmt,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return out


def _run_shapes(path) -> dict[str, tuple]:
    """Every node output's shape as onnxruntime's run gives it (each made a graph output)."""
    m = onnx.load(str(path))
    have = {v.name for v in m.graph.output}
    m.graph.output.extend(onnx.ValueInfoProto(name=t) for nd in m.graph.node for t in nd.output if t and t not in have)
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).random((1, 3, 12, 12), dtype=np.float32)
    return {o.name: v.shape for o, v in zip(s.get_outputs(), s.run(None, {"x": x}))}


def test_qoperator_model_has_every_shape_before_a_run(quantized):
    m = onnx.load(str(quantized["qop"]))
    ops = {nd.op_type for nd in m.graph.node if nd.domain == "com.microsoft"}
    assert {"QLinearConcat", "QLinearAdd", "QLinearSigmoid", "QLinearAveragePool", "QLinearGlobalAveragePool"} <= ops, ops
    oracle = _run_shapes(quantized["qop"])
    types = value_types(Model.of(m, "qop").proto)
    got = {name: static_shape(types.get(name)) for name in oracle}
    assert got == oracle
    assert onnx.load(str(quantized["qop"])) == m  # the model read is left as it was


def test_qoperator_against_qdq_pairs_every_conv(quantized):
    res = api.diff(quantized["qop"], quantized["qdq"], config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays={"x": np.random.default_rng(2).random((1, 3, 12, 12), dtype=np.float32)}))
    convs = {p.a.writer: p.b.writer for p in res.matching.pairs if p.a.effective_op == "Conv"}
    assert convs == {f"conv{k}_quant": f"conv{k}" for k in (1, 2, 3, 4, 5)}, convs
    assert not [u for u in res.matching.unmatched_a if u.obs.effective_op == "Conv"]
