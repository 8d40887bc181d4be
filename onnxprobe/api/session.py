"""What the interactive session (``onnxprobe debug``) needs, as plain functions: single tensors
and nodes, cached sessions, interruptible runs, ``where``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from onnxprobe.graph.expose import expose
from onnxprobe.runtime.session import create_session, resolve_device
from onnxprobe.stats.tensor_stats import TensorStats
from onnxprobe.types import ProbePlan, RunConfig, RunInfo, TensorRef

from onnxprobe.api.core import read_probes, Model, LayersResult, rerun_masked


# ---------------------------------------------------------------------------------------------------
# Single tensors and nodes, cached sessions, interruptible runs, ``where``: what the interactive session
# (``onnxprobe debug``, onnxprobe/session/) needs, as plain functions.


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
    index: int
    name: str
    op_type: str
    domain: str
    scope: tuple[str, ...]
    inputs: list[TensorInfo | None]  # None for an omitted optional input
    outputs: list[TensorInfo | None]
    attributes: list[tuple[str, str]]  # (name, short text of the value)


BACKWARD_NODE_PREFIX = "onnxprobe.grad/"  # autodiff names its nodes onnxprobe.grad/<forward node>/<Op>


class GraphIndex:
    """Lookups over one model, built once: nodes by name, producers, consumers, and every tensor in
    topological order (graph inputs first, each initializer just before its first consumer, then node
    outputs; subgraphs inline)."""

    def __init__(self, model: Model) -> None:
        from onnxprobe.graph.shapes import dtype_name, static_shape, value_types
        from onnxprobe.graph.walk import walk

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

        def ref(name: str, site=None, index: int = -1) -> TensorRef:
            tp = types.get(name)
            backward = site is not None and site.name.startswith(BACKWARD_NODE_PREFIX)
            return TensorRef(
                name=name, node=site.name if site else "", op_type=site.node.op_type if site else "",
                index=site.index if site else index, scope=site.scope if site else (),
                dtype=dtype_name(tp.tensor_type.elem_type) if tp is not None else None,
                shape=static_shape(tp), is_output=name in outputs,
                direction="backward" if backward else "forward",
                grad_of=name[:-len("_grad")] if backward and name.endswith("_grad") else None)

        self.refs: dict[str, TensorRef] = {}
        self.kinds: dict[str, str] = {}
        order: list[str] = []
        for name in self.inputs:
            first = self.consumers.get(name)
            self.refs[name], self.kinds[name] = ref(name, index=first[0].index if first else 0), "input"
            order.append(name)
        for s in self.sites:
            for i in s.node.input:
                if i and i not in self.refs and i in self.initializers:
                    self.refs[i], self.kinds[i] = ref(i, index=s.index), "initializer"
                    order.append(i)
            for o in s.node.output:
                if o and o not in self.refs:
                    self.refs[o], self.kinds[o] = ref(o, s), "node"
                    order.append(o)
        self.order = order
        self.position = {n: i for i, n in enumerate(order)}
        from onnxprobe.graph.walk import constant_tensors

        # weights: initializers, Constant outputs and what is computed from them alone
        self.constants = constant_tensors(model.inferred, self.sites) & set(order)

    def node(self, key: str | int):
        """A node by display name, by index, or by ``#index``; UsageError when there is none."""
        from onnxprobe.errors import UsageError

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
        from onnxprobe.errors import UsageError

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
        import fnmatch

        if not pattern:
            return list(self.sites)
        if pattern.startswith("op:"):
            p = pattern[3:]
            return [s for s in self.sites if fnmatch.fnmatchcase(s.node.op_type, p)]
        return [s for s in self.sites if fnmatch.fnmatchcase(s.name, pattern)]

    def value(self, name: str, feed: dict[str, np.ndarray] | None = None) -> np.ndarray | None:
        """A graph input's value (from ``feed``) or an initializer's; None for node outputs."""
        if name in self.initializers:
            from onnx import numpy_helper

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
    v = onnx.helper.get_attribute_value(a)
    if a.type == onnx.AttributeProto.GRAPH:
        text = f"<graph {v.name or ''}: {len(v.node)} nodes>"
    elif a.type == onnx.AttributeProto.TENSOR:
        from onnx import numpy_helper

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


def model_info(model: Model) -> dict:
    """What ``debug``'s ``info`` prints: producer, IR, opsets, node and op counts, inputs, outputs, weights."""
    from collections import Counter

    from onnxprobe.runtime.feeds import input_specs

    idx = index(model)
    p = model.proto
    ops = Counter(s.node.op_type for s in idx.sites)
    weights = list(idx.initializers.values())
    for s in idx.sites:  # exporters such as paddle2onnx keep weights in Constant nodes
        if s.node.op_type == "Constant":
            weights += [a.t for a in s.node.attribute if a.name == "value" and a.type == onnx.AttributeProto.TENSOR]
    init_bytes = sum(_tensor_nbytes(t) for t in weights)
    outs = []
    for o in p.graph.output:
        r = idx.refs.get(o.name)
        outs.append({"name": o.name, "dtype": r.dtype if r else None, "shape": r.shape if r else None})
    return {
        "path": model.source, "producer": " ".join(x for x in (p.producer_name, p.producer_version) if x),
        "ir_version": p.ir_version,
        "opsets": {(o.domain or "ai.onnx"): o.version for o in p.opset_import},
        "nodes": len(idx.sites), "nodes_in_subgraphs": sum(1 for s in idx.sites if s.chain),
        "ops": dict(ops.most_common()),
        "inputs": [{"name": s.name, "dtype": str(s.dtype), "shape": s.shape} for s in input_specs(p)],
        "outputs": outs, "initializers": len(weights), "initializer_bytes": init_bytes,
        "warnings": list(model.warnings),
    }


def _tensor_nbytes(t: onnx.TensorProto) -> int:
    n = int(np.prod(t.dims)) if len(t.dims) else 1
    try:
        return n * np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
    except Exception:  # noqa: BLE001
        return 0


class Runner:
    """Runs a model with chosen tensors exposed, keeping the onnxruntime sessions of the last few plans
    (so a run with new inputs re-uses its session), interruptibly: Ctrl-C stops the run within one node
    and raises KeyboardInterrupt (see ``runtime.interrupt``).

    ``run(model, feed, names, config, raw=...)`` returns a LayersResult whose ``stats`` / ``shapes`` cover
    every name that could be computed (graph inputs and initializers on the host, node outputs in the
    graph) and whose ``arrays`` hold the raw values of the ``raw`` names."""

    def __init__(self, max_sessions: int = 4) -> None:
        from collections import OrderedDict

        self.max_sessions = max_sessions
        self._sessions: OrderedDict = OrderedDict()

    def clear(self) -> None:
        self._sessions.clear()

    def run(self, model: Model, feed: dict[str, np.ndarray], names, config: RunConfig | None = None, *,
            raw=(), stats: bool = True, notes: list[str] | None = None) -> LayersResult:
        from onnxprobe.runtime.interrupt import call_interruptibly, run_bound_interruptibly
        from onnxprobe.types import Probe

        config = config or RunConfig()
        idx = index(model)
        names = [n for n in dict.fromkeys(names) if n in idx.refs]
        raw = {n for n in raw if n in idx.refs}
        wanted = sorted(set(names) | raw, key=idx.position.__getitem__)
        host = [n for n in wanted if idx.kinds[n] in ("input", "initializer")]
        in_graph = [n for n in wanted if idx.kinds[n] == "node"]
        refs = [idx.refs[n] for n in in_graph]
        device = resolve_device(config.device)
        key = (id(model), tuple(in_graph), tuple(sorted(raw & set(in_graph))), stats, device, config.opt_level)
        result_stats: dict = {}
        shapes: dict = {}
        arrays: dict = {}
        outputs: dict = {}
        session_s = run_s = 0.0
        providers: list[str] = []
        session_notes: list[str] = []
        if refs:
            if key in self._sessions:
                p, session = self._sessions.pop(key)
            else:
                warnings = list(model.warnings)
                rewritten, probes = expose(model.inferred, refs, stats=stats, raw=raw & set(in_graph), warnings=warnings,
                                           nonfinite="deferred")
                p = ProbePlan(rewritten, probes, model.source, warnings, base=model.inferred)
                session = call_interruptibly(create_session, p.model, device=device, opt_level=config.opt_level, grace=0)
                session_s = session.seconds
            self._sessions[key] = (p, session)
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
            out_names = [o.name for o in p.model.graph.output]
            out, run_s = run_bound_interruptibly(session, feed, out_names)
            result_stats, shapes, arrays = read_probes(p.probes, out, host_stats=not stats)
            rerun_masked(model.inferred, p.probes, result_stats, feed, device, config.opt_level)
            outputs = {n: out[n] for n in idx.outputs if n in out}
            providers = session.providers
            session_notes = session.notes
        else:
            p = ProbePlan(model.inferred, [], model.source, list(model.warnings))
        for n in host:
            v = idx.value(n, feed)
            if v is None:
                continue
            v = np.asarray(v)
            if n in names:
                result_stats[n] = TensorStats.from_array(v) if v.dtype.kind in "biuf" else None
                shapes[n] = tuple(v.shape)
            if n in raw:
                arrays[n] = v
        plan_view = ProbePlan(p.model, [Probe(ref=idx.refs[n]) for n in names], model.source, p.warnings)
        info = RunInfo(device=device, providers=providers, opt_level=config.opt_level,
                       session_seconds=session_s, run_seconds=run_s)
        return LayersResult(plan=plan_view, info=info, stats=result_stats, shapes=shapes, arrays=arrays,
                            outputs=outputs, notes=list(notes or []) + list(session_notes))


def where(rows, condition) -> tuple[TensorRef, TensorStats] | None:
    """The first (ref, stats) in ``rows`` (topological order) whose statistics satisfy ``condition`` (a
    string such as ``nan``, ``inf``, ``absmax>1e4``, ``std<1e-6``, or a parsed Condition)."""
    from onnxprobe.stats.conditions import Condition, parse_condition

    cond = condition if isinstance(condition, Condition) else parse_condition(condition)
    for ref, st in rows:
        if cond.holds(st):
            return ref, st
    return None


