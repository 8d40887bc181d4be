"""Tensors whose order along an axis the ONNX spec leaves open: compared as sorted, never element by element.

A TopK with ``sorted=0`` returns its K values and indices in an unspecified order (onnxruntime's CPU kernel
returns them as its selection leaves them, onnx.reference and torch sorted): two runtimes, or two models,
may order them differently and both be right, so comparing them position by position fails a correct pair.
Along that axis such a pair is compared as the multiset it is: both sides sorted first (the values by value,
the indices as a set of positions). What an elementwise op computes from them keeps that freedom (a Cast of
the indices, a Relu of the values, a product of the two, which move together, or with a one-element
constant), and so does what an If, Loop or Scan returns of them (a TopK in a body): these are compared the
same way; anything else (a Gather of the first element, a Reshape) is a function of the order and is
compared as it is.
"""

from __future__ import annotations

import numpy as np
import onnx

from onnxprobe.graph.constants import constants
from onnxprobe.graph.select import shared_names
from onnxprobe.graph.walk import subgraphs, walk
from onnxprobe.text import some
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
    """Tensor (by ``TensorRef.key``: its name, or 'if1/then_branch/o' where sibling bodies share it) ->
    (axis, the TopK node whose order it carries) for each tensor whose order along that axis is unspecified:
    a ``sorted=0`` TopK's outputs, what elementwise ops compute from them alone (with constants of one
    element), and what control flow returns of them, in the main graph or in bodies: an If's output where a
    branch returns one, a Loop's or Scan's where its body does."""
    sites = walk(model)
    if not any(s.node.op_type == "TopK" for s in sites):  # nothing unordered (the usual case: no further walk)
        return {}
    found: dict[tuple, tuple[int, str]] = {}  # (scope, tensor) -> (axis, TopK)
    # one element, of rank 0 or 1: broadcasting one never adds an axis in front of the TopK's
    graphs = {s.scope: s.graph for s in sites}  # each graph once (constants() reads all its nodes)
    consts = {(scope, k) for scope, gr in graphs.items() for k, t in constants(gr).items()
              if element_count(t.dims) == 1 and len(t.dims) <= 1}

    def where(keys, scope: tuple, name: str):
        """The key of ``name`` in ``keys`` as a node in ``scope`` reads it (its body's, an enclosing one's)."""
        return next(((scope[:n], name) for n in range(len(scope), -1, -1) if (scope[:n], name) in keys), None)

    for s in sites:
        n = s.node
        if n.domain not in ("", "ai.onnx") or not n.output:
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute if a.type != onnx.AttributeProto.GRAPH}
        if n.op_type == "TopK":
            if attrs.get("sorted", 1) == 0:
                for o in n.output[:2]:
                    if o:
                        found[s.scope, o] = (int(attrs.get("axis", -1)), n.name or n.output[0])
        elif n.op_type in ELEMENTWISE and n.output[0]:
            skip = SCALAR_INPUTS.get(n.op_type, set())
            data = [i for k, i in enumerate(n.input) if i and k not in skip and where(consts, s.scope, i) is None]
            origins = {found.get(where(found, s.scope, i)) for i in data}
            if data and len(origins) == 1 and None not in origins:  # one permutation, carried along
                found[s.scope, n.output[0]] = origins.pop()
        elif n.op_type in ("If", "Loop", "Scan"):
            hits: dict[str, list] = {}
            for attr, body in subgraphs(n):
                inner = s.scope + (f"{s.name}/{attr}",)
                for o, hit in _returned(n, attrs, body, lambda t: found.get(where(found, inner, t))).items():
                    hits.setdefault(o, []).append(hit)
            for o, hs in hits.items():
                if len({axis for axis, _ in hs}) == 1:  # two branches' along two axes: compared as it is
                    found[s.scope, o] = hs[0]
    shared = shared_names(sites)
    return {("/".join(scope + (t,)) if scope and t in shared else t): v for (scope, t), v in found.items()}


def _returned(node: onnx.NodeProto, attrs: dict, body: onnx.GraphProto, unordered) -> dict[str, tuple[int, str]]:
    """The outputs of control-flow ``node`` that return a tensor of ``body`` that ``unordered(name)`` says is
    unordered (axis, TopK): an If's k-th output is the branch's k-th, a Loop's its body's after the
    condition, a Scan's its body's; a scan output stacks the iterations' values along a new axis (0, or a
    Scan's ``scan_output_axes`` entry), which moves the TopK's axis one further along where it comes first."""
    lead = 1 if node.op_type == "Loop" else 0
    state = {"If": len(node.output), "Loop": len(node.input) - 2,
             "Scan": len(node.input) - int(attrs.get("num_scan_inputs", 0))}[node.op_type]
    stacked = list(attrs.get("scan_output_axes", []))
    out = {}
    for k, o in enumerate(node.output):
        hit = unordered(body.output[k + lead].name) if o and k + lead < len(body.output) else None
        if hit is None:
            continue
        axis, topk = hit
        if k >= state:  # a scan output
            axis = _stacked_axis(axis, stacked[k - state] if k - state < len(stacked) else 0)
            if axis is None:
                continue
        out[o] = (axis, topk)
    return out


def _stacked_axis(axis: int, new: int) -> int | None:
    """The TopK's ``axis`` of a body value once the iterations are stacked along a ``new`` axis (a Loop's
    0, a Scan's ``scan_output_axes`` entry): one further along where the new axis comes first, the same
    where it comes after; both counted from the front or both from the back, or the new axis first or last
    (None otherwise, where one is counted from the front and the other from the back: the rank, which would
    tell, is not known here)."""
    if axis >= 0 and new >= 0:
        return axis if axis < new else axis + 1
    if axis < 0 and new < 0:
        return axis if axis > new else axis - 1
    return axis if new in (0, -1) else None  # a new first axis keeps the count from the back, a new last the front's


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
    which = some(nodes)
    return found, [f"TopK {which} (sorted=0) returns its K values in an unspecified order: {len(found)} pair(s) of its "
                   "outputs and of what elementwise ops compute from them are compared sorted along that axis "
                   "(values by value, indices as sets), not position by position"]


def in_order(value, axis: int):
    """``value`` (numpy, or an onnxruntime OrtValue) sorted along ``axis`` (negative: from the end)."""
    v = value.numpy() if hasattr(value, "element_type") else np.asarray(value)
    if v.ndim == 0:
        return v
    return np.sort(v, axis=axis if axis >= 0 else axis + v.ndim, kind="stable")
