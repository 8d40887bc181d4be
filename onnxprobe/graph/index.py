"""Lookups over one model, built once: nodes by name or index, producers, consumers, and every tensor
in topological order, each with where it comes from and where it goes. What the interactive debugger and
``api.where`` walk; nothing here runs a model."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import onnx

from onnxprobe.errors import UsageError
from onnxprobe.graph.densify import dense_array
from onnxprobe.graph.model import Model
from onnxprobe.graph.ops import OP_ABBREVIATIONS
from onnxprobe.graph.select import ambiguous_node, index_or_name, shared_names, shared_node_names
from onnxprobe.graph.shapes import dtype_name, static_shape, value_types
from onnxprobe.graph.summary import non_tensor_outputs
from onnxprobe.graph.tensor_data import to_array
from onnxprobe.graph.walk import all_graphs, constant_tensors, walk
from onnxprobe.text import as_typed, matches
from onnxprobe.types import BACKWARD_TAG, TensorRef, forward_name


@dataclass(frozen=True)
class TensorInfo:
    """One tensor, statically: where it comes from and where it goes."""

    ref: TensorRef
    kind: str  # "input" | "initializer" | "node" (a node output, Constant outputs included) | "body input" | "outer"
    consumers: tuple[str, ...]  # display names of the nodes that read it, in topological order
    port: str | None = None  # an If/Loop/Scan body's input or output: what it is to the node, e.g. "loop body input: carried, from v0"

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
    outputs; subgraphs inline). Tensors are keyed by ``TensorRef.key``: a name that sibling bodies share
    (two If nodes' branches each naming 'o') is each body's tensor by its scope ('if1/then_branch/o'),
    and the bare name is ambiguous (``tensor`` says so, with the choices)."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.sites = walk(model.inferred)
        self.by_name: dict[str, object] = {}
        for s in self.sites:
            self.by_name.setdefault(s.name, s)
        for s in self.sites:  # the qualified name a listing shows; a bare name wins where they clash
            self.by_name.setdefault(s.path, s)
        # a bare name several nodes bear (sibling bodies' nodes named alike): ambiguous, not the first of them
        self.shared_nodes = shared_node_names(self.sites)
        self.producer = {o: s for s in self.sites for o in s.node.output if o}
        self.consumers: dict[str, list] = {}
        for s in self.sites:
            for i in dict.fromkeys(x for x in s.node.input if x):
                self.consumers.setdefault(i, []).append(s)
        types = value_types(model.inferred)
        self.shared = shared_names(self.sites)
        self.initializers: dict[str, onnx.TensorProto] = {}
        # sparse initializers: weights as the dense ones, their values densified where asked (``value``)
        self.sparse: dict[str, onnx.SparseTensorProto] = {}
        for g in all_graphs(model.inferred.graph):
            for t in g.initializer:
                self.initializers.setdefault(t.name, t)
            for sp in g.sparse_initializer:
                self.sparse.setdefault(sp.values.name, sp)
        self.inputs = [i.name for i in model.inferred.graph.input if i.name not in self.initializers and i.name not in self.sparse]
        self.outputs = [o.name for o in model.inferred.graph.output]
        # outputs that are no tensors ('a sequence': a ZipMap's), with what each is: no values to show or save
        self.no_tensors = non_tensor_outputs(model.inferred)
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
                grad_of=forward_name(name) if backward else None, kind=kind,
                qualified=site is not None and name in self.shared)

        self.refs: dict[str, TensorRef] = {}
        self.kinds: dict[str, str] = {}
        order: list[str] = []
        for name in self.inputs:
            first = self.consumers.get(name)
            self.refs[name], self.kinds[name] = ref(name, index=first[0].index if first else 0, kind="input"), "input"
            order.append(name)
        for s in self.sites:
            for i in s.node.input:
                if i and i not in self.refs and (i in self.initializers or i in self.sparse):
                    r = ref(i, index=s.index, kind="initializer")
                    if i in self.sparse and r.shape is None:  # its own dims where no declared type gives them
                        sp = self.sparse[i]
                        r = dataclasses.replace(r, shape=tuple(int(d) for d in sp.dims), dtype=r.dtype or dtype_name(sp.values.data_type))
                    self.refs[i], self.kinds[i] = r, "initializer"
                    order.append(i)
            for o in s.node.output:
                r = ref(o, s) if o else None
                if r is not None and r.key not in self.refs:
                    self.refs[r.key], self.kinds[r.key] = r, "node"
                    order.append(r.key)
                    if r.qualified:  # its readers: those within its own body
                        self.consumers[r.key] = [c for c in self.consumers.get(o, []) if c.scope[:len(s.scope)] == s.scope]
        self.order = order
        self.position = {n: i for i, n in enumerate(order)}
        # weights: initializers, Constant outputs and what is computed from them alone; not the model's outputs,
        # which are outputs as any other (the debugger's `where` searched none of a model without inputs, and `step`
        # passed over every node of it)
        self.constants = constant_tensors(model.inferred, self.sites) & set(order) - set(self.outputs)

    def node(self, key: str | int):
        """A node by display name, by index (an int, or ``#index``: always the index), or by a bare number
        that names no other node; UsageError when there is none, or when a bare number is both an index
        and another node's name (as ``--range`` refuses it)."""
        if isinstance(key, (int, np.integer)):
            return self._at(int(key))
        k = as_typed(str(key).strip(), self.by_name)
        if k.startswith("#") and k[1:].lstrip("-").isdigit():
            return self._at(int(k[1:]), given=True)  # '#N' is an index, even beside a node named '#N'
        if k in self.shared_nodes:
            raise ambiguous_node(k, self.shared_nodes[k])
        site = self.by_name.get(k)
        if k.lstrip("-").isdigit():
            i = int(k)
            if site is not None and 0 <= i < len(self.sites) and self.sites[i] is not site:
                raise index_or_name(k, i, site.index)
            return site if site is not None else self._at(i, given=True)
        if site is not None:
            return site
        raise UsageError(f"no node named {k!r}")

    def _at(self, i: int, given: bool = False):
        """The node at index ``i``; ``given``: as a user wrote it (#N, N), counted from 0 only: #-1 is no node (it was
        the last one, Python's way, where the message says 0..N-1)."""
        if (0 if given else -len(self.sites)) <= i < len(self.sites):
            return self.sites[i]
        raise UsageError(f"node index {i} out of range (the model has {len(self.sites)} nodes, 0..{len(self.sites) - 1})")

    def choices(self, name: str) -> list[str]:
        """The keys of the tensors a bare ``name`` stands for where sibling bodies share it (else [])."""
        return [k for k in self.order if self.refs[k].qualified and self.refs[k].name == name] if name in self.shared else []

    def ambiguous(self, name: str) -> UsageError | None:
        """The error for a bare name that sibling bodies share (one line, the choices listed), else None."""
        keys = self.choices(name) if name not in self.refs else []
        if len(keys) < 2:
            return None
        return UsageError(f"{name!r} is ambiguous: {len(keys)} bodies each compute a tensor of that name; name one by "
                          f"its scope: {', '.join(keys)}")

    def key_at(self, scope: tuple[str, ...], name: str) -> str:
        """The key of the tensor ``name`` that a node in ``scope`` reads or writes: of a name that sibling
        bodies share, that body's own or the nearest one around it."""
        if name not in self.shared:
            return name
        for i in range(len(scope), -1, -1):
            k = "/".join(scope[:i] + (name,))
            if k in self.refs and self.refs[k].scope == scope[:i]:
                return k
        return name

    def tensor(self, name: str) -> TensorInfo:
        if name not in self.refs:
            raise self.ambiguous(name) or UsageError(f"no tensor named {name!r}")
        return TensorInfo(self.refs[name], self.kinds[name], tuple(s.name for s in self.consumers.get(name, ())))

    def type_text(self, name: str) -> str | None:
        """The whole type of a value that is no tensor (``sequence<float32>``, ``optional<...>``: the type
        summary of ``graph.summary``, as inspect shows it); None for a tensor or an unknown type."""
        from onnxprobe.graph.summary import all_types, type_info

        tp = all_types(self.model.inferred).get(name)
        ti = type_info(name, tp)
        return ti.type if ti.kind not in ("tensor", "unknown") else None

    def node_info(self, key: str | int) -> NodeInfo:
        s = self.node(key)
        n = s.node

        def info(t: str) -> TensorInfo | None:
            if not t:
                return None
            port = self._port(s, t)
            k = self.key_at(s.scope, t)
            if k in self.refs:
                return dataclasses.replace(self.tensor(k), port=port and port[0])
            cons = tuple(c.name for c in self.consumers.get(t, ()))
            if port is not None and port[1] is not None:  # a body's own input, typed as the body declares it
                tp = port[1].type
                dtype = dtype_name(tp.tensor_type.elem_type) if tp.HasField("tensor_type") else None
                ref = TensorRef(t, "", "", s.index, scope=s.scope, dtype=dtype, shape=static_shape(tp), kind="body input")
                return TensorInfo(ref, "body input", cons, port[0])
            return TensorInfo(TensorRef(t, "", "", -1), "outer", cons)

        return NodeInfo(s.index, s.name, n.op_type, n.domain or "ai.onnx", s.scope,
                        [info(t) for t in n.input], [info(t) for t in n.output],
                        [(a.name, attribute_text(a)) for a in n.attribute])

    def _port(self, site, name: str) -> tuple[str, onnx.ValueInfoProto | None] | None:
        """What ``name`` is to the If/Loop/Scan around ``site`` when it is one of a body's inputs (with its
        declared type) or outputs, the innermost body first; None otherwise. Without this the node view read
        a body input as an outer-scope tensor and a body output nothing else reads as unused."""
        for depth, (ctrl, attr) in enumerate(reversed(site.chain)):
            body = next((a.g for a in ctrl.attribute if a.name == attr and a.type == onnx.AttributeProto.GRAPH), None)
            if body is None:
                continue
            owner = next((self.producer[o].name for o in ctrl.output if o in self.producer), ctrl.name or ctrl.op_type)
            ins = [i.name for i in body.input]
            if name in ins:
                k = ins.index(name)
                return f"{owner} body input: {_body_input(ctrl, k, len(ins))}", body.input[k]
            outs = [o.name for o in body.output]
            if depth == 0 and name in outs:  # a node writes only its own graph's outputs
                kind = "branch" if ctrl.op_type == "If" else "body"
                return f"{owner} {kind} output: {_body_output(ctrl, outs.index(name), len(ins))}", None
        return None

    def find_nodes(self, pattern: str | None = None) -> list:
        """Nodes whose display name matches a glob, or ``op:TYPE`` (glob too; ``op:Conv,Relu``: either, as
        an op type holds no comma) for op types, by their name or qualified by their domain as ``inspect`` writes
        them and selections take them (``com.microsoft.BiasGelu``)."""
        if not pattern:
            return list(self.sites)
        if pattern.startswith("op:"):
            ps = pattern[3:].split(",")

            def names(n) -> tuple[str, ...]:  # (and the short name tables show: 'BatchNorm')
                return ((n.op_type,) + ((f"{n.domain}.{n.op_type}",) if n.domain not in ("", "ai.onnx") else ())
                        + ((OP_ABBREVIATIONS[n.op_type],) if n.op_type in OP_ABBREVIATIONS else ()))

            return [s for s in self.sites if any(matches(o, p) for p in ps for o in names(s.node))]
        return [s for s in self.sites if matches(s.name, pattern) or s.scope and matches(s.path, pattern)]

    def value(self, name: str, feed: dict[str, np.ndarray] | None = None) -> np.ndarray | None:
        """A graph input's value (from ``feed``) or an initializer's (a sparse one's dense values); None for
        node outputs."""
        if name in self.sparse:
            return dense_array(self.sparse[name])
        if name in self.initializers:
            return to_array(self.initializers[name])
        if feed is not None and name in feed:
            return feed[name]
        return None


def _body_input(ctrl: onnx.NodeProto, k: int, n_in: int) -> str:
    """Body input ``k`` of a Loop (iteration number, condition, carried values) or Scan (states, slices)."""
    outer = list(ctrl.input)
    if ctrl.op_type == "Loop":
        if k < 2:
            return ("iteration number", "condition")[k]
        return f"carried, from {outer[k]}" if k < len(outer) and outer[k] else "carried"
    if ctrl.op_type == "Scan":
        m = next((a.i for a in ctrl.attribute if a.name == "num_scan_inputs"), 0)
        src = outer[len(outer) - n_in + k] if 0 <= len(outer) - n_in + k < len(outer) else ""  # opset 8: sequence_lens first
        return (f"state, from {src}" if k < n_in - m else f"slice of {src}") if src else ("state" if k < n_in - m else "slice")
    return f"input {k}"


def _body_output(ctrl: onnx.NodeProto, k: int, n_in: int) -> str:
    """Body output ``k``: a Loop's next condition, carried values (final value: the Loop's output) and scan
    outputs (stacked into it); a Scan's states and scan outputs; an If branch's value of the If's output."""
    outs = list(ctrl.output)
    if ctrl.op_type == "Loop":
        if k == 0:
            return "condition of the next iteration"
        final = outs[k - 1] if k - 1 < len(outs) else ""
        if k < n_in - 1:
            return f"carried → {final}" if final else "carried"
        return f"scan → {final}" if final else "scan output"
    if ctrl.op_type == "Scan":
        m = next((a.i for a in ctrl.attribute if a.name == "num_scan_inputs"), 0)
        states = n_in - m
        final = outs[k] if k < len(outs) else ""
        return (f"state → {final}" if k < states else f"scan → {final}") if final else ("state" if k < states else "scan output")
    return f"→ {outs[k]}" if k < len(outs) and outs[k] else f"output {k}"


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
        arr = to_array(v)
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
