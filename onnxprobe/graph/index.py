"""Lookups over one model, built once: nodes by name or index, producers, consumers, and every tensor
in topological order, each with where it comes from and where it goes. What the interactive debugger and
``api.where`` walk; nothing here runs a model."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from onnxprobe.errors import UsageError
from onnxprobe.graph.model import Model
from onnxprobe.graph.shapes import dtype_name, static_shape, value_types
from onnxprobe.graph.walk import constant_tensors, walk
from onnxprobe.text import matches
from onnxprobe.types import BACKWARD_TAG, TensorRef, forward_name


@dataclass(frozen=True)
class TensorInfo:
    """One tensor, statically: where it comes from and where it goes."""

    ref: TensorRef
    kind: str  # "input" | "initializer" | "node" (a node output, Constant outputs included)
    consumers: tuple[str, ...]  # display names of the nodes that read it, in topological order

    @property
    def producer(self) -> str:
        return self.ref.node


@dataclass
class NodeInfo:
    """One node of a model, as ``api.GraphIndex`` tells it: its position, name, op, domain, the If/Loop/Scan
    bodies around it (``scope``), its inputs and outputs (name, type, shape; None for an omitted optional
    input) and its attributes as short text."""

    index: int
    name: str
    op_type: str
    domain: str
    scope: tuple[str, ...]
    inputs: list[TensorInfo | None]  # None for an omitted optional input
    outputs: list[TensorInfo | None]
    attributes: list[tuple[str, str]]  # (name, short text of the value)


class GraphIndex:
    """Lookups over one model, built once: nodes by name, producers, consumers, and every tensor in
    topological order (graph inputs first, each initializer just before its first consumer, then node
    outputs; subgraphs inline)."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.sites = walk(model.inferred)
        self.by_name: dict[str, object] = {}
        for s in self.sites:
            self.by_name.setdefault(s.name, s)
        self.producer = {o: s for s in self.sites for o in s.node.output if o}
        self.consumers: dict[str, list] = {}
        for s in self.sites:
            for i in dict.fromkeys(x for x in s.node.input if x):
                self.consumers.setdefault(i, []).append(s)
        types = value_types(model.inferred)
        self.initializers: dict[str, onnx.TensorProto] = {}

        def inits(g: onnx.GraphProto) -> None:
            for t in g.initializer:
                self.initializers.setdefault(t.name, t)
            for n in g.node:
                for a in n.attribute:
                    if a.type == onnx.AttributeProto.GRAPH:
                        inits(a.g)

        inits(model.inferred.graph)
        self.inputs = [i.name for i in model.inferred.graph.input if i.name not in self.initializers]
        self.outputs = [o.name for o in model.inferred.graph.output]
        outputs = set(self.outputs)

        def ref(name: str, site=None, index: int = -1, kind: str = "node") -> TensorRef:
            tp = types.get(name)
            backward = site is not None and site.name.startswith(BACKWARD_TAG)
            return TensorRef(
                name=name, node=site.name if site else "", op_type=site.node.op_type if site else "",
                index=site.index if site else index, scope=site.scope if site else (),
                dtype=dtype_name(tp.tensor_type.elem_type) if tp is not None else None,
                shape=static_shape(tp), is_output=name in outputs,
                direction="backward" if backward else "forward",
                grad_of=forward_name(name) if backward else None, kind=kind)

        self.refs: dict[str, TensorRef] = {}
        self.kinds: dict[str, str] = {}
        order: list[str] = []
        for name in self.inputs:
            first = self.consumers.get(name)
            self.refs[name], self.kinds[name] = ref(name, index=first[0].index if first else 0, kind="input"), "input"
            order.append(name)
        for s in self.sites:
            for i in s.node.input:
                if i and i not in self.refs and i in self.initializers:
                    self.refs[i], self.kinds[i] = ref(i, index=s.index, kind="initializer"), "initializer"
                    order.append(i)
            for o in s.node.output:
                if o and o not in self.refs:
                    self.refs[o], self.kinds[o] = ref(o, s), "node"
                    order.append(o)
        self.order = order
        self.position = {n: i for i, n in enumerate(order)}
        # weights: initializers, Constant outputs and what is computed from them alone
        self.constants = constant_tensors(model.inferred, self.sites) & set(order)

    def node(self, key: str | int):
        """A node by display name, by index, or by ``#index``; UsageError when there is none."""
        k = str(key).strip()
        if k in self.by_name:
            return self.by_name[k]
        digits = k[1:] if k.startswith("#") else k
        if digits.lstrip("-").isdigit():
            i = int(digits)
            if -len(self.sites) <= i < len(self.sites):
                return self.sites[i]
            raise UsageError(f"node index {i} out of range (the model has {len(self.sites)} nodes, 0..{len(self.sites) - 1})")
        raise UsageError(f"no node named {k!r}")

    def tensor(self, name: str) -> TensorInfo:
        if name not in self.refs:
            raise UsageError(f"no tensor named {name!r}")
        return TensorInfo(self.refs[name], self.kinds[name], tuple(s.name for s in self.consumers.get(name, ())))

    def node_info(self, key: str | int) -> NodeInfo:
        s = self.node(key)
        n = s.node

        def info(t: str) -> TensorInfo | None:
            if not t:
                return None
            if t in self.refs:
                return self.tensor(t)
            return TensorInfo(TensorRef(t, "", "", -1), "outer", tuple(c.name for c in self.consumers.get(t, ())))

        return NodeInfo(s.index, s.name, n.op_type, n.domain or "ai.onnx", s.scope,
                        [info(t) for t in n.input], [info(t) for t in n.output],
                        [(a.name, attribute_text(a)) for a in n.attribute])

    def find_nodes(self, pattern: str | None = None) -> list:
        """Nodes whose display name matches a glob, or ``op:TYPE`` (glob too) for op types."""
        if not pattern:
            return list(self.sites)
        if pattern.startswith("op:"):
            p = pattern[3:]
            return [s for s in self.sites if matches(s.node.op_type, p)]
        return [s for s in self.sites if matches(s.name, pattern)]

    def value(self, name: str, feed: dict[str, np.ndarray] | None = None) -> np.ndarray | None:
        """A graph input's value (from ``feed``) or an initializer's; None for node outputs."""
        if name in self.initializers:
            return numpy_helper.to_array(self.initializers[name])
        if feed is not None and name in feed:
            return feed[name]
        return None


def index(model: Model) -> GraphIndex:
    """The (cached) GraphIndex of a model."""
    idx = model.__dict__.get("_onnxprobe_index")
    if idx is None:
        idx = GraphIndex(model)
        model.__dict__["_onnxprobe_index"] = idx
    return idx


def attribute_text(a: onnx.AttributeProto, limit: int = 60) -> str:
    """An attribute's value as short text (at most ``limit`` characters): numbers, lists, a small tensor's
    values (a larger one's dtype and shape), a subgraph's name and node count."""
    if not isinstance(a, onnx.AttributeProto):
        raise UsageError(f"attribute: expected an onnx.AttributeProto (a node's .attribute), got {type(a).__name__}")
    v = onnx.helper.get_attribute_value(a)
    if a.type == onnx.AttributeProto.GRAPH:
        text = f"<graph {v.name or ''}: {len(v.node)} nodes>"
    elif a.type == onnx.AttributeProto.TENSOR:
        arr = numpy_helper.to_array(v)
        text = (np.array2string(arr, threshold=8, edgeitems=2, max_line_width=10**6) if arr.size <= 16
                else f"<tensor {arr.dtype} {list(arr.shape)}>")
    elif isinstance(v, bytes):
        text = repr(v.decode("utf-8", "replace"))
    elif isinstance(v, (list, tuple)):
        text = "[" + ", ".join(x.decode("utf-8", "replace") if isinstance(x, bytes) else (f"{x:g}" if isinstance(x, float) else str(x)) for x in v) + "]"
    elif isinstance(v, float):
        text = f"{v:g}"
    else:
        text = str(v)
    return text if len(text) <= limit else text[: limit - 1] + "…"
