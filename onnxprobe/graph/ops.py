"""Op-type equivalence: quantized and fused ops stand for the float op they replace.

``canonical("QLinearConv") == "Conv"``. Selections (``--op Conv`` picks QLinearConv outputs too) and
matching (``match.ops.compatible``) read the same table.
"""

from __future__ import annotations

CANONICAL = {
    "QLinearConv": "Conv", "ConvInteger": "Conv", "FusedConv": "Conv", "NhwcConv": "Conv", "QLinearConvTranspose": "ConvTranspose",
    "QLinearMatMul": "MatMul", "MatMulInteger": "MatMul", "FusedMatMul": "MatMul", "MatMulIntegerToFloat": "MatMul",
    "DynamicQuantizeMatMul": "MatMul", "MatMulNBits": "MatMul",
    "QGemm": "Gemm", "FusedGemm": "Gemm",
    "QLinearAdd": "Add", "QLinearMul": "Mul", "QLinearSigmoid": "Sigmoid", "QLinearLeakyRelu": "LeakyRelu",
    "QLinearGlobalAveragePool": "GlobalAveragePool", "QLinearAveragePool": "AveragePool", "QLinearConcat": "Concat",
    "QLinearSoftmax": "Softmax", "QLinearReduceMean": "ReduceMean", "QLinearWhere": "Where", "QAttention": "Attention",
    "QuickGelu": "Gelu", "BiasGelu": "Gelu", "FastGelu": "Gelu", "SkipLayerNormalization": "LayerNormalization",
    "SimplifiedLayerNormalization": "LayerNormalization",
}


def canonical(op: str) -> str:
    return CANONICAL.get(op, op)


# the names tables show (``report.format.op``; the JSON keeps the real ones), which --op takes too
OP_ABBREVIATIONS = {
    "BatchNormalization": "BatchNorm", "LayerNormalization": "LayerNorm", "InstanceNormalization": "InstanceNorm",
    "GroupNormalization": "GroupNorm", "GlobalAveragePool": "GlobalAvgPool", "GlobalMaxPool": "GlobalMaxPool",
    "DequantizeLinear": "Dequantize", "QuantizeLinear": "Quantize", "DynamicQuantizeLinear": "DynQuantize",
    "ConvTranspose": "ConvTransp", "ReduceSumSquare": "ReduceSumSq", "SkipLayerNormalization": "SkipLayerNorm",
    "MultiHeadAttention": "MHA", "GroupQueryAttention": "GQA", "ConstantOfShape": "ConstOfShape",
}
