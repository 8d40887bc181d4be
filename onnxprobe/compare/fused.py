"""``diff`` in one run: both models in one graph (``graph.merge``), each pair's metrics computed in the
graph right behind its two producers (``graph.pair_nodes``), and each layer's introduced error there
too: B's node(s) fed with A's matched inputs (``compare.introduced.cone``), compared with A's tensor.
Only [1, 11] rows and shapes leave the run, so no activation is held on the host, whatever the model
sizes: memory is that of the two models running side by side. Small pairs leave it raw, summed on the host,
unless many share a shape: those are measured in the graph a stack at a time (``compare.fused_stacks``).

The graph is built once (``build``) and run on any number of feeds (``run``: a dataset's samples go
through one session, kept under a cache key); each run gives one sample's ``stats.pooled.PairSums`` per
pair. Used when both sides are onnxruntime with the same settings (one session can hold both); anything it
cannot measure in the graph (a non-float32 pair, a NaN or Inf on either side: the host's masked
float64 path; shapes that differ at run time) is handed back for the host path, which the caller runs
on just those pairs. A pair whose two tensors' shapes differ at run time in a way the graph's rows cannot
take (their difference broadcasts nowhere) fails the whole run: ``compare.fused_shapes.runtime_shapes`` then finds those pairs
in a run that computes only the pairs' shapes, and ``build(skip=...)`` leaves them out.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto

from onnxprobe.compare import fused_stacks
from onnxprobe.compare.introduced import cone, copy_cone
from onnxprobe.compare.same_function import SameFunction
from onnxprobe.compare.sides import Side
from onnxprobe.graph.builder import all_names, default_opset, interleave, rename_output
from onnxprobe.graph.dims_apart import keep_apart_in_place
from onnxprobe.graph.merge import PREFIX as PREFIX_B
from onnxprobe.graph.merge import PREFIX_A, NotMergeable, cone_prefix, side_by_side
from onnxprobe.graph.pair_nodes import MAXIMA, SUMS, PairBuilder, tail_order
from onnxprobe.graph.shapes import concrete_sizes, infer_shapes, shapes_with_folded, static_shape, value_types
from onnxprobe.graph.skeleton import large_constants, large_initializers, skeleton, stubs
from onnxprobe.graph.stack_nodes import stackable
from onnxprobe.graph.stats_nodes import BLOCK_MAX, suffix_axes
from onnxprobe.graph.stale_shapes import stale_note, stale_shapes, without_shapes
from onnxprobe.match.engine import Pair
from onnxprobe.runtime.runners import base as base_runner
from onnxprobe.stats.host_sums import pair_sums_many
from onnxprobe.stats.pooled import PairSums
from onnxprobe.types import element_count

ROW_PREFIX, SHAPE_PREFIX = "onnxprobe.pair:", "onnxprobe.pairshape:"
MIN_OPSET = 9  # the statistics' builder, whose Reduce* forms it shares


@dataclass
class Fused:
    """What one run measured: one sample's sums per pair (by its position in the report), introduced
    error where a cone was built, and the pairs whose shapes differed at run time (A's shape, B's); the
    pairs absent from ``sums`` and ``problems`` are left for the host."""

    sums: dict[int, PairSums] = field(default_factory=dict)
    introduced: dict[int, PairSums] = field(default_factory=dict)
    problems: dict[int, tuple[list[int], list[int]]] = field(default_factory=dict)
    profile: dict[int, tuple[float | None, float | None]] = field(default_factory=dict)  # pair -> (A's, B's kernel ms)
    profile_summary: dict = field(default_factory=dict)


@dataclass
class FusedGraph:
    """Both models in one graph with every pair's row as an output (``build``): run it with ``run``."""

    model: onnx.ModelProto | None  # None: no pair could be measured in the graph
    outputs: list[str]
    aname: dict = field(default_factory=dict)  # A's tensor -> its name in the merged graph
    bname: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict)  # pair -> [A's, B's(, B's recomputed)] merged names: small, summed on the host
    weights: dict = field(default_factory=dict)  # the merged graph's stubs -> A's and B's own weights (not copied)
    notes: list = field(default_factory=list)  # what the report should say about the build
    extras: bool = True  # the rows hold the max relative error, Σ|a-b| and the argmax (``pair_nodes.EXTRAS``)
    same: frozenset = frozenset()  # pairs whose B node is A's own computation: no cone, introduced error exact
    same_weights: list = field(default_factory=list)  # the [B, A] stubs of equal bytes ``same`` relied on (fused_cache)
    stacks: list = field(default_factory=list)  # small pairs measured a stack at a time (``compare.fused_stacks``)


def fusable(a: Side, b: Side) -> str | None:
    """None when the two sides can run as one graph; else why not."""
    ra, rb = a.runner, b.runner
    if ra.kind != "onnxruntime" or rb.kind != "onnxruntime" or not (ra.runs_graphs and rb.runs_graphs):
        return "not two onnxruntime sides that run graphs"
    if ra.config != rb.config or ra.device != rb.device:
        return "the sides run with different settings"
    if default_opset(ra.model) < MIN_OPSET or default_opset(rb.model) < MIN_OPSET:
        return f"opset below {MIN_OPSET}"
    return None


def _float32(t: onnx.TypeProto | None) -> bool:
    return t is not None and t.HasField("tensor_type") and t.tensor_type.elem_type == TensorProto.FLOAT


def build(a: Side, b: Side, report: list[Pair], by_b: dict[str, Pair], rtol_of, introduced: bool,
          input_shapes: dict | None = None, skip: frozenset[int] = frozenset(), extras: bool = True,
          fixed: bool = False) -> FusedGraph:
    """The merged graph that measures ``report`` in one run. ``by_b``: B probe -> its pair, for every
    float pair of the matching (cones stop at those tensors); ``rtol_of(pair)``: the rtol of the pair's
    criterion. Pairs of small tensors for ``input_shapes`` (``runners.base.SMALL_ON_HOST``) leave the run
    as they are and are summed on the host (float64, any dtype), instead of a row's metric nodes (29 per pair with its
    introduced error and without extras, 39 with them, Shape nodes included); but where STACK_MIN or more float32 ones
    share a static shape and criterion, they are measured in the graph a stack of them at a time
    (``compare.fused_stacks``: ~30 nodes a stack of up to 64 pairs, and no value on the host). ``fixed``: the graph
    runs on feeds of ``input_shapes`` only (not a dataset's, whose samples may have others): a stack may then take
    the shape shape inference gives a pair for them where its type has a symbolic dim.
    ``skip``: pairs (positions in ``report``) whose shapes differ at run time: left out of the graph, and
    no cone reads A's value of them in place of B's. ``extras`` False: the pairs' rows leave out the max
    relative error, Σ|a-b| nor the argmax (``pair_nodes.EXTRAS``; read as 0 and -1, which the caller does not report).
    A pair whose B node is A's own computation (``compare.same_function``) gets no cone: its introduced error is
    exact (``FusedGraph.same``). Raises NotMergeable when the models cannot share a graph."""
    # both graphs without their big weights: the merged graph's stubs read A's and B's own (``weights``),
    # so two 1 GB models are not copied into a 2 GB third one (nor serialised) to be compared
    merged, aname, bname = side_by_side(skeleton(a.runner.model, constants=True), skeleton(b.runner.model, constants=True),
                                        [(p.a.probe, p.b.probe) for p in report])
    weights = merged_weights(a, b)
    # for these input shapes: what no value_info tells (an old opset's shape computations, ``concrete_shapes``)
    # (what only folding the shape computations tells sizes the pairs taken raw, which take any run-time
    # shape, and never a row's axes: graph.shape_values)
    concrete, folded = shapes_with_folded(merged, input_shapes, fold=True) if input_shapes is not None else ({}, {})
    notes = []
    stale = stale_shapes(merged, concrete)
    if stale:  # declared for other input shapes: onnxruntime would plan buffers on them (graph.stale_shapes)
        merged = without_shapes(merged, stale)
        notes.append(stale_note({k.split("/", 1)[-1]: v for k, v in stale.items()}))
    if input_shapes is not None:  # a dim name A's and B's tensors share but not a size (NonZero counts): B's own
        keep_apart_in_place(merged, {**folded, **concrete}, input_shapes, PREFIX_B)
    g = merged.graph
    types = value_types(infer_shapes(merged))  # the tensors onnxprobe added (dequantizations) may lack value_info
    each, total, free = (*base_runner.SMALL_PAIRS_ON_HOST, 0)[:3]  # (each, total) alone: no free share
    sizes = concrete_sizes(merged, input_shapes, {**folded, **concrete}) if total else {}
    used = 0
    raw: dict[int, list[str]] = {}
    names = all_names(merged)
    original = len(g.node)
    pb = PairBuilder(g, default_opset(merged), names)
    outputs: list[str] = []
    listed: set[str] = set()  # the raw tensors among outputs (a pair may share one with another)
    producer = {o: n for n in g.node for o in n.output if o}
    # cones read the weights where they are: initializers, and the Constants whose values are stubs
    # (a copy of such a Constant would be a stub of a name no weight has)
    inits = {i.name for i in g.initializer} | set(stubs(merged))
    order = {id(n): i for i, n in enumerate(g.node)}
    left_out = {id(report[k]) for k in skip}
    known = {bname.get(x, x): aname.get(q.a.probe, q.a.probe) for x, q in by_b.items() if id(q) not in left_out}

    scales = {i.name: i.data_type for i in g.initializer}
    for n in g.node:  # a dequantization outside what shape inference knows (after a contrib op): its scale's type
        if n.op_type == "DequantizeLinear" and len(n.input) > 1 and n.output and n.output[0] not in types:
            if scales.get(n.input[1]) == TensorProto.FLOAT:
                types[n.output[0]] = onnx.helper.make_tensor_type_proto(TensorProto.FLOAT, None)
    own = SameFunction(producer, known, {i.name: i for i in g.initializer}, weights, types)
    same: set[int] = set()

    def row(x: str, y: str, shape, rtol: float, k: int, full: bool = True, cone=None) -> list[str]:
        """Pair ``k``'s three outputs (``PairBuilder.row_head`` and ``row_sums``), named ROW_PREFIX k .max / .arg /
        .sum, and its two tensors' shapes (SHAPE_PREFIX k a / b: what the run gave them, for the reader to check); with ``cone()`` (B's
        node recomputed on A's inputs, its introduced error: made after the pair's row, as the run then goes, or
        None) that row's maxima and argmax too, ROW_PREFIX k i.max / i.arg, its sums in the pair's, and c's shape.
        For a pair ``planned`` calls rowable: float32 tensors of a static rank."""
        # for these input shapes (folded ones too: a wrong one costs precision, never the run): the sums' length
        dims = concrete.get(x) or concrete.get(y) or folded.get(x) or folded.get(y)
        dims = tuple(dims) if dims else None
        head = pb.row_head(x, y, tuple(shape), rtol, f"onnxprobe.pair{k}", False, dims, full)
        # the shapes right behind the row's own nodes: a Shape is a tensor's last reader, which holds it till it runs
        # (made after the introduced error's nodes, B's tensor was held through them: +12 MB at PP-OCRv4 det 800x608)
        got = [(head.maxima, ".max"), (head.argmax, ".arg"), (pb.node("Shape", [x], f"onnxprobe.pair{k}.shape_a"), "a"),
               (pb.node("Shape", [y], f"onnxprobe.pair{k}.shape_b"), "b")]
        c = cone() if cone is not None else None
        intro = pb.row_head(x, c, tuple(shape), rtol, f"onnxprobe.intro{k}", True, dims, full) if c is not None else None
        got.append((pb.row_sums(head, intro), ".sum"))
        if intro is not None:
            got += [(intro.maxima, "i.max"), (intro.argmax, "i.arg"), (pb.node("Shape", [c], f"onnxprobe.intro{k}.shape"), "i")]
        return [_named(g, t, f"{SHAPE_PREFIX}{k}{tag}" if tag in ("a", "b", "i") else f"{ROW_PREFIX}{k}{tag}")
                for t, tag in got if t is not None]

    @functools.cache  # asked for again by the stacks and the rows
    def planned(k: int) -> tuple:
        p = report[k]
        x, y = aname.get(p.a.probe, p.a.probe), bname.get(p.b.probe, p.b.probe)
        # of one rank: either tells the axes; else the rank they have for these input shapes (the graph is
        # built for them: a run of another rank fails it, and the pairs are measured in separate runs)
        shape = static_shape(types.get(x)) or static_shape(types.get(y)) or concrete.get(x) or concrete.get(y)
        return p, x, y, shape, _float32(types.get(x)) and _float32(types.get(y)) and shape is not None

    def recomputes(k: int, p: Pair, x: str, y: str) -> bool:  # B's node fed A's inputs, unless it is A's own
        if not (introduced and p.b.kind == "float"):
            return False
        if own.same(y, x):
            same.add(k)
            return False
        return True

    def shape_of(t: str) -> tuple | None:  # a tensor's shape, static or for these input shapes (a stack's: ``fixed``)
        st = static_shape(types.get(t))
        if st is not None and all(isinstance(d, int) for d in st):
            return tuple(st)
        return tuple(concrete[t]) if fixed and t in concrete else None

    def recomputed(k: int) -> str | None:  # a stacked pair's: the cone's output, or None
        p, x, y = planned(k)[:3]
        return _cone_output(g, pb, y, k, known, producer, inits, order, types) if recomputes(k, p, x, y) else None

    # the small pairs of a static shape that many pairs share (a deep model's): a stack at a time, in the graph
    # (the shape its type declares, or with ``fixed`` where a dim is symbolic the one shape inference gives both
    # tensors for these input shapes: should a run's shapes be others, its Concat fails and the pairs are measured in
    # separate runs, with a note)
    # pairs of If-branch tensors (``match.observe``) are left to the separate runs, which read a branch that
    # did not run as no value: the merged graph exposes main-graph tensors only
    in_main = [k for k in range(len(report)) if k not in skip and report[k].a.probe in aname and report[k].b.probe in bname]
    candidates = []
    for k in in_main:
        p, x, y, _, rowable = planned(k)
        st = shape_of(x) if rowable else None
        if st is not None and st == shape_of(y) and stackable(st, pb.opset) and 4 * element_count(st) <= free:
            at = max(order.get(id(producer[t]), -1) if t in producer else -1 for t in (x, y))
            candidates.append((k, st, rtol_of(p), at))
    stacks = fused_stacks.groups(candidates)
    stacked = {k for *_, pairs in stacks for k in pairs}
    # the pairs no row can take have the raw budget first: it is their only way through the one run, where
    # a small pair a row could measure only saves its row's nodes
    in_main = [k for k in in_main if k not in stacked]
    for k, (p, x, y, shape, rowable) in sorted(((k, planned(k)) for k in in_main), key=lambda e: e[1][4]):
        sx, sy = sizes.get(x), sizes.get(y)
        recompute = recomputes(k, p, x, y)
        # small, or of a size nobody can tell and no row for it (integers, masks): the host path would
        # fetch it whole anyway, in runs of its own; here it comes out of the one run
        n = (sx + sy) if sx is not None and sy is not None else (None if rowable or sx or sy else 2 * each)
        # room for B's recomputed one too; a pair of two tensors of at most ``free`` bytes whatever the total (its
        # values cost less than its row's nodes: runners.base.SMALL_PAIRS_ON_HOST)
        cheaper = sx is not None and sy is not None and max(sx, sy) <= min(free, each)
        if n is not None and n <= 2 * each and total and (used + 2 * n <= total or cheaper):
            used += n
            raw[k] = [x, y]
            c = _cone_output(g, pb, y, k, known, producer, inits, order, types) if recompute else None
            if c is not None:
                raw[k].append(c)
                used += sy if sy is not None else each
            outputs += [t for t in raw[k] if t not in listed]
            listed.update(raw[k])
            continue
        if not rowable:  # not float32, no static rank: measured on the host
            continue

        def recomputed_row(y=y, k=k, recompute=recompute) -> str | None:  # B's node recomputed on A's inputs: its introduced error
            if not recompute:
                return None
            c = _cone_output(g, pb, y, k, known, producer, inits, order, types)
            if c is not None:
                types[c] = types.get(y)  # B's node recomputed: the type of B's tensor
            return c

        outputs += row(x, y, shape, rtol_of(p), k, full=extras, cone=recomputed_row)
    records, stacked_outputs = fused_stacks.build(pb, stacks, lambda k: planned(k)[1:3], recomputed, extras,
                                                  lambda t, name: _named(g, t, name))
    outputs += stacked_outputs
    if not outputs:
        return FusedGraph(None, [], aname, bname, notes=notes, extras=extras)
    interleave(g, original)
    del g.output[:]
    g.output.extend(onnx.ValueInfoProto(name=o) for o in outputs)
    return FusedGraph(merged, outputs, aname, bname, raw, weights, notes, extras, frozenset(same),
                      sorted([yb, xa] for yb, xa in own.relied), records)


def merged_weights(a: Side, b: Side) -> dict:
    """The merged graph's stub names -> the tensors of A's and B's models they stand for."""
    return {prefix + name: t for prefix, m in ((PREFIX_A, a.runner.model), (PREFIX_B, b.runner.model))
            for name, t in [*((t.name, t) for t in large_initializers(m)), *large_constants(m).items()]}


SUBNORMAL_SQUARES = 1e-30  # a largest square below this: float32 sums of squares lose digits (host float64)
# the most a cosine taken from the graph's sums may be off by (``_sums``' bound): past it, the host measures the pair
COSINE_ERROR = 5e-6


def sum_error(shape: tuple) -> float:
    """A bound on the relative error of a pair's float32 partial sums of squares for tensors of ``shape``: the squares'
    own rounding (1e-7) or, over a row of the partials (``suffix_axes``), what the row adds up, 2e-9 an element (a
    constant of 1e4 over rows of 1000: Σb² 1.7e-6 off, and a = 0.01 b read cosine 0.999874); past BLOCK_MAX elements
    the rows are summed in float64 from the start."""
    _, row = suffix_axes(shape)
    return 1e-7 if row is None or row > BLOCK_MAX else max(1e-7, 2e-9 * row)


def run(a: Side, fg: FusedGraph, feeds: dict, report: list[Pair], sample: int = 0, key=None, rtol_of=None,
        tolerance_of=None) -> Fused:
    """One run of the merged graph on ``feeds``: sample ``sample``'s sums of every pair it measures.
    ``key``: keep the session under it for the next run (a dataset's samples); None frees it.
    ``rtol_of(pair)``: the criterion's rtol, for the pairs summed on the host; ``tolerance_of(pair)``: its
    criterion, whose threshold a float32 maximum too near to is left to the host (``Tolerance.near_float32_threshold``)."""
    if fg.model is None:
        return Fused()
    got, _ = a.any_runner.execute(fg.model, feeds, fg.outputs, key=key, weights=fg.weights)
    return read(got, report, fg.raw, sample, rtol_of, tolerance_of, fg.extras, fg.same, fg.stacks)


def read(got: dict, report: list[Pair], raw: dict, sample: int = 0, rtol_of=None, tolerance_of=None,
         extras: bool = True, same: frozenset = frozenset(), stacks: list = ()) -> Fused:
    """What a run of a merged graph measured, from its outputs ``got``: the rows of ``report``'s pairs, those of its
    stacks (``stacks``: ``FusedGraph.stacks``) and the small ones taken raw (``raw``: ``FusedGraph.raw``), the pairs
    of ``same`` (``FusedGraph.same``) with an exact introduced error; ``run`` documents the rest (a served diff reads
    its run with this too: ``api.diff_direct``)."""
    out = Fused()
    _read(got, report, sample, out, tolerance_of, extras, same)
    for k, r, ri, shape in fused_stacks.rows(got, stacks, extras):
        _take(out, k, r, ri, shape, sample, tolerance_of(report[k]) if tolerance_of is not None else None, extras, same)
    _read_raw(got, raw, report, sample, out, rtol_of or (lambda p: 0.0), same)
    return out


def _read_raw(got: dict, raw: dict[int, list[str]], report: list[Pair], sample: int, out: Fused, rtol_of,
              same: frozenset = frozenset()) -> None:
    """The small pairs: their values, summed on the host (``stats.host_sums.pair_sums_many``: a stack of those of one
    shape at a time, to the bits of the host path's ``pair_sums``)."""
    full, light = [], []  # (k, a, b, rtol): the pairs' own sums and their introduced errors'
    for k, names in raw.items():
        va, vb = (got.get(t) for t in names[:2])
        if va is None or vb is None:
            continue
        if np.shape(va) != np.shape(vb):
            out.problems[k] = (list(np.shape(va)), list(np.shape(vb)))
            continue
        rtol = rtol_of(report[k])
        full.append((k, va, vb, rtol))
        vc = got.get(names[2]) if len(names) > 2 else None
        if vc is not None and np.shape(vc) == np.shape(va):
            light.append((k, va, vc, rtol))
        elif k in same:  # B's node is A's own: what its cone would give is A's tensor
            light.append((k, va, va, rtol))
    for todo, into, is_light in ((full, out.sums, False), (light, out.introduced, True)):
        sums = pair_sums_many([(a, b) for _, a, b, _ in todo], [r for *_, r in todo], sample, light=is_light)
        into.update((k, s) for (k, *_), s in zip(todo, sums))


def _named(g: onnx.GraphProto, t: str, name: str) -> str:
    """Rename the output ``t`` of the node that writes it (the last ones added), and its readers, to ``name``."""
    if not rename_output(g, t, name):
        raise AssertionError(t)  # pragma: no cover
    return name


def _cone_output(g, pb: PairBuilder, target: str, k: int, known: dict[str, str], producer: dict, inits: set[str],
                 order: dict, types: dict) -> str | None:
    """B's cone that ends at ``target`` (a merged-graph name), copied with its boundary tensors replaced
    by A's values for them (cast to B's type where they differ); its output name, or None."""
    got = cone(g, target, known.keys(), producer, inits, order)
    if got is None:
        return None
    nodes, boundary, _ = got
    if not all(x in known for x in boundary):  # a graph input: the same feed on both sides
        boundary = [x for x in boundary if x in known]
    prefix = cone_prefix(k)  # graph.merge.origin tells these copies from the models' own nodes
    rename = {o: prefix + o for n in nodes for o in n.output if o}
    for x in boundary:
        src = known[x]
        want, have = types.get(x), types.get(src)
        if (want is not None and have is not None and want.HasField("tensor_type") and have.HasField("tensor_type")
                and want.tensor_type.elem_type != have.tensor_type.elem_type):
            src = pb.node("Cast", [src], f"{prefix}{x}.cast", to=want.tensor_type.elem_type)
        rename[x] = src
    g.node.extend(copy_cone(nodes, prefix, rename))
    return prefix + target


def _read(got: dict, report: list[Pair], sample: int, out: Fused, tolerance_of=None, extras: bool = True,
          same: frozenset = frozenset()) -> None:
    for k in range(len(report)):
        rows = _rows(got, f"{ROW_PREFIX}{k}", extras=extras)
        if rows is None:
            continue
        r, ri = rows
        sa, sb = (tuple(int(d) for d in got[f"{SHAPE_PREFIX}{k}{s}"]) for s in "ab")
        if sa != sb:
            out.problems[k] = (list(sa), list(sb))
            continue
        if ri is not None and tuple(int(d) for d in got[f"{SHAPE_PREFIX}{k}i"]) != sa:
            ri = None
        _take(out, k, r, ri, sa, sample, tolerance_of(report[k]) if tolerance_of is not None else None, extras, same)


def _take(out: Fused, k: int, r: dict, ri: dict | None, shape: tuple, sample: int, tolerance, extras: bool,
          same: frozenset) -> None:
    """Pair ``k``'s sums from its row ``r`` (a pair's own or a stack's) and its introduced error's from ``ri``, where the
    float32 row can be trusted (``_sums``) and ``tolerance``'s threshold is not too near to tell; else nothing (the host
    measures the pair)."""
    m = _sums(r, shape, sample)
    if m is None:  # a NaN or Inf on a side: the masked float64 path, on the host
        return
    near = tolerance.near_float32_threshold if tolerance is not None else None
    if near is not None and near(r["max_abs"], r["b_absmax"], r["excess"], r["max_rel"]):
        return  # the host's float64 excess or quotient decides the verdict
    out.sums[k] = m
    if ri is None and k in same:  # B's node is A's own: the row its cone would give, c = a
        ri = {**dict.fromkeys(MAXIMA, 0.0), "argmax": 0 if extras else -1, "dd": 0.0, "aa": r["aa"], "bb": r["aa"],
              "sum_abs": 0.0}
    if ri is not None:
        mi = _sums(ri, shape, sample, light=True)
        if mi is not None:
            out.introduced[k] = mi


def _rows(got: dict, name: str, extras: bool = True) -> tuple[dict, dict | None] | None:
    """A pair's row (``PairBuilder.row_head`` and ``row_sums``) as {PAIR_ROW name: value}, and its introduced error's where the graph
    has one (its maxima ``name``i.max; Σa² the pair's; max |d| its only maximum, the others left at 0:
    ``PairSums.one`` ignores them), or None; ``extras`` False: rows without the max relative error, Σ|d| nor argmax
    (``EXTRAS``), read as 0 and -1 (``compare.diff.finish`` reports them as None). None for outputs of another
    layout than these."""
    if f"{name}.max" not in got:
        return None
    intro = f"{name}i.max" in got
    sums = np.asarray(got[f"{name}.sum"], np.float64).reshape(-1).tolist()
    order = tail_order(True, intro, extras)
    maxima = np.asarray(got[f"{name}.max"], np.float64).reshape(-1).tolist()
    if not extras:  # max_rel is a pair's last maximum
        maxima = maxima + [0.0]
    if len(sums) != len(order) or len(maxima) != len(MAXIMA):
        return None
    at = dict(zip(order, sums))
    v = dict(zip(MAXIMA, maxima))
    v.update({s: at.get(("", s), 0.0) for s in SUMS})
    v["argmax"] = int(np.asarray(got[f"{name}.arg"]).reshape(-1)[0]) if extras else -1
    if not intro:
        return v, None
    imaxima = np.asarray(got[f"{name}i.max"], np.float64).reshape(-1).tolist()
    if len(imaxima) != 1:
        return None
    vi = dict(zip(MAXIMA, imaxima + [0.0] * (len(MAXIMA) - 1)))
    vi.update({s: v["aa"] if s == "aa" else at.get(("i", s), 0.0) for s in SUMS})
    vi["argmax"] = int(np.asarray(got[f"{name}i.arg"]).reshape(-1)[0]) if extras else -1
    return v, vi


def _sums(v: dict, shape: tuple[int, ...], sample: int, light: bool = False) -> PairSums | None:
    if not all(v[c] is not None and math.isfinite(v[c]) for c in ("dd", "aa", "bb", "max_abs")):
        return None
    size = element_count(shape)
    if not size:
        return None
    # float32 squares underflow below ~1e-19 (to nothing below ~1e-23): sums that lost their largest term's
    # square are not trusted (a Σ(a-b)² of 0 beside a non-zero max |a-b| would be an SQNR of +inf, and pass
    # --metric sqnr); the host measures that pair in float64 (an introduced error: not reported)
    if v["dd"] < v["max_abs"] ** 2 * (1 - 1e-3) or (not light and v["bb"] < v["b_absmax"] ** 2 * (1 - 1e-3)):
        return None
    # squares within float32's subnormals (below ~1e-31 the smaller ones lose digits, not all of them: an
    # SQNR off by 2 dB passed a 61 dB criterion where float64 says 60)
    if 0 < v["max_abs"] ** 2 < SUBNORMAL_SQUARES or (not light and 0 < v["b_absmax"] ** 2 < SUBNORMAL_SQUARES):
        return None
    ab = (v["aa"] + v["bb"] - v["dd"]) / 2  # Σab from Σa², Σb² and Σ(a-b)²
    # ... which cancels where |a| << |b| or a and b are near orthogonal: how far, the ratio of Σa² + Σb² + Σ(a-b)² to
    # 2 |Σab|. The partial sums' drift along their rows (``sum_error``) is alike for a and b (values alike round
    # alike), so it moves the cosine by the ratio past 1 only (a = b: none; a = 0.01 b: 98), beside the squares' own
    # rounding (1e-7); past COSINE_ERROR, the host measures the pair (a = 1e-6 b read cosine 0.976, not 1; a = 0.01 b
    # over rows of 1000, 0.999874). A side all zeros leaves nothing to cancel: Σab is 0, and Σ(a-b)² the other's Σ
    if not light and v["aa"] > 0 and v["bb"] > 0:
        ratio = (v["aa"] + v["bb"] + v["dd"]) / abs(2 * ab) if ab else math.inf
        if sum_error(shape) * (ratio - 1) + 1e-7 * ratio > COSINE_ERROR:
            return None
    return PairSums.one(sample, shape, count=size, max_abs=v["max_abs"], argmax=v["argmax"], b_absmax=v["b_absmax"],
                        excess=v["excess"], max_rel=v["max_rel"], sum_abs=v["sum_abs"], dd=v["dd"], aa=v["aa"],
                        bb=v["bb"], ab=ab, light=light)


__all__ = ["Fused", "FusedGraph", "fusable", "build", "merged_weights", "read", "run", "NotMergeable"]
