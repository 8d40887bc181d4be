"""Tensors whose order along an axis the ONNX spec leaves open: compared as sorted, never element by element.

A TopK with ``sorted=0`` returns its K values and indices in an unspecified order (onnxruntime's CPU kernel
returns them as its selection leaves them, onnx.reference and torch sorted): two runtimes, or two models,
may order them differently and both be right, so comparing them position by position fails a correct pair.
Along that axis such a pair is compared as the multiset it is: both sides sorted first (the values by value,
the indices as a set of positions). What an elementwise op computes from them keeps that freedom (a Cast of
the indices, a Relu of the values, a product of the two, which move together, or with a one-element
constant), and is compared the same way; anything else (a Gather of the first element, a Reshape) is a
function of the order and is compared as it is.
"""

from __future__ import annotations

import numpy as np
import onnx

from onnxprobe.graph.constants import constants
from onnxprobe.types import element_count, forward_name

# one output, the value at each position computed from the inputs' values at that position
ELEMENTWISE = {
    "Identity", "Cast", "CastLike", "Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Exp", "Log", "Sqrt", "Reciprocal",
    "Erf", "Softplus", "Softsign", "Elu", "Selu", "Celu", "LeakyRelu", "ThresholdedRelu", "HardSigmoid", "HardSwish",
    "Gelu", "Mish", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos", "Tan", "Not", "IsNaN", "IsInf", "Clip", "Dropout",
    "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Mod", "Equal", "Less", "LessOrEqual", "Greater",
    "GreaterOrEqual", "And", "Or", "Xor", "Where", "BitShift", "PRelu",
}
SCALAR_INPUTS = {"Clip": {1, 2}, "CastLike": {1}}  # inputs that are scalars (or only a type) by the op's definition


def unordered_axes(model: onnx.ModelProto) -> dict[str, tuple[int, str]]:
    """Main-graph tensor -> (axis, the TopK node whose order it carries) for each tensor whose order along
    that axis is unspecified: a ``sorted=0`` TopK's outputs and what elementwise ops compute from them alone
    (with constants of one element)."""
    g = model.graph
    # one element, of rank 0 or 1: broadcasting one never adds an axis in front of the TopK's
    consts = {k for k, t in constants(g).items() if element_count(t.dims) == 1 and len(t.dims) <= 1}
    out: dict[str, tuple[int, str]] = {}
    for n in g.node:
        if n.op_type == "TopK" and n.domain in ("", "ai.onnx"):
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            if attrs.get("sorted", 1) == 0:
                for o in n.output[:2]:
                    if o:
                        out[o] = (int(attrs.get("axis", -1)), n.name or n.output[0])
        elif n.op_type in ELEMENTWISE and n.domain in ("", "ai.onnx") and n.output and n.output[0]:
            skip = SCALAR_INPUTS.get(n.op_type, set())
            data = [i for k, i in enumerate(n.input) if i and k not in skip and i not in consts]
            origins = {out.get(i) for i in data}
            if data and len(origins) == 1 and None not in origins:  # one permutation, carried along
                out[n.output[0]] = origins.pop()
    return out


def unordered_pairs(a_model: onnx.ModelProto, b_model: onnx.ModelProto, report) -> tuple[dict[int, int], list[str]]:
    """Report position -> the axis along which the pair is compared as sorted (either side's tensor, or the
    forward tensor a gradient stands for, is unordered there), and a note naming the TopK nodes."""
    sides = (unordered_axes(a_model), unordered_axes(b_model) if b_model is not a_model else None)
    found: dict[int, int] = {}
    nodes: dict[str, int] = {}
    for k, p in enumerate(report):
        for obs, axes in ((p.a, sides[0]), (p.b, sides[1] if sides[1] is not None else sides[0])):
            names = [obs.name, obs.key, obs.probe]
            hit = next((axes[n] for n in names + [forward_name(n) for n in names] if n and n in axes), None)
            if hit is not None:
                found[k] = hit[0]
                nodes.setdefault(hit[1], hit[0])
                break
    if not found:
        return found, []
    which = ", ".join(f"{n!r}" for n in list(nodes)[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
    return found, [f"TopK {which} (sorted=0) returns its K values in an unspecified order: {len(found)} pair(s) of its "
                   "outputs and of what elementwise ops compute from them are compared sorted along that axis "
                   "(values by value, indices as sets), not position by position"]


def in_order(value, axis: int):
    """``value`` (numpy, or an onnxruntime OrtValue) sorted along ``axis`` (negative: from the end)."""
    v = value.numpy() if hasattr(value, "element_type") else np.asarray(value)
    if v.ndim == 0:
        return v
    return np.sort(v, axis=axis if axis >= 0 else axis + v.ndim, kind="stable")
