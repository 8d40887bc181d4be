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


# pointwise functions no two of which are one function of the data (Relu is not Sigmoid, whatever the input),
# where two exports may still compute one function with other ops (MatMul and Gemm, Div by 2 and Mul by 0.5,
# Relu and Clip(0, inf), Mul(x, x) and Pow(x, 2), GlobalAveragePool and ReduceMean, Identity and Dropout)
DISTINCT_POINTWISE = {"Relu", "Sigmoid", "Tanh", "Softplus", "Softsign", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish",
                      "Gelu", "Exp", "Log", "Neg", "Abs", "Sqrt", "Reciprocal", "Erf", "Sin", "Cos", "Floor", "Ceil",
                      "Round", "Sign", "Mish", "Softmax", "LogSoftmax"}


def other_functions(a: str, b: str) -> bool:
    """Two ops that compute other functions of the same inputs, whatever their attributes: two different
    ops of ``DISTINCT_POINTWISE``. Any other pair of ops may be one function written two ways."""
    ca, cb = canonical(a), canonical(b)
    return ca != cb and ca in DISTINCT_POINTWISE and cb in DISTINCT_POINTWISE


# ops whose output holds its input's values (moved, reshaped or cast): an observed tensor behind one
# counts as read too (one exporter writes a Reshape or an Identity where another reads the tensor itself)
VALUE_PRESERVING = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast", "Transpose", "Expand"}


def computing(t: str, producer: dict, node_of=lambda site: site):
    """The writer of ``t`` that computes its value: through the QuantizeLinear and DequantizeLinear around a
    quantized value to its float (QDQ) or QLinear* (QOperator) node. ``producer``: tensor -> its writer (a
    NodeProto, or a record ``node_of`` reads the node from), which the result is one of."""
    site = producer[t]
    for _ in range(8):
        n = node_of(site)
        if n.op_type not in ("QuantizeLinear", "DequantizeLinear") or not n.input or n.input[0] not in producer:
            break
        site = producer[n.input[0]]
    return site
