"""Expose chosen tensors as graph outputs: their in-graph statistics, runtime shape, or raw values.

Contract: ``expose(model, refs, ...)`` returns a *new* model and one ``Probe`` per ref; the input model is
never touched, and the nodes of the original graph are left as they are (the pass only appends nodes and
outputs), so the model's own outputs are bitwise unchanged when optimisations are off. A Constant's
``sparse_value`` is probed through a dense copy of it (a Constant node added, densified on the host): nodes
read it dense, and as an output onnxruntime would return a SparseTensor, which no statistics node takes.

Statistics are computed in the graph, next to the tensor, so only a [1, 11] float64 row per tensor leaves
the device (layout: ``onnxprobe.stats.tensor_stats.ROW``). Tensors inside If / Loop / Scan bodies are
lifted out level by level: each enclosing body gains an output and its node a matching output; the other
If branch returns a placeholder (the identity row for statistics, an empty tensor for raw values); the
per-iteration rows that a Loop or Scan stacks are merged back into one row in the parent graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxprobe.errors import ModelError
from onnxprobe.graph.builder import add_stats_import, all_names, rename_output, stats_opset
from onnxprobe.graph.carried_types import (
    laid_out, loop_depth, loosen, rank_only, retyped, stacks, with_leading_dim, with_leading_dims,
)
from onnxprobe.graph.densify import dense_array
from onnxprobe.graph.shapes import own_type, value_types
from onnxprobe.graph.stats_nodes import (
    IDENTITY_ROW, MIN_OPSET, ROW_WIDTH, UNSUPPORTED_STATS_DTYPES, StatsBuilder,
)
from onnxprobe.graph.summary import all_types, not_a_tensor, sparse_values
from onnxprobe.graph.walk import NodeSite, all_graphs, walk
from onnxprobe.types import Probe, TensorRef

__all__ = ["expose", "unsure_stack", "STATS_PREFIX", "SHAPE_PREFIX", "RAW_PREFIX"]

STATS_PREFIX = "onnxprobe.stats:"
SHAPE_PREFIX = "onnxprobe.shape:"
RAW_PREFIX = "onnxprobe.raw:"
EXTREMES_PREFIX = "onnxprobe.extremes:"  # an int64 / uint64 tensor's exact [min, max]


def _graph_attr(node: onnx.NodeProto, attr: str) -> onnx.GraphProto:
    for a in node.attribute:
        if a.name == attr:
            return a.g
    raise KeyError(attr)  # pragma: no cover


def _pad_outputs(node: onnx.NodeProto, body: onnx.GraphProto) -> None:
    """Make the node list one output per body output (trailing optional outputs may be omitted)."""
    want = len(body.output) - (1 if node.op_type == "Loop" else 0)
    while len(node.output) < want:
        node.output.append("")


def unsure_stack(ref) -> bool:
    """Whether a tensor's values, stacked one per Loop/Scan iteration to leave the body, may not stack: it
    lies in a body and its shape is not fixed, or it lies in an If branch there (empty when not taken)."""
    inside = any(s.endswith("/body") for s in ref.scope)
    return inside and (any(not s.endswith("/body") for s in ref.scope) or ref.shape is None
                       or not all(isinstance(d, int) for d in ref.shape))


@dataclass
class _Rewrite:
    """One ``expose`` call's working state, shared by its steps: ``out``, the copy being rewritten (never
    the caller's model), indexes over it taken before any node was added, and what the steps keep up as
    they append nodes and outputs. Steps only append to ``out``: nothing the model had is edited or removed
    (but the outputs of the If / Loop / Scan nodes and bodies that ``_lift`` carries tensors through)."""

    out: onnx.ModelProto
    opset: int
    warnings: list[str]
    producer: dict[tuple, NodeSite]  # by scope and name: sibling bodies may each name a tensor 'o' (``select`` keeps them apart)
    by_name: dict[str, NodeSite]
    types: dict[str, onnx.TypeProto]
    every_type: dict[str, onnx.TypeProto]
    # a Constant's sparse_value: nodes read it dense, but as an output onnxruntime returns a SparseTensor
    sparse: set[str]
    names: set[str]  # every name in the model, the added ones too (shared with each StatsBuilder)
    top_outputs: set[str]  # the main graph's output names, kept up as outputs are appended
    builders: dict[int, StatsBuilder] = field(default_factory=dict)
    # a body's output and input names, kept up as outputs are appended (rebuilt per lift, they made
    # exposing large bodies quadratic); the graph is held beside them, so that its id stays its own
    ends: dict[int, tuple[onnx.GraphProto, set[str]]] = field(default_factory=dict)

    @classmethod
    def of(cls, model: onnx.ModelProto, opset: int, warnings: list[str]) -> _Rewrite:
        """A copy of ``model`` and its indexes; ``model`` itself is only read."""
        out = onnx.ModelProto()
        out.CopyFrom(model)
        sites = walk(out)
        producer = {(s.scope, o): s for s in sites for o in s.node.output if o}
        by_name = {o: s for s in sites for o in s.node.output if o}
        types = value_types(out)
        every_type = all_types(out)
        sparse = {t for g in all_graphs(out.graph) for t in sparse_values(g)}
        names = all_names(out)
        return cls(out, opset, warnings, producer, by_name, types, every_type, sparse, names,
                   {o.name for o in out.graph.output})

    def builder(self, g: onnx.GraphProto) -> StatsBuilder:
        """The one StatsBuilder that appends nodes to ``g`` (made on first use)."""
        if id(g) not in self.builders:
            self.builders[id(g)] = StatsBuilder(g, self.opset, self.names)
        return self.builders[id(g)]

    def add_top_output(self, name: str, t: onnx.TypeProto | None) -> None:
        """Make ``name`` an output of the main graph (of type ``t`` where known), unless it already is."""
        if name in self.top_outputs:
            return
        vi = onnx.ValueInfoProto(name=name)
        if t is not None:
            vi.type.CopyFrom(t)
        self.out.graph.output.append(vi)
        self.top_outputs.add(name)

    def ends_of(self, g: onnx.GraphProto) -> set[str]:
        """The input and output names of body ``g`` (kept up by whoever appends an output to it)."""
        if id(g) not in self.ends:
            self.ends[id(g)] = (g, {o.name for o in g.output} | {i.name for i in g.input})
        return self.ends[id(g)][1]


def expose(
    model: onnx.ModelProto,
    refs: list[TensorRef],
    *,
    stats: bool = True,
    shapes: bool = True,
    raw: bool | set[str] = False,
    warnings: list[str] | None = None,
    nonfinite: str = "in-graph",
    host: set[str] | frozenset = frozenset(),
    known: dict[str, tuple] | None = None,
    count_from_shape: bool = False,
    extremes: bool = True,
    extras: bool = True,
) -> tuple[onnx.ModelProto, list[Probe]]:
    """``nonfinite``: how float tensors holding NaN/Inf get correct statistics: "in-graph" (an If node per
    tensor, self-contained), "deferred" (the caller reruns those that ``stats.tensor_stats.needs_rerun`` says) or
    "masked" (masks always). See StatsBuilder._stats_row_blocked. ``host``: tensors (small ones) whose
    statistics and shape the caller computes from their values: exposed as they are, with no statistics
    nodes (``Probe.stats_on_host``; ``Probe.raw_for_stats`` when their values were not asked for).
    ``known``: concrete shapes for the run's input shapes, where the model's own are symbolic (the rank
    must be the model's): they choose the statistics form (the fast row needs the rank and block sizes).
    ``count_from_shape``: with ``nonfinite="deferred"``, a main-graph tensor whose shape is exposed too
    gets only what ``StatsBuilder.stats_parts`` computes, and the reader assembles its statistics
    (``runners.readback.read_probes``): per-block summaries (``Probe.stats_block``: a float tensor whose size
    ``known`` or its own static shape gives; the plan then fits only feeds of that size), else the row's
    two computed pieces (``Probe.stats_sums``), the count from that shape. ``extremes``: a main-graph int64
    or uint64 tensor summarised in the graph gets its exact [min, max] as an output of its own too
    (``Probe.exact_extremes``: its row's are float64); ``mark`` writes rows only. ``extras`` False: the
    per-block summaries of ``count_from_shape`` leave out Σ|x| and the zero count (``Probe.stats_extras``);
    every other form keeps them."""
    known = known or {}
    warnings = warnings if warnings is not None else []
    opset = stats_opset(model)
    host_stats = stats and opset < MIN_OPSET
    if host_stats:
        stats, raw = _stats_on_host(opset, warnings)
    rw = _Rewrite.of(model, opset, warnings)
    # a set names tensors by name or by ``TensorRef.key`` (a name that sibling bodies share, qualified)
    want_raw = (lambda r: r.name in raw or r.key in raw) if isinstance(raw, set) else (lambda r: bool(raw))
    probes: list[Probe] = []
    for ref in refs:
        found = _site_of(rw, ref)
        if found is None:
            continue
        tg = _target(rw, ref, *found)
        chain = tg.site.chain
        summarised = stats and tg.elem not in UNSUPPORTED_STATS_DTYPES
        if summarised and ref.name in host and not chain:
            probes.append(_expose_on_host(rw, tg, want_raw(ref)))
            continue
        probe = Probe(ref=ref, stats_on_host=host_stats)
        if summarised and count_from_shape and shapes and not chain and nonfinite == "deferred":
            _expose_stats_parts(rw, tg, probe, known, extras)
        elif summarised:
            _expose_stats_row(rw, tg, probe, known, nonfinite)
        if extremes and probe.stats_output and stacks(chain):
            _expose_extremes(rw, tg, probe)
        if shapes:
            _expose_shape(rw, tg, probe)
        if want_raw(ref):
            _expose_raw(rw, tg, probe)
        probes.append(probe)
    for b in rw.builders.values():
        b.interleave()
    if rw.builders:
        add_stats_import(model, rw.out)
    return rw.out, probes


def _stats_on_host(opset: int, warnings: list[str]) -> tuple[bool, bool]:
    """A model whose opset predates IsNaN / Where (opset 9) gets no statistics nodes: its tensors are fetched
    raw and the host computes their statistics (``Probe.stats_on_host``), with a warning. Returns the
    (``stats``, ``raw``) that ``expose`` goes on with."""
    warnings.append(f"model opset {opset} predates IsNaN (opset {MIN_OPSET}): statistics are computed on the host")
    return False, True


def _site_of(rw: _Rewrite, ref: TensorRef) -> tuple[NodeSite, onnx.SparseTensorProto | None] | None:
    """The node that produces ``ref`` and, for a Constant's ``sparse_value``, that value; None, with a
    warning, for what cannot be probed: no node produces it, it is no tensor (a sequence, an optional, a
    sparse tensor other than a Constant's), or it lies in a body whose values no output carries out."""
    site = rw.producer.get((ref.scope, ref.name)) or rw.by_name.get(ref.name)
    if site is None:
        rw.warnings.append(f"{ref.name}: no node produces it; not probed")
        return None
    stored = _sparse_value(site.node) if ref.name in rw.sparse else None
    kind = None if stored is not None else "a sparse tensor" if ref.name in rw.sparse else not_a_tensor(
        rw.every_type.get(ref.name), site.node.op_type)
    if kind:  # no statistics node takes one, and --save, diff and the tables hold tensors
        rw.warnings.append(f"{ref.name}: {kind}, not a tensor; not probed (onnxprobe probes tensors only)")
        return None
    sealed = next((p for p, _ in site.chain if p.op_type not in CARRIERS), None)
    if sealed is not None:  # a SequenceMap's body: its outputs are sequences, no tensor carries a value out
        rw.warnings.append(f"{ref.name}: inside the body of {sealed.op_type} node {sealed.name or sealed.output[0]!r}, "
                           "whose values no output carries out; not probed")
        return None
    return site, stored


@dataclass
class _Target:
    """One tensor to probe, as the steps that expose it see it."""

    ref: TensorRef
    site: NodeSite  # its producer: ``site.graph`` is the graph the probe nodes go in, ``site.chain`` its bodies
    src: str  # what the probes read: the tensor, a dense copy of a Constant's sparse_value, or a float32 copy
    t: onnx.TypeProto | None  # src's type, where known
    elem: int | None  # src's element type; None: unknown (statistics Cast at run time)


def _target(rw: _Rewrite, ref: TensorRef, site: NodeSite, stored: onnx.SparseTensorProto | None) -> _Target:
    """What the probes of ``ref`` read: the tensor itself; for a Constant's sparse_value (``stored``), which
    nodes read dense, a dense copy (densified here: as a graph output onnxruntime would return a
    SparseTensor); for the narrow types (``NARROW_TYPES``), a Cast to float32 of it, with a warning."""
    t = own_type(site.graph, ref.name) if ref.qualified else rw.types.get(ref.name)
    elem = t.tensor_type.elem_type if t is not None else None  # None: unknown, Cast at run time
    g = site.graph
    src = ref.name
    if stored is not None:
        dense = dense_array(stored)
        src, elem = rw.builder(g).const(dense), stored.values.data_type
        t = helper.make_tensor_type_proto(elem, list(dense.shape))
    if elem in NARROW_TYPES:
        src = rw.builder(g).node("Cast", [ref.name], f"{ref.name}.as_f32", to=TensorProto.FLOAT)
        t = retyped(t, TensorProto.FLOAT)
        rw.warnings.append(f"{ref.name}: {TensorProto.DataType.Name(elem).lower()} has no numpy type and few kernels; "
                           "its values are probed cast to float32")
        elem = TensorProto.FLOAT
    return _Target(ref, site, src, t, elem)


def _expose_on_host(rw: _Rewrite, tg: _Target, raw_wanted: bool) -> Probe:
    """A small main-graph tensor whose statistics (and shape) the host computes: the tensor itself becomes
    an output (a few KB, summed on the host in float64), with no statistics nodes."""
    rw.add_top_output(tg.src, tg.t)
    return Probe(ref=tg.ref, raw_output=tg.src, stats_on_host=True, raw_for_stats=not raw_wanted)


def _planned(tg: _Target, known: dict[str, tuple]) -> tuple | None:
    """The shape the statistics nodes are laid out for: the run's concrete one (``known``), else the ref's
    static one, else only its rank (or None, unknown)."""
    return known.get(tg.ref.name) or (tg.ref.shape if tg.ref.shape is not None else rank_only(tg.t))


def _expose_stats_parts(rw: _Rewrite, tg: _Target, probe: Probe, known: dict[str, tuple], extras: bool = True) -> None:
    """``count_from_shape``'s form, for a main-graph tensor: what ``StatsBuilder.stats_parts`` computes
    (per-block summaries, or the row's two computed pieces) as outputs, for the reader to assemble the row
    from. Sets ``probe.stats_output``, ``stats_sums``, ``stats_block``, ``stats_extras`` (False only for
    blocks without Σ|x| and the zero count, ``extras`` False) and ``planned_shape``."""
    g, b, name = tg.site.graph, rw.builder(tg.site.graph), tg.ref.name
    shape = _planned(tg, known)
    first, second, probe.stats_block = b.stats_parts(tg.src, tg.elem, shape, extras)
    probe.stats_extras = extras or not probe.stats_block
    probe.planned_shape = laid_out(shape, tg.elem)
    probe.stats_output, probe.stats_sums = (_output_of(g, b, part, STATS_PREFIX + name + tag, rw.names)
                                            if part else None for part, tag in ((first, ""), (second, ".sums")))
    for o in (probe.stats_output, probe.stats_sums):
        if o:
            rw.add_top_output(o, None)


def _row_type() -> onnx.TypeProto:
    return helper.make_tensor_type_proto(TensorProto.DOUBLE, [1, ROW_WIDTH])


def _expose_stats_row(rw: _Rewrite, tg: _Target, probe: Probe, known: dict[str, tuple], nonfinite: str) -> None:
    """The [1, 11] float64 statistics row (``StatsBuilder.stats_row``, ``nonfinite`` its NaN/Inf handling),
    computed next to the tensor, lifted out of its bodies, as a main-graph output named ``STATS_PREFIX`` +
    the tensor's name (a fresh name where that one is taken). Sets ``probe.stats_output`` and
    ``probe.planned_shape`` (none in a body: a body's count is over its runs)."""
    g, chain, name = tg.site.graph, tg.site.chain, tg.ref.name
    shape = _planned(tg, known)
    row = rw.builder(g).stats_row(tg.src, tg.elem, shape, nonfinite)
    probe.planned_shape = None if chain else laid_out(shape, tg.elem)
    top = _lift(rw, row, chain, _row_type(), "stats") if chain else row
    final = STATS_PREFIX + name
    if final in rw.names:
        final = rw.builder(rw.out.graph).fresh(final)
    if chain or not rename_output(g, top, final, window=64):  # else the row's own node writes the output
        rw.builder(rw.out.graph).op("Identity", top, out=final, base=f"stats/{name}")
    rw.names.add(final)
    rw.add_top_output(final, _row_type())
    probe.stats_output = final


def _expose_extremes(rw: _Rewrite, tg: _Target, probe: Probe) -> None:
    """An int64 / uint64 tensor's exact [min, max] in its own type, as an output of its own (the row's are
    float64: 2^60 + 1 reads 2^60); nothing for other types (``StatsBuilder.exact_extremes``). In a body it
    is stacked per iteration ([..., 2]), and empty where an If branch did not run, as raw values are. Sets
    ``probe.exact_extremes``. For tensors whose values always stack (``stacks``)."""
    g, chain = tg.site.graph, tg.site.chain
    ext = rw.builder(g).exact_extremes(tg.src, tg.elem)
    if not ext:
        return
    t2 = helper.make_tensor_type_proto(tg.elem, [2])
    if chain:
        t2 = loosen(t2) if any(n.op_type == "If" for n, _ in chain) else t2
        probe.exact_extremes = _lift(rw, ext, chain, t2, "raw")
        rw.add_top_output(probe.exact_extremes, with_leading_dims(t2, loop_depth(chain)))
    else:
        probe.exact_extremes = _output_of(g, rw.builder(g), ext, EXTREMES_PREFIX + tg.ref.name, rw.names)
        rw.add_top_output(probe.exact_extremes, t2)


def _expose_shape(rw: _Rewrite, tg: _Target, probe: Probe) -> None:
    """The tensor's runtime shape (int64 [rank]) as an output named ``SHAPE_PREFIX`` + its name: of a
    main-graph tensor; of one inside If branches only (one value a run), carried out as raw values are
    (empty when its branch did not run; ``runners.readback.read_probes`` tells that from a scalar's []);
    none inside a Loop or Scan body. Sets ``probe.shape_output``."""
    g, chain, name = tg.site.graph, tg.site.chain, tg.ref.name
    if not chain:
        shp = rw.builder(g).node("Shape", [tg.src], SHAPE_PREFIX + name)
        rw.add_top_output(shp, helper.make_tensor_type_proto(TensorProto.INT64, [None]))
        probe.shape_output = shp
    elif all(n.op_type == "If" for n, _ in chain):
        ty = helper.make_tensor_type_proto(TensorProto.INT64, [None])
        probe.shape_output = _lift(rw, rw.builder(g).node("Shape", [tg.src], SHAPE_PREFIX + name), chain, ty, "raw")
        rw.add_top_output(probe.shape_output, ty)


def _expose_raw(rw: _Rewrite, tg: _Target, probe: Probe) -> None:
    """The tensor's values as an output: a main-graph tensor as it is; a body's carried out (``_lift``),
    stacked one per Loop / Scan iteration, its type loosened to its rank out of If branches, where a
    scalar leaves as [1] (``Probe.raw_scalar``), so that the branch that did not run can return it empty
    ([0]) instead of a 0 that would pass for a value. A body's tensor of unknown type: a warning instead.
    Sets ``probe.raw_output`` (and ``raw_scalar``)."""
    g, chain, name, src, t = tg.site.graph, tg.site.chain, tg.ref.name, tg.src, tg.t
    if not chain:
        rw.add_top_output(src, t)
        probe.raw_output = src
        return
    if t is None or not tg.elem:
        rw.warnings.append(f"{name}: type unknown inside a subgraph; raw values not saved")
        return
    if any(n.op_type == "If" for n, _ in chain):
        if t.tensor_type.HasField("shape") and not t.tensor_type.shape.dim:
            src = rw.builder(g).node("Reshape", [src, rw.builder(g).const(np.array([1], np.int64))], f"{name}.as1")
            t = helper.make_tensor_type_proto(tg.elem, [1])
            probe.raw_scalar = True
        t = loosen(t)
    probe.raw_output = _lift(rw, src, chain, t, "raw")
    rw.add_top_output(probe.raw_output, with_leading_dims(t, loop_depth(chain)))


def _lift(rw: _Rewrite, name: str, chain: tuple, t: onnx.TypeProto | None, kind: str) -> str:
    """Carry ``name`` (of type ``t``, where known) from the innermost body of ``chain`` out to the main
    graph, level by level: each enclosing body gains an output and its If / Loop / Scan node a matching
    one. ``kind``: "stats" (a statistics row) or "raw" (a value). Returns its name in the main graph."""
    cur = name
    for level in range(len(chain) - 1, -1, -1):
        parent, attr = chain[level]
        body = _graph_attr(parent, attr)
        enclosing = rw.out.graph if level == 0 else _graph_attr(*chain[level - 1])
        if parent.op_type not in CARRIERS:
            raise ModelError(f"cannot expose {name!r}: it lives in a subgraph of a {parent.op_type} node")
        _pad_outputs(parent, body)
        if cur in rw.ends_of(body):
            cur = rw.builder(body).node("Identity", [cur], f"{cur}.out")
        _append_output(rw, body, cur, t)
        new = rw.builder(enclosing).fresh(f"{name}.{parent.op_type.lower()}_out")
        parent.output.append(new)
        if parent.op_type == "If":
            t = _other_branch_placeholder(rw, parent, attr, body, t, kind)
        else:
            new, t = _stacked(rw, parent, enclosing, new, t, kind)
        cur = new
    return cur


def _append_output(rw: _Rewrite, g: onnx.GraphProto, name: str, t: onnx.TypeProto | None) -> None:
    """Make ``name`` an output of body ``g`` (of type ``t`` where known)."""
    vi = onnx.ValueInfoProto(name=name)
    if t is not None:
        vi.type.CopyFrom(t)
    g.output.append(vi)
    rw.ends_of(g).add(name)


def _other_branch_placeholder(rw: _Rewrite, parent: onnx.NodeProto, attr: str, body: onnx.GraphProto,
                              t: onnx.TypeProto | None, kind: str) -> onnx.TypeProto | None:
    """``body``, one branch of If ``parent``, has just gained an output: the other branch gains one too, a
    placeholder for when it runs instead (the identity row for statistics; for raw values an empty tensor
    of the value's rank, what "did not run" reads as). Returns the output's type: for raw values loosened to
    its rank (``loosen``), in ``body`` too, as the two branches now return different shapes."""
    other = _graph_attr(parent, "else_branch" if attr == "then_branch" else "then_branch")
    if kind == "stats":
        ph_value = IDENTITY_ROW
    else:
        # empty, of the real value's rank (nested Ifs check it); a scalar is carried as [1] (see
        # ``_expose_raw``), so that its placeholder can be empty too
        rank = len(t.tensor_type.shape.dim) if t is not None and t.tensor_type.HasField("shape") else 1
        ph_value = np.zeros([0] * rank, onnx.helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type))
    ph = rw.builder(other).const(ph_value)
    if ph in rw.ends_of(other):
        ph = rw.builder(other).node("Identity", [ph], "onnxprobe.placeholder")
    if t is not None and kind == "raw":
        t = loosen(t)
        body.output[-1].type.CopyFrom(t)
    _append_output(rw, other, ph, t)
    return t


def _stacked(rw: _Rewrite, parent: onnx.NodeProto, enclosing: onnx.GraphProto, new: str,
             t: onnx.TypeProto | None, kind: str) -> tuple[str, onnx.TypeProto | None]:
    """Loop / Scan ``parent``'s new output ``new`` stacks the body's value one per iteration (a Scan's along
    axis 0, forward): returns what the enclosing graph reads, the per-iteration statistics rows merged back
    into one row, or the stacked value with its type (one more leading dim)."""
    if parent.op_type == "Scan":
        for a in parent.attribute:
            if a.name in ("scan_output_axes", "scan_output_directions"):
                a.ints.append(0)
    if kind == "stats":
        new = rw.builder(enclosing).merge_rows(new)
    elif t is not None:
        t = with_leading_dim(t)
    return new, t


def _sparse_value(node: onnx.NodeProto) -> onnx.SparseTensorProto | None:
    """A Constant node's ``sparse_value`` (None for any other node)."""
    if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
        return next((a.sparse_tensor for a in node.attribute if a.name == "sparse_value"), None)
    return None


def _output_of(g: onnx.GraphProto, b: StatsBuilder, t: str, want: str, names: set[str]) -> str:
    """``t`` (written by a node this pass just added) under a fresh name near ``want``: the output name."""
    final = want if want not in names else b.fresh(want)
    if not rename_output(g, t, final, window=64):
        b.op("Identity", t, out=final, base=f"stats/{want}")
    names.add(final)
    return final


# the nodes whose bodies' tensors ``_lift`` carries out to the main graph
CARRIERS = ("If", "Loop", "Scan")
# element types with no numpy dtype (without ml_dtypes) and few onnxruntime kernels (no Shape for int4 at
# opset 21, no Reduce* for float8): probed through a Cast to float32
NARROW_TYPES = {getattr(TensorProto, k) for k in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
                                                   "FLOAT8E8M0", "INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2")
                if hasattr(TensorProto, k)}
