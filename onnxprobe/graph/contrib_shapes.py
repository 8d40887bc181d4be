"""Standard stand-ins for com.microsoft's quantized ops, so that onnx's shape inference sees through them.

onnx's inference knows nothing of com.microsoft's ops: ``graph.contrib_types`` gives their outputs a type,
not a shape, so every tensor after the first QLinearConcat, QLinearAdd or QLinearGlobalAveragePool
(onnxruntime's QOperator quantizer writes them between standard QLinearConvs) had no shape before a run.
Matching aligns tensors by op and shape: a QOperator model against a QDQ model of the same float model left
22 of squeezenet's 26 Convs unpaired. ``stand_ins`` rewrites, in the weightless skeleton that inference runs
on (never the user's model), each such node into the standard op whose output has the same shape and
element type (onnxruntime's schemas bind the data inputs and the output of each of these ops to one type
T): QLinearAdd / QLinearMul -> Add of the two data inputs (broadcast), QLinearConcat -> Concat of its data
inputs, QLinearGlobalAveragePool / QLinearAveragePool -> the float pool (channels-first only: the
channels-last form is left as it is), QLinearWhere -> Where, the unary QLinearSigmoid / LeakyRelu /
Softmax -> Identity, and com.microsoft's QuantizeLinear / DequantizeLinear -> a Cast to the type
``contrib_types`` found. One node for one node, names kept: the value_info inferred on the skeleton is
copied back node by node.

Kept here rather than taken from onnxruntime's ``tools.symbolic_shape_infer``: that tool knows QLinearAdd /
QLinearMul and com.microsoft's QuantizeLinear alone among these, and infers the whole model in Python
(seconds on PP-OCRv4), where this adds one pass over the nodes to onnx's own inference.
"""

from __future__ import annotations

import onnx
from onnx import helper

from onnxprobe.graph.contrib_types import MS_DOMAIN

# op -> the positions of its data inputs in the stand-in's order (QLinearConcat's: 2, 5, 8... below)
_DATA = {"QLinearAdd": ("Add", (0, 3)), "QLinearMul": ("Add", (0, 3)), "QLinearWhere": ("Where", (0, 1, 4)),
         "QLinearSigmoid": ("Identity", (0,)), "QLinearLeakyRelu": ("Identity", (0,)),
         "QLinearSoftmax": ("Identity", (0,)), "QLinearGlobalAveragePool": ("GlobalAveragePool", (0,)),
         "QLinearAveragePool": ("AveragePool", (0,))}
_POOL_ATTRS = ("auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides")


def stand_ins(graph: onnx.GraphProto, typed: list[onnx.ValueInfoProto]) -> int:
    """Rewrite ``graph``'s com.microsoft quantized nodes in place into their standard stand-ins (above);
    ``typed``: the type-only value_info ``contrib_types.typed_outputs`` gave their outputs (the Casts'
    types). Only a copy made for inference may be given. Returns how many nodes it rewrote."""
    elem = {v.name: v.type.tensor_type.elem_type for v in typed}
    n_done = 0
    for i, n in enumerate(graph.node):
        if n.domain != MS_DOMAIN or not n.output or not n.output[0]:
            continue
        new = _stand_in(n, elem)
        if new is not None:
            new.name = n.name
            graph.node[i].CopyFrom(new)
            n_done += 1
    return n_done


def _stand_in(n: onnx.NodeProto, elem: dict[str, int]) -> onnx.NodeProto | None:
    attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
    out = [n.output[0]]
    if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
        t = elem.get(n.output[0])
        return helper.make_node("Cast", [n.input[0]], out, to=t) if t and n.input and n.input[0] else None
    if n.op_type == "QLinearConcat":  # Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) for each input
        data = list(n.input[2::3])
        return helper.make_node("Concat", data, out, axis=attrs.get("axis", 0)) if data and all(data) else None
    if n.op_type == "QGemm":  # A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp: T of A's and y_zp's type
        # without y_scale the output is float, no type of A's: left as it is
        if len(n.input) < 9 or not n.input[7] or not all(n.input[k] for k in (0, 3)):
            return None
        keep = {k: v for k, v in attrs.items() if k in ("transA", "transB")}
        return helper.make_node("Gemm", [n.input[0], n.input[3]], out, **keep)
    if n.op_type not in _DATA or attrs.get("channels_last", 0):
        return None
    op, slots = _DATA[n.op_type]
    if len(n.input) <= max(slots) or not all(n.input[k] for k in slots):
        return None
    keep = {k: v for k, v in attrs.items() if k in _POOL_ATTRS} if op == "AveragePool" else {}
    return helper.make_node(op, [n.input[k] for k in slots], out, **keep)
