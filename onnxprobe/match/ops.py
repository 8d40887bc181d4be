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


# one function in two spellings that the op's name alone does not tell: GlobalAveragePool (GlobalMaxPool) of a
# rank-N tensor is ReduceMean (ReduceMax) over every axis from 2 to N-1, keeping them, and AveragePool (MaxPool)
# with one window over all of them. torch.onnx's legacy exporter writes nn.AdaptiveAvgPool2d(1) as the first,
# nn.AdaptiveMaxPool2d(1) as a MaxPool of the input's size, its dynamo exporter both as reduces: each read
# tensors already paired and stayed unpaired (mobilenet_v3's squeeze-excitation pools). A reduce over other axes
# (the channels), one that drops them (keepdims=0: another shape), or a pool of smaller or padded windows is
# another function and keeps its own op
GLOBAL_POOLS = {"ReduceMean": "GlobalAveragePool", "ReduceMax": "GlobalMaxPool", "AveragePool": "GlobalAveragePool",
                "MaxPool": "GlobalMaxPool"}


def global_pool(node, shape: tuple | None, constant) -> str:
    """The global pool ``node`` computes as a reduce or a pool of one window ("" where it computes none). ``shape``:
    its input's (None: not known, no pool); ``constant(name)``: a constant input's values as ints (None where it
    is not one)."""
    if node.op_type not in GLOBAL_POOLS or shape is None or len(shape) < 3:
        return ""
    attrs = {a.name: a for a in node.attribute}
    if node.op_type in ("AveragePool", "MaxPool"):
        return GLOBAL_POOLS[node.op_type] if _one_window(attrs, shape) else ""
    return GLOBAL_POOLS[node.op_type] if _spatial_reduce(node, attrs, len(shape), constant) else ""


def _spatial_reduce(node, attrs: dict, rank: int, constant) -> bool:
    """A ReduceMean or ReduceMax over axes exactly 2 .. ``rank`` - 1 (negative ones counted from the end),
    keepdims 1 (the default). The axes are an attribute before opset 18 and a second input from it (then
    ``noop_with_empty_axes`` says nothing: they are given); a reduce with none reduces every axis."""
    if "keepdims" in attrs and attrs["keepdims"].i != 1:
        return False
    axes = (list(attrs["axes"].ints) if "axes" in attrs
            else constant(node.input[1]) if len(node.input) > 1 and node.input[1] else None)
    if not axes:
        return False
    return sorted(a + rank if -rank <= a < 0 else a for a in axes) == list(range(2, rank))  # out of range: no pool


def _one_window(attrs: dict, shape: tuple) -> bool:
    """An AveragePool or MaxPool whose one window is the whole of its input's spatial dims (static): kernel_shape
    those dims, no padding, dilations 1 (strides then say nothing: the output is 1 x ... x 1)."""
    spatial = list(shape[2:])
    if not all(isinstance(d, int) and d > 0 for d in spatial) or "kernel_shape" not in attrs:
        return False
    pad = attrs["auto_pad"].s.decode() if "auto_pad" in attrs else "NOTSET"
    return (list(attrs["kernel_shape"].ints) == spatial and pad in ("NOTSET", "VALID")
            and not any(attrs["pads"].ints if "pads" in attrs else ())
            and all(d == 1 for d in (attrs["dilations"].ints if "dilations" in attrs else ())))


FUSED = {"FusedConv", "FusedGemm"}  # onnxruntime's: with an 'activation', the output is that activation's


def fused_activation(o) -> str | None:
    """The activation onnxruntime's FusedConv / FusedGemm of observable ``o`` takes in (its 'activation' setting,
    ``Observable.settings``), or None: the node's output is that activation's."""
    return dict(getattr(o, "settings", ())).get("activation") if o.op_type in FUSED else None


def function_op(o) -> str:
    """The op an observable ``o``'s value is the output of, as matching tells two functions apart: the global
    pool its reduce computes (``Observable.global_pool``), the activation onnxruntime's FusedConv / FusedGemm takes
    in (its 'activation' setting: Relu(Gemm) is a Relu's output), else its float op (``effective_op``, canonical)."""
    act = fused_activation(o)
    return o.global_pool or (canonical(act) if act else canonical(o.effective_op))


def one_function(a, b) -> str:
    """What a pair's reason adds where the two write one function with other ops (a GlobalAveragePool against
    its ReduceMean): the ops each model writes; "" where they write one op, or other functions."""
    if canonical(a.effective_op) == canonical(b.effective_op) or function_op(a) != function_op(b):
        return ""
    return f"; {a.effective_op} in A and {b.effective_op} in B are one function ({function_op(a)})"


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
