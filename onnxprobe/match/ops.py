"""Op-type equivalence for matching: quantized and fused ops map to the float op they replace.

``canonical("QLinearConv") == "Conv"``; ``compatible(a, b)`` also accepts a layer against the op that was
folded into it (Conv against BatchNormalization or Relu: quantizers and optimisers fold the tail into the
layer and give the layer's output the tail's name).
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
LAYERS = {"Conv", "ConvTranspose", "MatMul", "Gemm", "Attention"}
# ops that quantizers and optimisers fold into the preceding layer, keeping their output name
FOLDABLE_TAILS = {"BatchNormalization", "Relu", "Clip", "LeakyRelu", "Add", "Sigmoid", "HardSigmoid", "Tanh", "Mul", "Div", "Sub"}


def canonical(op: str) -> str:
    return CANONICAL.get(op, op)


def compatible(a: str, b: str) -> bool:
    ca, cb = canonical(a), canonical(b)
    if ca == cb:
        return True
    return (ca in LAYERS and cb in FOLDABLE_TAILS) or (cb in LAYERS and ca in FOLDABLE_TAILS)
