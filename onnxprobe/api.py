"""The plain Python API. The CLI, the interactive session and notebooks call these same functions.

    from onnxprobe import api
    model = api.load("model.onnx")
    plan = api.plan(model, api.Selection(ops=("Conv",)))
    result = api.run(plan, api.feeds(model, seed=0))
    for ref, stats in result.rows():
        print(ref.name, stats.mean)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import onnx

from onnxprobe.errors import ExecutionError
from onnxprobe.graph.expose import expose
from onnxprobe.graph.io import load_model
from onnxprobe.graph.select import Selection, select
from onnxprobe.graph.shapes import annotate, infer_shapes
from onnxprobe.runtime import feeds as _feeds
from onnxprobe.runtime.session import create_session, resolve_device, run_bound
from onnxprobe.stats.tensor_stats import TensorStats
from onnxprobe.types import ProbePlan, ProbeResult, RunConfig, RunInfo, TensorRef

__all__ = ["Model", "Selection", "RunConfig", "load", "plan", "feeds", "run", "layers"]


@dataclass
class Model:
    """A loaded model: the proto as read (never written back), and a copy annotated by shape inference."""

    proto: onnx.ModelProto
    inferred: onnx.ModelProto
    source: str
    warnings: list[str] = field(default_factory=list)


def load(path: str | os.PathLike) -> Model:
    """Read a model and annotate it with inferred shapes. ``proto`` and ``inferred`` are the same object:
    it was read for this Model alone, so annotating it in place spares a copy of every weight."""
    proto = load_model(path)
    warnings: list[str] = []
    annotate(proto, warnings)
    return Model(proto, proto, str(path), warnings)


def plan(model: Model, selection: Selection | None = None, *, stats: bool = True, raw: bool | set[str] = False) -> ProbePlan:
    refs = select(model.inferred, selection or Selection())
    warnings = list(model.warnings)
    rewritten, probes = expose(model.inferred, refs, stats=stats, raw=raw, warnings=warnings, nonfinite="deferred")
    return ProbePlan(rewritten, probes, model.source, warnings, base=model.inferred)


def feeds(
    model: Model,
    *,
    seed: int = 0,
    int_range: tuple[int, int] = (0, 100),
    shapes: dict[str, tuple[int, ...]] | None = None,
    files: dict[str, str] | None = None,
    arrays: dict[str, np.ndarray] | None = None,
    notes: list[str] | None = None,
) -> dict[str, np.ndarray]:
    return _feeds.make_feeds(model.proto, seed=seed, int_range=int_range, shapes=shapes, files=files, arrays=arrays, notes=notes)


@dataclass
class LayersResult(ProbeResult):
    notes: list[str] = field(default_factory=list)

    def rows(self) -> Iterator[tuple[TensorRef, TensorStats | None]]:
        for p in self.plan.probes:
            yield p.ref, self.stats.get(p.ref.name)


def run(plan: ProbePlan, feed: dict[str, np.ndarray], config: RunConfig | None = None, *, notes: list[str] | None = None) -> LayersResult:
    config = config or RunConfig()
    device = resolve_device(config.device)
    session = create_session(plan.model, device=device, opt_level=config.opt_level)
    host = []
    for p in plan.probes:
        host += [n for n in (p.stats_output, p.shape_output) if n]
    own_outputs = [o.name for o in plan.model.graph.output if not _is_probe_output(o.name, plan)]
    raw = [p.raw_output for p in plan.probes if p.raw_output and p.raw_output not in own_outputs]
    host_names = list(dict.fromkeys(host + own_outputs))
    out, seconds = run_bound(session, feed, host_names, [r for r in dict.fromkeys(raw) if r not in host_names], interruptible=True)
    stats, shapes, arrays = {}, {}, {}
    for p in plan.probes:
        name = p.ref.name
        if p.stats_output:
            stats[name] = TensorStats.from_rows(out[p.stats_output])
        if p.shape_output:
            shapes[name] = tuple(int(d) for d in out[p.shape_output])
        if p.raw_output:
            arrays[name] = out[p.raw_output]
            if p.stats_on_host:
                stats[name] = TensorStats.from_array(arrays[name]) if arrays[name].dtype.kind in "biuf" else None
    if plan.base is not None:
        rerun_masked(plan.base, plan.probes, stats, feed, device, config.opt_level)
    info = RunInfo(device=device, providers=session.providers, opt_level=config.opt_level,
                   session_seconds=session.seconds, run_seconds=seconds)
    return LayersResult(plan=plan, info=info, stats=stats, shapes=shapes, arrays=arrays,
                        outputs={n: out[n] for n in own_outputs}, notes=list(notes or []) + session.notes)


def rerun_masked(base: onnx.ModelProto, probes: list, stats: dict, feed: dict, device: str, opt_level: str) -> None:
    """Tensors whose fast in-graph statistics came out non-finite (a NaN or Inf inside) are summarised
    again with masks, in one more run over just them; ``stats`` is updated in place. Costs nothing when
    every tensor is finite, the usual case."""
    from onnxprobe.graph.expose import needs_masking

    bad = [p.ref for p in probes if p.stats_output and needs_masking(stats.get(p.ref.name))]
    if not bad:
        return
    rewritten, again = expose(base, bad, stats=True, shapes=False, nonfinite="masked")
    session = create_session(rewritten, device=device, opt_level=opt_level)
    out, _ = run_bound(session, feed, [p.stats_output for p in again], interruptible=True)
    for p in again:
        stats[p.ref.name] = TensorStats.from_rows(out[p.stats_output])


def _is_probe_output(name: str, plan: ProbePlan) -> bool:
    return any(name in (p.stats_output, p.shape_output) for p in plan.probes) or (
        any(name == p.raw_output for p in plan.probes if p.ref.scope)
    )


def layers(
    path: str | os.PathLike,
    selection: Selection | None = None,
    config: RunConfig | None = None,
    *,
    save: bool = False,
    save_to: str | os.PathLike | None = None,
    max_memory: int | None = None,
    progress=None,
    seed: int = 0,
    int_range: tuple[int, int] = (0, 100),
    shapes: dict[str, tuple[int, ...]] | None = None,
    files: dict[str, str] | None = None,
    arrays: dict[str, np.ndarray] | None = None,
) -> LayersResult:
    """Load, probe and run a model in one call: what ``onnxprobe layers`` does.

    ``save=True`` keeps the raw tensors in ``result.arrays``. ``save_to=FILE.npz`` streams them to disk
    instead, in as many runs as it takes to keep at most ``max_memory`` bytes of them alive at once
    (default: a quarter of the available memory); ``progress(done, total)`` is called per run.
    """
    model = load(path)
    notes: list[str] = []
    feed = feeds(model, seed=seed, int_range=int_range, shapes=shapes, files=files, arrays=arrays, notes=notes)
    p = plan(model, selection, raw=save)
    try:
        result = run(p, feed, config, notes=notes)
        if save_to is not None:
            save_tensors(model, result, feed, save_to, max_memory=max_memory, progress=progress)
        return result
    except ExecutionError as e:
        if any("set to 1" in n for n in notes):
            raise ExecutionError(f"{e} (dynamic dimensions were set to 1: give real sizes with --shape NAME=DIMS)") from e
        raise


def save_tensors(model: Model, result: LayersResult, feed: dict[str, np.ndarray], path: str | os.PathLike, *,
                 max_memory: int | None = None, progress=None) -> int:
    """Stream the raw values of ``result``'s probed tensors to ``path`` (.npz), chunk by chunk: each run
    exposes at most ``max_memory`` bytes of them (sizes from the first run's shapes and counts).
    Returns the number of runs."""
    from onnxprobe.runtime.budget import default_budget, nbytes, plan_chunks
    from onnxprobe.runtime.npz import NpzWriter

    budget = max_memory or default_budget()
    refs = [p.ref for p in result.plan.probes]
    sizes = []
    for ref in refs:
        st = result.stats.get(ref.name)
        count = None if ref.name in result.shapes else (st.count if st is not None else 0)
        sizes.append((ref.name, nbytes(result.shapes.get(ref.name), ref.dtype, count)))
    # onnxruntime's output buffers and their numpy copies both exist for a moment: half the budget each
    chunks = plan_chunks(sizes, budget // 2)
    by_name = {r.name: r for r in refs}
    not_run = {n for n, st in result.stats.items() if st is not None and st.count == 0}
    device = result.info.device  # already resolved by the first run
    with NpzWriter(path) as out:
        for k, chunk in enumerate(chunks):
            rewritten, probes = expose(model.inferred, [by_name[n] for n in chunk], stats=False, shapes=False, raw=True)
            session = create_session(rewritten, device=device, opt_level=result.info.opt_level)
            names = [pr.raw_output for pr in probes if pr.raw_output]
            values, _ = run_bound(session, feed, list(dict.fromkeys(names)))
            for pr in probes:
                if pr.raw_output and pr.ref.name not in not_run:  # an If branch that did not run
                    out.add(pr.ref.name, values[pr.raw_output])
            del values, session
            if progress is not None:
                progress(k + 1, len(chunks))
    return len(chunks)



@dataclass
class DatasetResult:
    """Statistics of every probed tensor over a whole dataset: exactly mergeable moments and histograms."""

    plan: ProbePlan
    info: RunInfo
    moments: dict  # tensor name -> stats.moments.Moments
    histograms: dict  # tensor name -> stats.histogram.Histogram
    shapes: dict[str, tuple[int, ...]]  # of the first batch
    batches: int
    notes: list[str] = field(default_factory=list)

    def rows(self) -> Iterator[tuple[TensorRef, TensorStats | None]]:
        for p in self.plan.probes:
            m = self.moments.get(p.ref.name)
            yield p.ref, m.stats() if m is not None else None


def layers_dataset(path: str | os.PathLike, inputs: str | os.PathLike, selection: Selection | None = None,
                   config: RunConfig | None = None, *, max_memory: int | None = None, progress=None) -> DatasetResult:
    """``layers --inputs-dir``: one pass per batch; moments from the in-graph statistics, histograms and
    percentiles from the tensors themselves, fetched within ``max_memory`` per run."""
    from onnxprobe.runtime.budget import default_budget, nbytes, plan_chunks
    from onnxprobe.stats.histogram import Histogram
    from onnxprobe.stats.moments import Moments

    model = load(path)
    total, batches = _feeds.dataset_samples(inputs, _feeds.input_specs(model.proto))
    p = plan(model, selection)
    by_name = {pr.ref.name: pr.ref for pr in p.probes}
    moments: dict = {}
    hists: dict = {}
    shapes: dict = {}
    info = None
    notes: list[str] = []
    budget = (max_memory or default_budget()) // 2
    for k, (label, arrays) in enumerate(batches):
        feed = feeds(model, arrays=arrays, notes=notes)
        try:
            res = run(p, feed, config)
        except ExecutionError as e:
            raise ExecutionError(f"{label}: {e}") from e
        info = res.info
        shapes = shapes or dict(res.shapes)
        for name, st in res.stats.items():
            if st is not None:
                m = Moments.from_stats(st)
                moments[name] = moments[name].merge(m) if name in moments else m
        sizes = [(n, nbytes(res.shapes.get(n), by_name[n].dtype, None if n in res.shapes else res.stats[n].count))
                 for n in res.stats if res.stats[n] is not None]
        for chunk in plan_chunks(sizes, budget):
            rewritten, probes = expose(model.inferred, [by_name[n] for n in chunk], stats=False, shapes=False, raw=True)
            session = create_session(rewritten, device=res.info.device, opt_level=res.info.opt_level)
            values, _ = run_bound(session, feed, list(dict.fromkeys(pr.raw_output for pr in probes if pr.raw_output)))
            for pr in probes:
                if pr.raw_output and values[pr.raw_output].dtype.kind in "biuf":
                    h = Histogram.from_array(values[pr.raw_output])
                    hists[pr.ref.name] = hists[pr.ref.name].merge(h) if pr.ref.name in hists else h
            del values, session
        if progress is not None:
            progress(k + 1, total)
    return DatasetResult(p, info, moments, hists, shapes, total, list(dict.fromkeys(notes)) + list(p.warnings))

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
            for pr in p.probes:
                n = pr.ref.name
                if pr.stats_output:
                    result_stats[n] = TensorStats.from_rows(out[pr.stats_output])
                if pr.shape_output:
                    shapes[n] = tuple(int(d) for d in out[pr.shape_output])
                if pr.raw_output:
                    arrays[n] = out[pr.raw_output]
                    if pr.stats_on_host or not stats:
                        result_stats.setdefault(n, TensorStats.from_array(arrays[n]) if arrays[n].dtype.kind in "biuf" else None)
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


# --- diff: two sides on the same inputs ------------------------------------------------------------


def diff(
    a_path: str | os.PathLike,
    b_path: str | os.PathLike | None = None,
    *,
    vs_device: str | None = None,
    vs_opt_level: str | None = None,
    vs_reference: bool = False,
    vs_npz: str | os.PathLike | None = None,
    selection: Selection | None = None,
    config: RunConfig | None = None,
    tolerance=None,
    per_tensor: dict | None = None,
    user_map: dict[str, str] | None = None,
    seed: int = 0,
    int_range: tuple[int, int] = (0, 100),
    shapes: dict[str, tuple[int, ...]] | None = None,
    files: dict[str, str] | None = None,
    arrays: dict[str, np.ndarray] | None = None,
    introduced: bool = True,
    max_memory: int | None = None,
    progress=None,
):
    """Compare model A against a reference B: another model, the same model on another device or
    optimisation level, onnx.reference, or saved activations. Returns a compare.diff.DiffResult."""
    from dataclasses import replace

    from onnxprobe.compare.diff import diff as _diff
    from onnxprobe.compare.sides import Side
    from onnxprobe.errors import UsageError
    from onnxprobe.stats.metrics import Tolerance

    modes = [b_path is not None, vs_device is not None, vs_opt_level is not None, vs_reference, vs_npz is not None]
    if sum(modes) != 1:
        raise UsageError("give exactly one reference: a second model B, --vs-device, --vs-opt-level, --vs-reference or --vs-npz")
    config = config or RunConfig()
    a_model = load(a_path)
    a = Side(str(a_path), a_model, "ort", config)
    if b_path is not None:
        b = Side(str(b_path), load(b_path), "ort", config)
    elif vs_device is not None:
        b = Side(str(a_path), a_model, "ort", replace(config, device=vs_device))
    elif vs_opt_level is not None:
        b = Side(str(a_path), a_model, "ort", replace(config, opt_level=vs_opt_level))
    elif vs_reference:
        b = Side(str(a_path), a_model, "reference", config)
    else:
        b = Side(str(vs_npz), a_model, "npz", config, npz=_feeds.read_npz(vs_npz))
    notes: list[str] = []
    feed = feeds(a_model, seed=seed, int_range=int_range, shapes=shapes, files=files, arrays=arrays, notes=notes)
    res = _diff(a, b, feed, selection or Selection(), tolerance or Tolerance(), per_tensor, user_map, introduced,
                max_memory=max_memory, progress=progress)
    res.notes[:0] = notes + list(a_model.warnings)
    return res


# --- graph surgery: inspect, mark, extract ---------------------------------------------------------------
# These work on a lazy model (external weights stay on disk until written), so models over 2 GB cost
# little memory. Each writes atomically beside OUT, at an IR version the installed onnxruntime reads, and
# only after onnx.checker accepted the temporary file.


@dataclass
class InspectResult:
    source: str
    file_bytes: int
    summary: object  # graph.summary.ModelSummary
    nodes: list  # graph.summary.NodeRow, in walk order
    warnings: list[str] = field(default_factory=list)


def inspect(path: str | os.PathLike) -> InspectResult:
    """What ``onnxprobe inspect`` shows: versions, inputs/outputs, weights, op histogram, nodes whose
    shapes inference could not find, subgraphs, external data, custom domains; and every node."""
    from pathlib import Path

    from onnxprobe.graph.external import load_lazy
    from onnxprobe.graph.summary import node_rows, summarize

    lazy = load_lazy(path, require_data=False)
    warnings: list[str] = [f"external data file missing: {f.path}" for f in lazy.external if not f.exists]
    inferred = infer_shapes(lazy.proto, warnings)
    rows = node_rows(lazy.proto, inferred)
    summary = summarize(lazy.proto, inferred, base_dir=lazy.base_dir, external=lazy.external, rows=rows)
    return InspectResult(str(path), Path(path).stat().st_size, summary, rows, warnings)


@dataclass
class SurgeryResult:
    """What ``mark`` or ``extract`` wrote."""

    source: str
    path: str  # the model written
    data_path: str | None  # its external data file (OUT.data), if any
    bytes: int  # model + data
    ir_version: int
    inputs: list  # graph.summary.TensorInfo of the written model's inputs
    outputs: list  # ... and outputs
    nodes: int  # nodes of the written main graph
    notes: list[str] = field(default_factory=list)


@dataclass
class MarkResult(SurgeryResult):
    marked: list = field(default_factory=list)  # graph.mark.Marked, one per exposed tensor
    types: dict = field(default_factory=dict)  # output name -> graph.summary.TensorInfo as written


@dataclass
class ExtractResult(SurgeryResult):
    unused_inputs: list[str] = field(default_factory=list)


def _observe_types(model: onnx.ModelProto, lazy, names: list[str], feed_kwargs: dict, notes: list[str],
                   skip_empty: set[str] = frozenset()) -> dict[str, onnx.TypeProto]:
    """Types of ``names`` (graph inputs or outputs of ``model``) seen in one run on seeded random (or
    given) inputs. Dimensions are written only when every model input has a fixed shape; otherwise only
    the rank. An empty value of a name in ``skip_empty`` (carried out of an If branch that did not run)
    says nothing. Returns what it could type; a failed run is a note, not an error."""
    from onnxprobe.errors import OnnxProbeError, UsageError
    from onnxprobe.graph.external import materialize

    run_notes: list[str] = []
    feed = _feeds.make_feeds(lazy.proto, notes=run_notes, **feed_kwargs)
    static = all(s.shape is not None and all(isinstance(d, int) and d > 0 for d in s.shape)
                 for s in _feeds.input_specs(lazy.proto))
    values = {n: feed[n] for n in names if n in feed}
    want = [n for n in names if n not in values]
    if want:
        try:
            session = create_session(materialize(model, lazy.base_dir), device="cpu", opt_level="off")
            got, _ = run_bound(session, feed, want)
            values.update(got)
        except UsageError:
            raise
        except OnnxProbeError as e:
            hint = " (dynamic dimensions were set to 1: give real sizes with --shape NAME=DIMS)" if any("set to 1" in n for n in run_notes) else ""
            notes.append(f"could not run the model to find the types shape inference left unknown{hint}: {e}")
    types = {}
    for n, v in values.items():
        if n in skip_empty and np.size(v) == 0:
            continue
        try:
            elem = onnx.helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype)
        except Exception:  # noqa: BLE001
            continue
        dims = list(np.shape(v)) if static else [None] * np.ndim(v)
        types[n] = onnx.helper.make_tensor_type_proto(elem, dims)
    if types:
        how = "" if static else " (their dimensions are left unknown: the model's inputs are dynamic)"
        notes.append(f"{len(types)} type(s) shape inference could not find were taken from a run on "
                     f"{'the given' if feed_kwargs.get('files') or feed_kwargs.get('arrays') else 'seeded random'} inputs{how}: "
                     + ", ".join(list(types)[:5]) + (" ..." if len(types) > 5 else ""))
    return types


def _write_checked(model: onnx.ModelProto, lazy, out, source, notes: list[str]):
    """Lower the IR version for the installed onnxruntime, write atomically (weights in OUT.data when the
    input kept them outside too, or past 2 GB), and let onnx.checker see the temporary file before it
    replaces OUT."""
    from onnxprobe.errors import ModelError
    from onnxprobe.graph.external import check_model_file, write_model
    from onnxprobe.runtime.compat import max_ir_version

    top = max_ir_version()
    if model.ir_version > top:
        notes.append(f"IR version {model.ir_version} lowered to {top}, the newest the installed onnxruntime reads")
        model.ir_version = top  # our own copy, made by the pass that produced it

    def check(tmp):
        err = check_model_file(tmp)
        if err is None:
            return
        src_err = check_model_file(source)
        if src_err is None:
            raise ModelError(f"the model to write fails onnx.checker ({err}); nothing written. "
                             "This is a bug in onnxprobe: please report it")
        notes.append(f"written although onnx.checker rejects it, as it rejects the input model: {src_err}")

    return write_model(model, out, base_dir=lazy.base_dir, external=True if lazy.external else None, check=check,
                       protect=[f.path for f in lazy.external])


def _result(cls, model: onnx.ModelProto, written, source, notes, **extra):
    from onnxprobe.graph.summary import all_types, type_info

    types = all_types(model)
    inits = {t.name for t in model.graph.initializer}
    return cls(
        source=str(source), path=str(written.path), data_path=str(written.data_path) if written.data_path else None,
        bytes=written.bytes, ir_version=model.ir_version,
        inputs=[type_info(vi.name, types.get(vi.name)) for vi in model.graph.input if vi.name not in inits],
        outputs=[type_info(vi.name, types.get(vi.name)) for vi in model.graph.output],
        nodes=len(model.graph.node), notes=notes, **extra,
    )


def mark(
    path: str | os.PathLike,
    out: str | os.PathLike,
    selection: Selection | None = None,
    *,
    stats: bool = False,
    seed: int = 0,
    int_range: tuple[int, int] = (0, 100),
    shapes: dict[str, tuple[int, ...]] | None = None,
    files: dict[str, str] | None = None,
    arrays: dict[str, np.ndarray] | None = None,
) -> MarkResult:
    """Write a copy of the model at ``path`` to ``out`` with the selected tensors (or, with ``stats``,
    their in-graph statistics rows) as extra, typed graph outputs. Where shape inference cannot type an
    output, the model runs once on seeded random inputs (or the given ones) to find it."""
    from onnxprobe.graph.external import load_lazy
    from onnxprobe.graph.io import check_output_path
    from onnxprobe.graph.mark import in_if_branch, mark as mark_pass, record, untyped, with_output_types, without_outputs
    from onnxprobe.graph.summary import all_types, type_info

    check_output_path(out, source=path)
    lazy = load_lazy(path)
    notes: list[str] = []
    inferred = infer_shapes(lazy.proto, notes)
    refs = select(inferred, selection or Selection())
    model, marked = mark_pass(inferred, refs, stats=stats, warnings=notes)
    del inferred
    missing = untyped(model, [m.output for m in marked if m.added])
    if missing:
        in_if = in_if_branch(lazy.proto)
        found = _observe_types(model, lazy, missing, dict(seed=seed, int_range=int_range, shapes=shapes, files=files, arrays=arrays), notes,
                               skip_empty={m.output for m in marked if m.ref.name in in_if})
        model = with_output_types(model, found)
        failed = [n for n in missing if n not in found]
        if failed:
            model = without_outputs(model, set(failed))
            marked = [m for m in marked if m.output not in set(failed)]
            notes.append(f"{len(failed)} tensor(s) left out: neither shape inference nor the run (an If branch that did "
                         "not run, or a failed run) tells their type: " + ", ".join(failed[:5]) + (" ..." if len(failed) > 5 else ""))
    model = record(model, marked)
    written = _write_checked(model, lazy, out, path, notes)
    types = all_types(model)
    return _result(MarkResult, model, written, path, notes, marked=marked,
                   types={m.output: type_info(m.output, types.get(m.output)) for m in marked})


def extract(
    path: str | os.PathLike,
    out: str | os.PathLike,
    inputs: list[str] | None,
    outputs: list[str] | None,
    *,
    seed: int = 0,
    int_range: tuple[int, int] = (0, 100),
    shapes: dict[str, tuple[int, ...]] | None = None,
    files: dict[str, str] | None = None,
    arrays: dict[str, np.ndarray] | None = None,
) -> ExtractResult:
    """Write the subgraph of the model at ``path`` between the tensors ``inputs`` and ``outputs`` to
    ``out`` (names may be comma-separated; ``inputs`` defaults to the model's inputs, ``outputs`` to its
    outputs). Raises UsageError when the inputs do not cut the outputs off from the rest of the graph."""
    from onnxprobe.errors import ModelError
    from onnxprobe.graph.external import load_lazy
    from onnxprobe.graph.extract import cut, extract as extract_pass
    from onnxprobe.graph.io import check_output_path
    from onnxprobe.graph.mark import mark as mark_pass
    from onnxprobe.graph.summary import all_types, known

    check_output_path(out, source=path)
    lazy = load_lazy(path)
    notes: list[str] = []
    inferred = infer_shapes(lazy.proto, notes)
    c = cut(lazy.proto, inputs, outputs)
    types = all_types(inferred)
    boundary = list(dict.fromkeys(c.inputs + c.outputs))
    need = [n for n in boundary if not known(types.get(n))]
    if need:
        refs = [r for r in select(inferred, Selection(all=True, include_constants=True)) if r.name in need]
        probe_model, _ = mark_pass(inferred, refs)
        found = _observe_types(probe_model, lazy, need, dict(seed=seed, int_range=int_range, shapes=shapes, files=files, arrays=arrays), notes)
        left = [n for n in need if n not in found]
        if left:
            raise ModelError(f"cannot find the type of {', '.join(repr(n) for n in left[:5])}: shape inference does not "
                             "know it and the model could not be run to see it (give inputs with --input/--shape)")
        types.update(found)
    del inferred
    sub = extract_pass(lazy.proto, c, types)
    if c.unused_inputs:
        notes.append(f"--inputs {', '.join(c.unused_inputs)}: not needed to compute the outputs (kept as unused inputs)")
    written = _write_checked(sub, lazy, out, path, notes)
    return _result(ExtractResult, sub, written, path, notes, unused_inputs=c.unused_inputs)


# ---------------------------------------------------------------------------------------------------
# Gradients (``onnxprobe grad``): attach a loss and a backward graph (onnxprobe.autodiff), run forward and
# backward in one onnxruntime session with in-graph statistics of every gradient, check them against
# finite differences, export the backward model.


# forward + backward run with every onnxruntime graph optimisation unless the caller says otherwise: the
# gradients are the same, and layout (NCHWc) and fusions make the Conv-heavy backward graphs several times faster
GRAD_OPT_LEVEL = "all"


@dataclass
class GradSpec:
    """The loss: ``output`` (default: the model's first output) and ``loss`` (sum | mean | mse |
    cross-entropy | output-grad) with its ``target`` / ``labels`` / ``output_grad`` array; ``wrt``:
    names or globs of the tensors to differentiate (default: weights and probed activations)."""

    output: str | None = None
    loss: str = "sum"
    target: np.ndarray | None = None
    labels: np.ndarray | None = None
    output_grad: np.ndarray | None = None
    wrt: tuple[str, ...] = ()

    @property
    def extra(self) -> np.ndarray | None:
        return {"mse": self.target, "cross-entropy": self.labels, "output-grad": self.output_grad}.get(self.loss)


@dataclass
class GradPlan:
    """The model with its loss and backward graph (``backward.model``: outputs = loss, then gradients)."""

    backward: object  # onnxprobe.autodiff.engine.Backward
    loss: object  # onnxprobe.autodiff.loss.Loss
    targets: list  # [onnxprobe.autodiff.select.Target], topological order
    forward: onnx.ModelProto  # forward graph + loss (no backward), shapes inferred
    extra_feed: dict[str, np.ndarray]
    source: str
    warnings: list[str] = field(default_factory=list)

    @property
    def grads(self) -> dict[str, str]:
        return self.backward.grads


def _pick_output(model: onnx.ModelProto, name: str | None) -> str:
    from onnxprobe.errors import UsageError

    outs = [o.name for o in model.graph.output]
    if name is None:
        if not outs:
            raise UsageError("the model has no outputs")
        return outs[0]
    if name not in outs:
        raise UsageError(f"--output {name!r}: not an output of the model; its outputs are: {', '.join(outs)}")
    return name


def _with_input_shapes(model: onnx.ModelProto, feed: dict[str, np.ndarray]) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.value_info[:]
    for vi in out.graph.input:
        if vi.name in feed and vi.type.HasField("tensor_type"):
            shp = vi.type.tensor_type.shape
            shp.ClearField("dim")
            for d in np.shape(feed[vi.name]):
                shp.dim.add().dim_value = int(d)
    return out


from onnxprobe.errors import OnnxProbeError  # noqa: E402


def _runtime_shapes(model: onnx.ModelProto, feed: dict[str, np.ndarray], warnings: list[str], *,
                    ranks_only: bool = False) -> onnx.ModelProto:
    """Fill in the types of main-graph tensors that shape inference left unknown (e.g. a Reshape whose
    shape is computed) from one forward run."""
    from onnxprobe.graph.shapes import static_shape, value_types

    types = value_types(model)
    missing = [o for n in model.graph.node for o in n.output
               if o and static_shape(types.get(o)) is None and n.op_type not in ("If", "Loop", "Scan")]
    if not missing:
        return model
    refs = [r for r in select(model, Selection(all=True, include_constants=True)) if r.name in set(missing)]
    exposed, probes = expose(model, refs, stats=False, shapes=False, raw=True)
    try:
        out, _ = run_bound(create_session(exposed), feed, [p.raw_output for p in probes if p.raw_output])
    except ExecutionError as e:
        warnings.append(f"could not run the model to learn the shapes inference missed ({e})")
        return model
    m = onnx.ModelProto()
    m.CopyFrom(model)
    known = {vi.name for vi in m.graph.value_info}
    for p in probes:
        if p.raw_output in out:
            a = out[p.raw_output]
            dims = [None] * a.ndim if ranks_only else list(a.shape)
            vi = onnx.helper.make_tensor_value_info(p.ref.name, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), dims)
            if p.ref.name in known:
                for old in m.graph.value_info:
                    if old.name == p.ref.name:
                        old.CopyFrom(vi)
            else:
                m.graph.value_info.append(vi)
    return m


def grad_plan(model: Model, spec: GradSpec | None = None, selection: Selection | None = None, *,
              feed: dict[str, np.ndarray] | None = None, names: list[str] | None = None,
              unsupported: str = "raise") -> GradPlan:
    """Attach the loss and the backward graph. With ``feed``, shapes are re-inferred for those input
    shapes first (static shapes make a smaller backward graph); without it the backward graph keeps the
    model's dynamic dimensions (what ``--export`` writes). ``names``: exact tensors to differentiate,
    instead of ``selection`` and ``spec.wrt``; ``unsupported="skip"``: an op without a gradient rule stops
    the gradient (the tensors behind it get none, with a warning) instead of raising."""
    from onnxprobe.autodiff.engine import _all_names, attach_backward, model_opset
    from onnxprobe.autodiff.loss import attach_loss
    from onnxprobe.autodiff.select import named_targets, targets

    spec = spec or GradSpec()
    warnings = list(model.warnings)
    output = _pick_output(model.proto, spec.output)
    base = infer_shapes(_with_input_shapes(model.proto, feed), warnings) if feed is not None else model.inferred
    if feed is not None:
        base = _runtime_shapes(base, feed, warnings)
    else:  # keep the dynamic dimensions, learn only the missing ranks (from a run on default inputs)
        try:
            base = _runtime_shapes(base, _feeds.make_feeds(model.proto, notes=[]), warnings, ranks_only=True)
        except OnnxProbeError:
            pass
    tg = named_targets(base, names) if names is not None else targets(base, selection, tuple(spec.wrt))
    fwd = onnx.ModelProto()
    fwd.CopyFrom(base)
    loss = attach_loss(fwd, output, spec.loss, extra=spec.extra, opset=model_opset(fwd), names=_all_names(fwd))
    fwd = infer_shapes(fwd, warnings)
    bw = attach_backward(fwd, loss.seeds, [t.ref.name for t in tg], outputs=[loss.loss], unsupported=unsupported)
    if bw.stopped:
        warnings.append(f"no gradient rule for {len(bw.stopped)} op(s) on the way, the gradient stops there: "
                        f"{', '.join(bw.stopped[:3])}{' …' if len(bw.stopped) > 3 else ''}")
    for name in bw.unused if names is None else ():
        warnings.append(f"{name}: the loss does not depend on it; no gradient")
    if spec.loss in ("sum", "mean"):
        prod = next((n for n in base.graph.node if output in n.output), None)
        if prod is not None and prod.op_type == "Softmax":
            warnings.append(f"output {output!r} is a Softmax: its {spec.loss} is constant, so every gradient is ~0; "
                            "use --loss cross-entropy --labels, --loss mse --target or --output-grad")
    extra = {loss.input: spec.extra} if loss.input else {}
    return GradPlan(bw, loss, [t for t in tg if t.ref.name in bw.grads], fwd, extra, model.source, warnings)


def export_backward(model: Model, out: str | os.PathLike, spec: GradSpec | None = None,
                    selection: Selection | None = None) -> GradPlan:
    """Write the model with its backward graph: inputs = the model's inputs (+ target / labels / output
    gradient), outputs = the loss and the gradients (``<tensor>_grad``); weights stay initializers."""
    from onnxprobe.graph.io import save_model

    gp = grad_plan(model, spec, selection)
    m = gp.backward.model
    m.producer_name = m.producer_name or "onnxprobe"
    doc = f"onnxprobe backward graph: loss {gp.loss.kind} of {gp.loss.output}"
    m.doc_string = (m.doc_string + "\n" + doc) if m.doc_string else doc
    save_model(m, out)
    return gp


@dataclass
class GradRow:
    target: object  # onnxprobe.autodiff.select.Target
    grad: str  # the gradient tensor's name in the backward model
    stats: TensorStats | None
    value_norm: float | None  # |tensor| (weights, inputs, activations)
    check: dict | None = None  # finite-difference check: error, tolerance, ok

    @property
    def name(self) -> str:
        return self.target.ref.name

    @property
    def norm(self) -> float | None:
        return None if self.stats is None else float(np.sqrt(self.stats.sumsq))

    @property
    def ratio(self) -> float | None:
        if self.norm is None or not self.value_norm:
            return None
        return self.norm / self.value_norm


@dataclass
class GradResult:
    plan: GradPlan
    rows: list[GradRow]
    loss: float
    info: RunInfo
    notes: list[str] = field(default_factory=list)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # forward tensor name -> gradient (save/check)
    check_mode: str | None = None  # "float64", "float64 (float32 gradients)" or "float32"


def _norm(a) -> float:
    a = np.asarray(a, dtype=np.float64)
    return float(np.sqrt(np.sum(a * a)))


def grad(
    path: str | os.PathLike,
    selection: Selection | None = None,
    config: RunConfig | None = None,
    spec: GradSpec | None = None,
    *,
    save: bool = False,
    check: bool = False,
    seed: int = 0,
    int_range: tuple[int, int] = (0, 100),
    shapes: dict[str, tuple[int, ...]] | None = None,
    files: dict[str, str] | None = None,
    arrays: dict[str, np.ndarray] | None = None,
) -> GradResult:
    """Load a model, attach a loss and its backward graph, run forward and backward in one session and
    return the statistics of every gradient: what ``onnxprobe grad`` does."""
    from onnxprobe.autodiff.select import weight_value

    spec = spec or GradSpec()
    config = config or RunConfig(opt_level=GRAD_OPT_LEVEL)
    model = load(path)
    notes: list[str] = []
    feed = feeds(model, seed=seed, int_range=int_range, shapes=shapes, files=files, arrays=arrays, notes=notes)
    gp = grad_plan(model, spec, selection, feed=feed)
    bw = gp.backward
    refs = []
    for t in gp.targets:
        r = t.ref
        refs.append(TensorRef(name=bw.grads[r.name], node=r.node, op_type=r.op_type, index=r.index, dtype=r.dtype,
                              shape=r.shape, direction="backward", grad_of=r.name))
    acts = [t.ref for t in gp.targets if t.kind == "activation"]
    scored = onnx.ModelProto()
    scored.CopyFrom(bw.model)
    del scored.graph.output[1:]  # gradients leave the device as statistics (or raw, when asked)
    raw = {r.name for r in refs} | ({r.name for r in acts} if check else set()) if (save or check) else False
    exposed, probes = expose(scored, refs + acts, stats=True, raw=raw, warnings=gp.warnings, nonfinite="deferred")
    result = run(ProbePlan(exposed, probes, gp.source, gp.warnings, base=scored), {**feed, **gp.extra_feed}, config, notes=notes)
    loss = float(np.asarray(result.outputs[gp.loss.loss]).reshape(-1)[0])
    rows, saved = [], {}
    for t, ref in zip(gp.targets, refs):
        name = t.ref.name
        if t.kind == "weight":
            v = weight_value(model.proto, name)
            vn = _norm(v) if v is not None else None
        elif t.kind == "input":
            vn = _norm(feed[name]) if name in feed else None
        else:
            st = result.stats.get(name)
            vn = float(np.sqrt(st.sumsq)) if st is not None else None
        rows.append(GradRow(t, ref.name, result.stats.get(ref.name), vn))
        if ref.name in result.arrays:
            saved[name] = result.arrays[ref.name]
    res = GradResult(gp, rows, loss, result.info, list(result.notes), saved if (save or check) else {})
    if check:
        values = {a.name: result.arrays[a.name] for a in acts if a.name in result.arrays}
        res.check_mode = grad_check(model, gp, feed, res, device=result.info.device, seed=seed, values=values)
    return res


def grad_check(model: Model, gp: GradPlan, feed: dict[str, np.ndarray], result: GradResult, *,
               device: str = "cpu", seed: int = 0, values: dict[str, np.ndarray] | None = None) -> str:
    """Check each gradient in ``result`` against central finite differences of the loss along random
    directions: one weighted by the gradient (v = g u |t| / rms(t), u uniform in [0.5, 1.5]) and, in
    float64, a Gaussian one. Fills ``row.check`` and returns the precision used.

    float64: the forward graph (and, when onnxruntime can, the backward graph) converted to float64,
    step h = 1e-6 RMS(tensor); tolerance 1e-6 (1e-3 when the gradients themselves are float32).
    float32 (onnxruntime lacks a double kernel for some op, e.g. Conv): Richardson-extrapolated central
    differences with h = 1e-3 RMS(tensor); tolerance 5e-2, the level of float32 rounding in the loss over
    such a step (a wrong rule is off by far more; the rule tests check each rule to 1e-6 in float64). Differences below the noise floor of the loss (machine epsilon x |L| / h) count as 0.

    Relu and MaxPool are not differentiable everywhere: a Relu output's zeros are ties of the MaxPool that
    reads them. Directions therefore leave the tensor's exact zeros alone; three step sizes are tried and
    the best agreement kept; and where the one-sided differences disagree (a kink), a gradient between
    them passes.
    """
    from onnxprobe.autodiff.check import DELTA, perturbable, to_float64
    from onnxprobe.autodiff.select import weight_value
    from onnxprobe.errors import ExecutionError
    from onnxprobe.graph.shapes import value_types

    from onnxprobe.autodiff.engine import shaped_types

    types = shaped_types(gp.forward)
    tensors = {}
    for row in result.rows:
        g = result.arrays.get(row.name)
        tp = types.get(row.name)
        if g is None or tp is None:
            continue
        tensors[row.name] = (tp.tensor_type.elem_type, list(g.shape))
    pm = perturbable(gp.forward, gp.loss.loss, tensors)
    mode, session, grads64 = "float32", None, None
    try:
        pm64 = to_float64(pm)
        session = create_session(pm64, device=device)
        mode = "float64"
    except ExecutionError:
        session = create_session(pm, device=device)
    base = {**feed, **gp.extra_feed}
    if mode == "float64":
        base = {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in base.items()}
        grads64 = _grads_float64(gp, base, device)
        if grads64 is None:
            mode = "float64 (float32 gradients)"
    dt = np.float64 if mode.startswith("float64") else np.float32
    zeros = {DELTA + n: np.zeros(s, dt) for n, (_, s) in tensors.items()}
    loss_name = gp.loss.loss

    def L(name, delta) -> float:
        f = dict(base)
        f.update(zeros)
        f[DELTA + name] = delta.astype(dt)
        out, _ = run_bound(session, f, [loss_name])
        return float(np.asarray(out[loss_name], np.float64).reshape(-1)[0])

    L0 = L(next(iter(tensors)), np.zeros(tensors[next(iter(tensors))][1])) if tensors else 0.0
    rng = np.random.default_rng(seed + 12345)
    eps = np.finfo(dt).eps
    tol = {"float64": 1e-6, "float64 (float32 gradients)": 1e-3, "float32": 5e-2}[mode]
    for row in result.rows:
        if row.name not in tensors:
            continue
        g = (grads64 or {}).get(row.name, result.arrays[row.name]).astype(np.float64)
        if row.target.kind == "weight":
            val = weight_value(model.proto, row.name)
            rms = float(np.sqrt(np.mean(np.square(val, dtype=np.float64)))) if val is not None and val.size else 1.0
        elif row.name in feed:
            rms = float(np.sqrt(np.mean(np.square(feed[row.name], dtype=np.float64))))
        else:
            st = row.value_norm
            rms = (st / np.sqrt(max(g.size, 1))) if st else 1.0
        h0 = (1e-6 if dt == np.float64 else 1e-3) * max(rms, 0.1)
        worst, detail = 0.0, None
        support = g != 0
        val = values.get(row.name) if values else (feed.get(row.name) if row.target.kind == "input" else None)
        if row.target.kind == "weight":
            val = weight_value(model.proto, row.name)
        if val is not None and np.shape(val) == g.shape and np.any(val != 0):
            support = support & (np.asarray(val) != 0)
        # relative perturbations where the values are known: a variance stays positive, zeros stay put
        rel = 1.0
        if val is not None and np.shape(val) == g.shape and np.any(val != 0):
            rel = np.abs(np.asarray(val, np.float64)) / max(rms, 1e-30)
        directions = [g * rng.uniform(0.5, 1.5, g.shape) * support * rel]
        if dt == np.float64:  # in float32 a Gaussian direction's signal drowns in rounding noise
            directions.append(rng.standard_normal(g.shape) * support * rel)
        for v in directions:
            v = v / max(float(np.sqrt(np.mean(v * v))), 1e-300)
            an = float(np.sum(g * v))
            best = None
            # kinks (Relu at 0, MaxPool ties) favour small steps, float32 rounding favours large ones:
            # try three steps and keep the best agreement
            for h in (h0, h0 / 10, h0 * 10, h0 / 100, h0 / 1000):
                lp, lm = L(row.name, h * v), L(row.name, -h * v)
                d1 = (lp - lm) / (2 * h)
                if dt == np.float64:
                    fd = d1
                else:
                    d2 = (L(row.name, 0.5 * h * v) - L(row.name, -0.5 * h * v)) / h
                    fd = (4 * d2 - d1) / 3
                floor = 50 * eps * max(abs(L0), 1e-30) / h
                big = max(abs(fd), abs(an))
                err = 0.0 if big <= floor else abs(fd - an) / big
                if not np.isfinite(err):
                    err = float("inf")
                kink = False
                if err > tol:
                    # at a kink the one-sided derivatives differ, and a valid (sub)gradient lies between them
                    dp, dm = (lp - L0) / h, (L0 - lm) / h
                    lo, hi = min(dp, dm), max(dp, dm)
                    if hi - lo > tol * big and lo - tol * big <= an <= hi + tol * big:
                        err, kink = 0.0, True
                if best is None or err < best[0]:
                    best = (err, fd, h, kink)
                if err <= tol:
                    break
            if detail is None or best[0] >= worst:
                worst, detail = best[0], (float(best[1]), an, float(best[2]), best[3])
        row.check = {"error": float(worst), "tolerance": tol, "ok": bool(worst <= tol), "fd": detail[0], "grad_dot": detail[1],
                     "step": detail[2], "kink": detail[3], "precision": mode}
    return mode


def _grads_float64(gp: GradPlan, feed64: dict[str, np.ndarray], device: str) -> dict[str, np.ndarray] | None:
    """The gradients recomputed by the float64 backward graph, or None when onnxruntime cannot run it."""
    from onnxprobe.autodiff.check import to_float64
    from onnxprobe.errors import ExecutionError

    from onnxprobe.autodiff.engine import attach_backward
    from onnxprobe.errors import ModelError

    try:
        fwd = infer_shapes(to_float64(gp.forward))
        bw = attach_backward(fwd, gp.loss.seeds, list(gp.grads), outputs=[gp.loss.loss])
        s = create_session(bw.model, device=device)
        names = list(bw.grads.values())
        out, _ = run_bound(s, feed64, names)
    except (ExecutionError, ModelError):
        return None
    return {t: out[g] for t, g in bw.grads.items()}


# --- diff --grad: the gradients of two models, paired and measured like their activations --------------


def diff_grad(
    a_path: str | os.PathLike,
    b_path: str | os.PathLike,
    spec: GradSpec | None = None,
    *,
    selection: Selection | None = None,
    config: RunConfig | None = None,
    tolerance=None,
    per_tensor: dict | None = None,
    user_map: dict[str, str] | None = None,
    seed: int = 0,
    int_range: tuple[int, int] = (0, 100),
    shapes: dict[str, tuple[int, ...]] | None = None,
    files: dict[str, str] | None = None,
    arrays: dict[str, np.ndarray] | None = None,
    max_memory: int | None = None,
    progress=None,
):
    """Compare the gradients of model A with those of model B (``onnxprobe diff --grad``): both get the
    loss ``spec`` and the same inputs; their weight, input and activation gradients are paired by the
    diff matching (names, QDQ / QOperator keys, node names, structure; see compare.gradients) and measured
    with the diff metrics. ``spec.wrt`` (names or globs of forward tensors) keeps only those gradients;
    ``user_map`` and ``per_tensor`` take forward tensor names (or gradient names). A weight gradient that
    fails the tolerance fails the comparison (``outputs_failed``). Returns a compare.diff.DiffResult."""
    import fnmatch
    from dataclasses import replace

    from onnxprobe.compare.diff import check_inputs
    from onnxprobe.compare.diff import diff as _diff
    from onnxprobe.compare.gradients import SUFFIX, GradSide, explain_unmatched, grad_reason
    from onnxprobe.compare.sides import Side
    from onnxprobe.errors import UsageError
    from onnxprobe.match.observe import Observation
    from onnxprobe.stats.metrics import Tolerance

    spec = spec or GradSpec()
    config = config or RunConfig(opt_level=GRAD_OPT_LEVEL)
    a_model, b_model = load(a_path), load(b_path)
    check_inputs(Side(str(a_path), a_model), Side(str(b_path), b_model))
    notes: list[str] = []
    feed = feeds(a_model, seed=seed, int_range=int_range, shapes=shapes, files=files, arrays=arrays, notes=notes)
    side_spec = replace(spec, wrt=())
    a = GradSide(str(a_path), a_model, "grad", config, spec=side_spec)
    b = GradSide(str(b_path), b_model, "grad", config, spec=side_spec)
    for side in (a, b):
        side.prepare(feed)
    if spec.wrt:
        def wanted(o) -> bool:
            names = [n[: -len(SUFFIX)] for n in (o.name, o.key) if n.endswith(SUFFIX)]
            return any(fnmatch.fnmatchcase(n, pat) for n in names for pat in spec.wrt)

        for side in (a, b):
            side._observation = Observation([o for o in side.observation.observables if wanted(o)], [], {})
        if not a.observation.observables:
            raise UsageError(f"--wrt {', '.join(spec.wrt)}: no gradient of model A matches")

    def as_grad(name: str) -> str:
        return name if name.endswith(SUFFIX) else name + SUFFIX

    gmap = {as_grad(k): as_grad(v) for k, v in (user_map or {}).items()} or None
    per = {as_grad(k): v for k, v in (per_tensor or {}).items()}
    res = _diff(a, b, feed, selection or Selection(), tolerance or Tolerance(), per, gmap, introduced=False,
                max_memory=max_memory, progress=progress)
    for r in res.results:
        r.pair.reason = grad_reason(r.pair)
    explain_unmatched(res.matching, a)
    for side in (a, b):  # the losses, also when no pair needed a value
        if side.loss is None:
            side.values([], feed)
    quantized = any(o.kind != "float" for o in a.observation.observables + b.observation.observables)
    res.measured = (f"gradients of the {spec.loss} loss" + (" (QuantizeLinear / DequantizeLinear: straight-through)"
                                                            if quantized else ""))
    res.grad = {"loss": spec.loss, "output_a": a.plan.loss.output, "output_b": b.plan.loss.output,
                "loss_a": a.loss, "loss_b": b.loss}
    res.notes[:0] = [n for n in notes + list(a_model.warnings) + list(b_model.warnings) if n not in res.notes]
    return res
