"""Op-type equivalence for matching: quantized and fused ops map to the float op they replace.

``canonical("QLinearConv") == "Conv"``; ``compatible(a, b)`` also accepts a layer against the op that was
folded into it (Conv against BatchNormalization or Relu: quantizers and optimisers fold the tail into the
layer and give the layer's output the tail's name).
"""

from __future__ import annotations

from onnxprobe.graph.ops import canonical

LAYERS = {"Conv", "ConvTranspose", "MatMul", "Gemm", "Attention"}
# ops that quantizers and optimisers fold into the preceding layer, keeping their output name
FOLDABLE_TAILS = {"BatchNormalization", "Relu", "Clip", "LeakyRelu", "Add", "Sigmoid", "HardSigmoid", "Tanh", "Mul", "Div", "Sub"}


def compatible(a: str, b: str) -> bool:
    ca, cb = canonical(a), canonical(b)
    if ca == cb:
        return True
    return (ca in LAYERS and cb in FOLDABLE_TAILS) or (cb in LAYERS and ca in FOLDABLE_TAILS)
