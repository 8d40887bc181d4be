"""The types and shapes of what ``graph.expose`` carries out of a graph: a tensor retyped (a narrow type's
float32 copy), carried out of an If branch (its rank only: the branch that did not run returns it empty),
stacked by a Loop or Scan (one leading dim per level), and the dims a statistics row is laid out for.
Pure functions of types, shapes and body chains (``walk.NodeSite.chain``); none touches a graph.
"""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper


def retyped(t: onnx.TypeProto | None, elem: int) -> onnx.TypeProto | None:
    """A copy of ``t`` with element type ``elem`` (None for None)."""
    if t is None:
        return None
    out = onnx.TypeProto()
    out.CopyFrom(t)
    out.tensor_type.elem_type = elem
    return out


def laid_out(shape: tuple | None, elem: int | None) -> tuple | None:
    """The dims a float32 statistics row is laid out for (``Probe.planned_shape``): None where it fixes none
    (integers, float64 and tensors of unknown rank take a flat float64 row, right at any size)."""
    if elem != TensorProto.FLOAT or not shape or not any(isinstance(d, int) for d in shape):
        return None
    return tuple(d if isinstance(d, int) else None for d in shape)


def rank_only(t: onnx.TypeProto | None) -> tuple | None:
    """``t``'s rank as a shape of unknown dims (None where the rank is unknown)."""
    if t is None or not t.tensor_type.HasField("shape"):
        return None
    return tuple(None for _ in t.tensor_type.shape.dim)


def loosen(t: onnx.TypeProto) -> onnx.TypeProto:
    """The type of a value carried out of an If branch: its rank without dims (the branch that did not run
    returns it empty)."""
    if not t.tensor_type.HasField("shape"):
        return t
    return helper.make_tensor_type_proto(t.tensor_type.elem_type, [None] * len(t.tensor_type.shape.dim))


def stacks(chain: tuple) -> bool:
    """Whether a value of one shape in this body always stacks: not inside an If branch within a Loop or
    Scan body (that branch's value is empty in the iterations that take the other one)."""
    kinds = [n.op_type for n, _ in chain]
    return not any(k == "If" and any(o in ("Loop", "Scan") for o in kinds[:j]) for j, k in enumerate(kinds))


def loop_depth(chain: tuple) -> int:
    """How many Loop / Scan bodies of ``chain`` stack a value (the leading dims it gains)."""
    return sum(1 for n, _ in chain if n.op_type in ("Loop", "Scan"))


def with_leading_dim(t: onnx.TypeProto) -> onnx.TypeProto:
    """``t`` stacked once (a Loop or Scan's output of a body value)."""
    return with_leading_dims(t, 1)


def with_leading_dims(t: onnx.TypeProto, k: int) -> onnx.TypeProto:
    """``t`` with ``k`` leading dims of unknown size (its shape, where it has one, kept after them)."""
    if k == 0 or not t.tensor_type.HasField("shape"):
        return t
    dims = [None] * k + [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.tensor_type.shape.dim]
    return helper.make_tensor_type_proto(t.tensor_type.elem_type, dims)
