"""The element types of com.microsoft's quantized ops' outputs, which onnx's shape inference does not know.

onnx infers nothing for an op outside its own domains, and so nothing downstream of it either: after one
QLinearMul (onnxruntime's QOperator quantization writes them between standard QLinearConvs), every
tensor's dtype was unknown ("?" in the tables). Each of these ops writes the type of its output zero
point, an initializer whose type is known before inference (onnxruntime's contrib op schemas:
QLinearAdd/QLinearMul take it as input 7, the unary ones as input 4, QLinearConcat as input 1). The same
holds for com.microsoft's QuantizeLinear (its zero point, input 2; uint8 without one) and DequantizeLinear
(its scale, input 1), which onnxruntime's quantizer writes for 16-bit and 4-bit types (UseQDQContribOps).
``typed_outputs`` gives a value_info (type only) for each such output, for inference to start from.
"""

from __future__ import annotations

import onnx

MS_DOMAIN = "com.microsoft"
# op -> the input whose type the output has (the output's zero point)
ZERO_POINT_INPUT = {
    "QLinearAdd": 7, "QLinearMul": 7, "QLinearSigmoid": 4, "QLinearLeakyRelu": 4, "QLinearSoftmax": 4,
    "QLinearGlobalAveragePool": 4, "QLinearAveragePool": 4, "QLinearConcat": 1, "QLinearWhere": 8, "QGemm": 8,
    "QuantizeLinear": 2, "DequantizeLinear": 1,
}
DEFAULT_TYPE = {"QuantizeLinear": onnx.TensorProto.UINT8}  # the output's type where that input is left out


def typed_outputs(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """Type-only value_info for the outputs of ``graph``'s com.microsoft quantized ops whose output zero
    point is an initializer or a Constant of this graph (others are left unknown)."""
    known = {t.name: t.data_type for t in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant" and n.output:
            for a in n.attribute:
                if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                    known[n.output[0]] = a.t.data_type
    have = {v.name for v in (*graph.value_info, *graph.output)}
    out = []
    for n in graph.node:
        k = ZERO_POINT_INPUT.get(n.op_type) if n.domain == MS_DOMAIN else None
        if k is None or not n.output or not n.output[0] or n.output[0] in have:
            continue
        elem = known.get(n.input[k]) if len(n.input) > k and n.input[k] else DEFAULT_TYPE.get(n.op_type)
        if elem:
            out.append(onnx.helper.make_tensor_value_info(n.output[0], elem, None))
    return out
