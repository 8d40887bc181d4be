"""A small helper that appends nodes to one ONNX graph: fresh names, per-graph constants, Reduce* in the
form each opset wants, and ``interleave`` to place the added nodes right behind what they read."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper


def fresh_name(names: set[str], base: str) -> str:
    """``base``, or ``base.1``, ``base.2``... : the first not in ``names``, which it joins."""
    name, k = base, 0
    while name in names:
        k += 1
        name = f"{base}.{k}"
    names.add(name)
    return name


def default_opset(model: onnx.ModelProto) -> int:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return 1


@dataclass
class GraphBuilder:
    """Appends nodes to one graph, with fresh names and per-graph constants."""

    graph: onnx.GraphProto
    opset: int
    names: set[str]
    consts: dict[tuple, str] = field(default_factory=dict)
    original: int = -1  # how many nodes the graph had before this pass

    def __post_init__(self) -> None:
        self.original = len(self.graph.node)

    def interleave(self) -> None:
        """Move each added node right behind the last node it depends on, so that a probed tensor's
        statistics run as soon as it exists and the tensor can be freed, as in the unprobed model."""
        nodes = list(self.graph.node)
        if len(nodes) == self.original:
            return
        anchor_of: dict[str, int] = {}
        for i, n in enumerate(nodes[: self.original]):
            for o in n.output:
                anchor_of[o] = i
        buckets: dict[int, list[onnx.NodeProto]] = {}
        for n in nodes[self.original:]:
            a = max((anchor_of.get(i, -1) for i in n.input if i), default=-1)
            for o in n.output:
                anchor_of[o] = a
            buckets.setdefault(a, []).append(n)
        order = list(buckets.get(-1, []))
        for i, n in enumerate(nodes[: self.original]):
            order.append(n)
            order.extend(buckets.get(i, []))
        del self.graph.node[:]
        self.graph.node.extend(order)

    def fresh(self, base: str) -> str:
        return fresh_name(self.names, base)

    def node(self, op: str, inputs: list[str], base: str, **attrs) -> str:
        out = self.fresh(base)
        self.graph.node.append(helper.make_node(op, inputs, [out], name=self.fresh(f"onnxprobe/{op}/{base}"), **attrs))
        return out

    def const(self, value: np.ndarray, base: str) -> str:
        key = (value.dtype.str, value.shape, value.tobytes())
        if key not in self.consts:
            out = self.fresh(f"onnxprobe.const.{base}")
            self.graph.node.append(helper.make_node(
                "Constant", [], [out], name=self.fresh(f"onnxprobe/Constant/{base}"),
                value=numpy_helper.from_array(value, out)))
            self.consts[key] = out
        return self.consts[key]

    def reduce(self, op: str, x: str, base: str, axes: list[int] | None = None, keepdims: int = 1) -> str:
        """Reduce* with ``axes`` given the way this opset wants it (attribute, or input since 13/18)."""
        if axes is None:
            return self.node(op, [x], base, keepdims=keepdims)
        axes_as_input = self.opset >= (13 if op == "ReduceSum" else 18)
        if axes_as_input:
            return self.node(op, [x, self.const(np.array(axes, np.int64), "axes")], base, keepdims=keepdims)
        return self.node(op, [x], base, axes=axes, keepdims=keepdims)
