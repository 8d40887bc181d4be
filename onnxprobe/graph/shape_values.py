"""The values of a model's shape computations for given input shapes, for shape inference to go on past them.

onnx's inference propagates the values of Shape -> Gather -> Unsqueeze chains, but a Slice, Reshape,
Expand or Range that reads such a value is not given it: in a PyTorch export of BERT the position ids are
``Slice(buffer, 0, Unsqueeze(Gather(Shape(input_ids), 1)))``, and every tensor after them (104 of tiny
BERT's 208) had no concrete shape, however concrete the inputs. ``fold_shape_values`` computes those small
integer tensors with numpy (Shape of a tensor whose shape is known, small constants, and a short table of
cheap ops) and returns a copy of the model in which they are initializers, for inference to run on again.

The contract: the model is not modified; only tensors of at most MAX_ELEMENTS elements are computed (an op
whose output size its inputs give is checked before numpy allocates it), from
constants and shapes alone (never from an input's values); an op outside the table, or anything numpy
refuses, stops the folding there. onnxruntime's symbolic shape inference would resolve the same chains, but
it imports sympy (2-4 s) on every command.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from onnxprobe.graph.constants import constant_arrays
from onnxprobe.graph.tensor_data import to_array

MAX_ELEMENTS = 1024  # shape computations are small; a bigger tensor is data, not a shape


def _attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _axes(node: onnx.NodeProto, vals: list, k: int) -> list[int] | None:
    """Axes given as input ``k`` (newer opsets) or as the attribute (older)."""
    if len(vals) > k and vals[k] is not None:
        return [int(a) for a in np.asarray(vals[k]).reshape(-1)]
    a = _attr(node, "axes")
    return None if a is None else [int(x) for x in a]


def _unsqueeze(node, v):
    x, axes = v[0], _axes(node, v, 1)
    rank = x.ndim + len(axes)
    for a in sorted(ax % rank for ax in axes):
        x = np.expand_dims(x, a)
    return x


def _squeeze(node, v):
    axes = _axes(node, v, 1)
    return np.squeeze(v[0]) if axes is None else np.squeeze(v[0], axis=tuple(a % v[0].ndim for a in axes))


def _slice(node, v):
    x = v[0]
    if len(v) > 1:  # opset >= 10: inputs
        starts, ends = (np.asarray(t).reshape(-1) for t in v[1:3])
        axes = np.asarray(v[3]).reshape(-1) if len(v) > 3 and v[3] is not None else np.arange(len(starts))
        steps = np.asarray(v[4]).reshape(-1) if len(v) > 4 and v[4] is not None else np.ones(len(starts), np.int64)
    else:
        starts, ends = np.asarray(_attr(node, "starts")), np.asarray(_attr(node, "ends"))
        axes = np.asarray(_attr(node, "axes", list(range(len(starts)))))
        steps = np.ones(len(starts), np.int64)
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        index[int(a) % x.ndim] = slice(int(s), int(e), int(st))  # numpy's slicing clamps as ONNX's does
    return x[tuple(index)]


def _div(a, b):
    if np.issubdtype(np.result_type(a, b), np.integer):
        q = np.abs(a) // np.abs(b)
        return (np.sign(a) * np.sign(b) * q).astype(np.result_type(a, b))  # ONNX's integer Div truncates
    return a / b


def _reshape(node, v):
    shape = [int(d) for d in np.asarray(v[1]).reshape(-1)]
    if not _attr(node, "allowzero", 0):
        shape = [v[0].shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return v[0].reshape(shape)


def _const_of_shape(node, v):
    t = _attr(node, "value")
    fill = to_array(t).reshape(-1)[0] if t is not None else np.float32(0)
    return np.full([int(d) for d in np.asarray(v[0]).reshape(-1)], fill, dtype=np.asarray(fill).dtype)


OPS = {
    "Identity": lambda n, v: v[0],
    "Gather": lambda n, v: np.take(v[0], v[1], axis=_attr(n, "axis", 0)),
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": lambda n, v: np.concatenate(v, axis=_attr(n, "axis")),
    "Slice": _slice,
    "Cast": lambda n, v: v[0].astype(onnx.helper.tensor_dtype_to_np_dtype(_attr(n, "to"))),
    "Add": lambda n, v: v[0] + v[1],
    "Sub": lambda n, v: v[0] - v[1],
    "Mul": lambda n, v: v[0] * v[1],
    "Div": lambda n, v: _div(v[0], v[1]),
    "Neg": lambda n, v: -v[0],
    "Abs": lambda n, v: np.abs(v[0]),
    "Min": lambda n, v: np.minimum.reduce(v),
    "Max": lambda n, v: np.maximum.reduce(v),
    "Equal": lambda n, v: np.equal(v[0], v[1]),
    "Less": lambda n, v: np.less(v[0], v[1]),
    "Greater": lambda n, v: np.greater(v[0], v[1]),
    "Not": lambda n, v: np.logical_not(v[0]),
    "Where": lambda n, v: np.where(v[0], v[1], v[2]),
    "Reshape": _reshape,
    "Expand": lambda n, v: v[0] * np.ones([int(d) for d in np.asarray(v[1]).reshape(-1)], dtype=v[0].dtype),
    "ConstantOfShape": _const_of_shape,
    "Range": lambda n, v: np.arange(v[0], v[1], v[2]).astype(np.result_type(v[0], v[1], v[2])),
    "ReduceProd": lambda n, v: np.prod(v[0], axis=None if _axes(n, v, 1) is None else tuple(_axes(n, v, 1)),
                                       keepdims=bool(_attr(n, "keepdims", 1))),
}


def _too_big(op: str, v: list) -> bool:
    """Whether an op that makes a tensor of a size its inputs give (not of their own sizes) would make more
    than MAX_ELEMENTS elements: checked before numpy allocates it (a ConstantOfShape of [100000, 100000])."""
    try:
        if op == "ConstantOfShape":
            return int(np.prod(np.asarray(v[0], np.float64))) > MAX_ELEMENTS
        if op == "Expand":
            shape = np.broadcast_shapes(v[0].shape, tuple(int(d) for d in np.asarray(v[1]).reshape(-1)))
            return int(np.prod(shape, dtype=np.float64)) > MAX_ELEMENTS
        if op == "Range":
            start, limit, delta = (float(np.asarray(x).reshape(-1)[0]) for x in v[:3])
            return delta == 0 or (limit - start) / delta > MAX_ELEMENTS
    except (ValueError, TypeError, IndexError, OverflowError):
        return True
    return False


def fold_shape_values(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> onnx.ModelProto | None:
    """A copy of ``model`` (a skeleton: its big weights may be stubs) whose shape computations, for tensors
    of these concrete ``shapes``, are initializers; None when nothing new could be computed."""
    g = model.graph
    vals = constant_arrays(g, MAX_ELEMENTS)
    folded: dict[str, np.ndarray] = {}
    for n in g.node:
        if n.domain not in ("", "ai.onnx") or not n.output or any(o in vals for o in n.output if o):
            continue
        try:
            if n.op_type in ("Shape", "Size"):
                s = shapes.get(n.input[0]) if n.input else None
                if s is None:
                    continue
                out = (np.array(s[_attr(n, "start", 0):_attr(n, "end", len(s))], np.int64) if n.op_type == "Shape"
                       else np.array(int(np.prod(s, dtype=np.int64)), np.int64))
            elif n.op_type in OPS and all(not i or i in vals for i in n.input) and len(n.output) == 1:
                v = [vals[i] if i else None for i in n.input]
                if _too_big(n.op_type, v):
                    continue
                with np.errstate(all="ignore"):
                    out = np.asarray(OPS[n.op_type](n, v))
            else:
                continue
        except (ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError, KeyError, MemoryError):
            continue  # numpy refuses what the op would: leave it to inference
        if out.size <= MAX_ELEMENTS:
            vals[n.output[0]] = folded[n.output[0]] = out
    if not folded:
        return None
    out_model = onnx.ModelProto()
    out_model.CopyFrom(model)
    og = out_model.graph
    keep = [n for n in og.node if not (n.output and all(o in folded or not o for o in n.output))]
    del og.node[:]
    og.node.extend(keep)
    og.initializer.extend(numpy_helper.from_array(np.ascontiguousarray(v), name) for name, v in folded.items())
    return out_model
