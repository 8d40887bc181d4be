"""Expose chosen tensors as graph outputs: their in-graph statistics, runtime shape, or raw values.

Contract: ``expose(model, refs, ...)`` returns a *new* model and one ``Probe`` per ref; the input model is
never touched, and the nodes of the original graph are left as they are (the pass only appends nodes and
outputs), so the model's own outputs are bitwise unchanged when optimisations are off.

Statistics are computed in the graph, next to the tensor, so only a [1, 9] float64 row per tensor leaves
the device (layout: ``onnxprobe.stats.tensor_stats.ROW``). Tensors inside If / Loop / Scan bodies are
lifted out level by level: each enclosing body gains an output and its node a matching output; the other
If branch returns a placeholder (the identity row for statistics, an empty tensor for raw values); the
per-iteration rows that a Loop or Scan stacks are merged back into one row in the parent graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxprobe.errors import ModelError
from onnxprobe.graph.shapes import value_types
from onnxprobe.graph.walk import NodeSite, walk
from onnxprobe.stats.tensor_stats import MAX_COL, MIN_COL
from onnxprobe.types import Probe, TensorRef

STATS_PREFIX = "onnxprobe.stats:"
SHAPE_PREFIX = "onnxprobe.shape:"
RAW_PREFIX = "onnxprobe.raw:"
ROW_WIDTH = 9
# additive columns merge by sum, MIN_COL by min and MAX_COL by max (see stats.tensor_stats.ROW)
IDENTITY_ROW = np.array([[0, 0, 0, np.inf, -np.inf, 0, 0, 0, 0]], dtype=np.float64)
UNSUPPORTED_STATS_DTYPES = {TensorProto.STRING, TensorProto.UNDEFINED}
MIN_OPSET = 9  # IsNaN and Where


def default_opset(model: onnx.ModelProto) -> int:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return 1


@dataclass
class _Builder:
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
        name, k = base, 0
        while name in self.names:
            k += 1
            name = f"{base}.{k}"
        self.names.add(name)
        return name

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

    def stats_row(self, x: str, elem_type: int | None, shape: tuple | None = None, nonfinite: str = "in-graph") -> str:
        """[1, 9] float64: count, nan, non-finite, non-zero, min, max, sum, sum of squares, sum of |x|.
        Sums are over finite values; NaN counts as non-zero and non-finite.

        Float tensors of known rank take the memory-light path: masks and sums stay in float32, sums are
        first taken over a suffix of axes holding >= 256 elements (float32 partial sums), and those
        partials are added in float64: a two-level summation whose relative error is about 256 float32
        epsilons at worst (~1e-5), typically ~1e-7. Every intermediate is at most the size of the tensor
        in float32, and the nodes sit right behind the tensor's producer, so they run and free their
        memory before the model moves on. Other tensors (ints, bool, double, unknown rank) are cast to
        float64 whole."""
        if elem_type in (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16) and shape:
            return self._stats_row_blocked(x, elem_type, shape, nonfinite)
        b = x
        d = x if elem_type == TensorProto.DOUBLE else self.node("Cast", [x], f"{b}.f64", to=TensorProto.DOUBLE)
        d = self.node("Reshape", [d, self.const(np.array([-1], np.int64), "flat")], f"{b}.flat")
        nan = self.node("IsNaN", [d], f"{b}.isnan")
        bad = self.node("IsNaN", [self.node("Sub", [d, d], f"{b}.d_minus_d")], f"{b}.nonfinite")
        zero = self.const(np.array(0.0), "zero")
        clean = self.node("Where", [bad, zero, d], f"{b}.finite")
        lo = self.reduce("ReduceMin", self.node("Where", [bad, self.const(np.array(np.inf), "inf"), d], f"{b}.for_min"), f"{b}.min")
        hi = self.reduce("ReduceMax", self.node("Where", [bad, self.const(np.array(-np.inf), "ninf"), d], f"{b}.for_max"), f"{b}.max")

        def count(mask: str, tag: str) -> str:
            return self.reduce("ReduceSum", self.node("Cast", [mask], f"{b}.{tag}.f64", to=TensorProto.DOUBLE), f"{b}.{tag}.count")

        nonzero = self.node("Cast", [d], f"{b}.nonzero", to=TensorProto.BOOL)
        size = self.node("Cast", [self.node("Shape", [d], f"{b}.size")], f"{b}.size.f64", to=TensorProto.DOUBLE)
        cols = [
            size, count(nan, "nan"), count(bad, "nonfinite"), lo, hi, count(nonzero, "nonzero"),
            self.reduce("ReduceSum", clean, f"{b}.sum"),
            self.reduce("ReduceSumSquare", clean, f"{b}.sumsq"),
            self.reduce("ReduceL1", clean, f"{b}.sumabs"),
        ]
        return self._row(cols, b)

    def _row(self, cols: list[str], b: str) -> str:
        row = self.node("Concat", cols, f"{b}.row9", axis=0)
        return self.node("Reshape", [row, self.const(np.array([1, ROW_WIDTH], np.int64), "row_shape")], f"{b}.row")

    def _stats_row_blocked(self, x: str, elem_type: int, shape: tuple, nonfinite: str) -> str:
        """Fast path for float tensors: 7 passes over the data (min, max, sum, sum of squares, sum of |x|,
        and the non-zero count as the L1 norm of Sign(x)). A NaN or Inf in the tensor (or squares past
        float32's range) shows as a non-finite sum of squares; then the row must be recomputed with masks
        (``_masked_row``). ``nonfinite`` says how: "in-graph", an If node that does it in the same run
        (self-contained, for models written out by ``mark --stats``: but every If costs onnxruntime a
        subgraph to initialise, 0.25 s for ResNet-18's 70 tensors); "deferred", the fast row alone, and
        the caller reruns the few tensors that need it (``needs_masking``) with "masked"; "masked", the
        masked row directly."""
        b = x
        f = x if elem_type == TensorProto.FLOAT else self.node("Cast", [x], f"{b}.f32", to=TensorProto.FLOAT)
        axes = _suffix_axes(shape)
        size = self._size(f, b)
        if nonfinite == "masked":
            return self._masked_row(f, b, axes, size)
        # the four additive columns: partial sums (keepdims, so they share a shape and concatenate on the
        # last axis), then one Cast and one float64 reduction for all four
        parts = [self.reduce(op, t, f"{b}.{tag}.part", axes=axes, keepdims=1) for op, t, tag in (
            ("ReduceL1", self.node("Sign", [f], f"{b}.sign"), "nonzero"), ("ReduceSum", f, "sum"),
            ("ReduceSumSquare", f, "sumsq"), ("ReduceL1", f, "sumabs"))]
        parts = self.node("Cast", [self.node("Concat", parts, f"{b}.parts", axis=-1)], f"{b}.parts64", to=TensorProto.DOUBLE)
        sums = self.reduce("ReduceSum", self.node("Reshape", [parts, self.const(np.array([-1, 4], np.int64), "by4")], f"{b}.parts2d"),
                           f"{b}.sums", axes=[0], keepdims=0)
        lo = self.reduce("ReduceMin", f, f"{b}.min", keepdims=1)
        hi = self.reduce("ReduceMax", f, f"{b}.max", keepdims=1)
        extremes = self.node("Cast", [self.node("Reshape", [self.node("Concat", [lo, hi], f"{b}.minmax", axis=0),
                                                            self.const(np.array([2], np.int64), "two")], f"{b}.minmax2")],
                             f"{b}.minmax64", to=TensorProto.DOUBLE)
        fast = self._row([size, self.const(np.array([0.0, 0.0]), "zeros2"), extremes, sums], b)
        if nonfinite == "deferred":
            return fast
        total = self.reduce("ReduceSum", sums, f"{b}.sums_total", keepdims=0)  # NaN/Inf in any sum shows here
        nonfinite = self.node("IsNaN", [self.node("Sub", [total, total], f"{b}.total_minus_total")], f"{b}.has_nonfinite")
        cond = self.node("Reshape", [nonfinite, self.const(np.array([], np.int64), "scalar")], f"{b}.has_nonfinite_s")
        slow_graph = onnx.GraphProto(name=self.fresh(f"{b}.masked_stats"))
        slow = _Builder(slow_graph, self.opset, self.names)
        slow_graph.output.append(helper.make_tensor_value_info(slow._masked_row(f, b, axes, size), TensorProto.DOUBLE, [1, ROW_WIDTH]))
        keep_graph = onnx.GraphProto(name=self.fresh(f"{b}.fast_stats"))
        keep = _Builder(keep_graph, self.opset, self.names)
        keep_graph.output.append(helper.make_tensor_value_info(keep.node("Identity", [fast], f"{b}.fast"), TensorProto.DOUBLE, [1, ROW_WIDTH]))
        out = self.fresh(f"{b}.row_checked")
        self.graph.node.append(helper.make_node("If", [cond], [out], name=self.fresh(f"onnxprobe/If/{b}"),
                                                then_branch=slow_graph, else_branch=keep_graph))
        return out

    def _size(self, f: str, b: str) -> str:
        flat = self.const(np.array([-1], np.int64), "flat")
        return self.node("Cast", [self.node("Reshape", [self.node("Size", [f], f"{b}.size"), flat], f"{b}.size1")],
                         f"{b}.size.f64", to=TensorProto.DOUBLE)

    def _total(self, t: str, op: str, tag: str, b: str, axes: list[int]) -> str:
        """float32 partial reductions over ``axes``, added up in float64: shape [1]."""
        flat = self.const(np.array([-1], np.int64), "flat")
        part = self.reduce(op, t, f"{b}.{tag}.part", axes=axes, keepdims=0)
        part = self.node("Cast", [self.node("Reshape", [part, flat], f"{b}.{tag}.partflat")], f"{b}.{tag}.part64", to=TensorProto.DOUBLE)
        return self.reduce("ReduceSum", part, f"{b}.{tag}")

    def _extreme(self, t: str, op: str, b: str, tag: str) -> str:
        flat = self.const(np.array([-1], np.int64), "flat")
        r = self.node("Reshape", [self.reduce(op, t, f"{b}.{tag}.r"), flat], f"{b}.{tag}.flat")
        return self.node("Cast", [r], f"{b}.{tag}", to=TensorProto.DOUBLE)

    def _masked_row(self, f: str, b: str, axes: list[int], size: str) -> str:
        """The row with NaN/Inf masked out of the sums and extremes (all in this builder's graph)."""
        nan = self.node("IsNaN", [f], f"{b}.isnan")
        if self.opset >= 10:
            bad = self.node("Or", [nan, self.node("IsInf", [f], f"{b}.isinf")], f"{b}.nonfinite")
        else:
            bad = self.node("IsNaN", [self.node("Sub", [f, f], f"{b}.f_minus_f")], f"{b}.nonfinite")

        def count(mask: str, tag: str) -> str:
            return self._total(self.node("Cast", [mask], f"{b}.{tag}.f32", to=TensorProto.FLOAT), "ReduceSum", tag, b, axes)

        def masked(fill: float, tag: str) -> str:
            return self.node("Where", [bad, self.const(np.array(fill, np.float32), f"fill{tag}"), f], f"{b}.for_{tag}")

        clean = masked(0.0, "sum")
        cols = [self.node("Identity", [size], f"{b}.size_in"), count(nan, "nan"), count(bad, "nonfinite"),
                self._extreme(masked(np.inf, "min"), "ReduceMin", b, "min"), self._extreme(masked(-np.inf, "max"), "ReduceMax", b, "max"),
                count(self.node("Cast", [f], f"{b}.nonzero", to=TensorProto.BOOL), "nonzero"),
                self._total(clean, "ReduceSum", "sum", b, axes), self._total(clean, "ReduceSumSquare", "sumsq", b, axes),
                self._total(clean, "ReduceL1", "sumabs", b, axes)]
        return self._row(cols, b)

    def merge_rows(self, stacked: str) -> str:
        """Rows stacked by Loop/Scan, [..., 1, 9] -> one merged [1, 9] row (empty stack -> identity row)."""
        r = self.node("Reshape", [stacked, self.const(np.array([-1, ROW_WIDTH], np.int64), "rows")], f"{stacked}.rows")
        s = self.reduce("ReduceSum", r, f"{stacked}.sum", axes=[0], keepdims=1)
        lo = self.reduce("ReduceMin", r, f"{stacked}.min", axes=[0], keepdims=1)
        hi = self.reduce("ReduceMax", r, f"{stacked}.max", axes=[0], keepdims=1)
        is_min = self.const(np.array([[c == MIN_COL for c in range(ROW_WIDTH)]]), "mincol")
        is_max = self.const(np.array([[c == MAX_COL for c in range(ROW_WIDTH)]]), "maxcol")
        return self.node("Where", [is_min, lo, self.node("Where", [is_max, hi, s], f"{stacked}.maxmerge")], f"{stacked}.merged")


def _all_names(model: onnx.ModelProto, sites: list[NodeSite]) -> set[str]:
    names: set[str] = set()

    def visit(g: onnx.GraphProto) -> None:
        names.update(i.name for i in g.input)
        names.update(i.name for i in g.initializer)
        names.update(o.name for o in g.output)

    visit(model.graph)
    for s in sites:
        names.update(s.node.input)
        names.update(s.node.output)
        names.add(s.node.name)
        for a in s.node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                visit(a.g)
    return names


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


def expose(
    model: onnx.ModelProto,
    refs: list[TensorRef],
    *,
    stats: bool = True,
    shapes: bool = True,
    raw: bool | set[str] = False,
    warnings: list[str] | None = None,
    nonfinite: str = "in-graph",
) -> tuple[onnx.ModelProto, list[Probe]]:
    """``nonfinite``: how float tensors holding NaN/Inf get correct statistics: "in-graph" (an If node per
    tensor, self-contained), "deferred" (the caller reruns those that ``needs_masking`` says) or
    "masked" (masks always). See _Builder._stats_row_blocked."""
    warnings = warnings if warnings is not None else []
    opset = default_opset(model)
    host_stats = stats and opset < MIN_OPSET
    if host_stats:  # IsNaN/Where appear in opset 9: fetch the tensors and let the host compute
        warnings.append(f"model opset {opset} predates IsNaN (opset {MIN_OPSET}): statistics are computed on the host")
        stats, raw = False, True
    out = onnx.ModelProto()
    out.CopyFrom(model)
    sites = walk(out)
    producer = {o: s for s in sites for o in s.node.output if o}
    types = value_types(out)
    names = _all_names(out, sites)
    builders: dict[int, _Builder] = {}

    def builder(g: onnx.GraphProto) -> _Builder:
        if id(g) not in builders:
            builders[id(g)] = _Builder(g, opset, names)
        return builders[id(g)]

    top_outputs = {o.name for o in out.graph.output}

    def add_top_output(name: str, t: onnx.TypeProto | None) -> None:
        if name in top_outputs:
            return
        vi = onnx.ValueInfoProto(name=name)
        if t is not None:
            vi.type.CopyFrom(t)
        out.graph.output.append(vi)
        top_outputs.add(name)

    def lift(name: str, chain: tuple, t: onnx.TypeProto | None, kind: str) -> str:
        """Carry ``name`` from the innermost body of ``chain`` out to the main graph."""
        cur = name
        for level in range(len(chain) - 1, -1, -1):
            parent, attr = chain[level]
            body = _graph_attr(parent, attr)
            enclosing = out.graph if level == 0 else _graph_attr(*chain[level - 1])
            if parent.op_type not in ("If", "Loop", "Scan"):
                raise ModelError(f"cannot expose {name!r}: it lives in a subgraph of a {parent.op_type} node")
            _pad_outputs(parent, body)
            if cur in {o.name for o in body.output} or cur in {i.name for i in body.input}:
                cur = builder(body).node("Identity", [cur], f"{cur}.out")
            vi = onnx.ValueInfoProto(name=cur)
            if t is not None:
                vi.type.CopyFrom(t)
            body.output.append(vi)
            new = builder(enclosing).fresh(f"{name}.{parent.op_type.lower()}_out")
            if parent.op_type == "If":
                other_attr = "else_branch" if attr == "then_branch" else "then_branch"
                other = _graph_attr(parent, other_attr)
                if kind == "stats":
                    ph_value = IDENTITY_ROW
                else:
                    # same rank as the real value (nested Ifs check it): empty, or a 0 for a scalar;
                    # the branch's statistics say "not run", and dumps skip tensors that did not run
                    rank = len(t.tensor_type.shape.dim) if t is not None and t.tensor_type.HasField("shape") else 1
                    ph_value = np.zeros([0] * rank, onnx.helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type))
                ph = builder(other).const(ph_value, "placeholder")
                if ph in {o.name for o in other.output}:
                    ph = builder(other).node("Identity", [ph], "onnxprobe.placeholder")
                if t is not None and kind == "raw":
                    t = _loosen(t)  # the two branches now return different shapes
                    body.output[-1].type.CopyFrom(t)
                pvi = onnx.ValueInfoProto(name=ph)
                if t is not None:
                    pvi.type.CopyFrom(t)
                other.output.append(pvi)
                parent.output.append(new)
            else:
                parent.output.append(new)
                if parent.op_type == "Scan":
                    for a in parent.attribute:
                        if a.name in ("scan_output_axes", "scan_output_directions"):
                            a.ints.append(0)
                if kind == "stats":
                    new = builder(enclosing).merge_rows(new)
                elif t is not None:
                    t = _with_leading_dim(t)
            cur = new
        return cur

    row_type = helper.make_tensor_type_proto(TensorProto.DOUBLE, [1, ROW_WIDTH])
    want_raw = (lambda n: n in raw) if isinstance(raw, set) else (lambda n: bool(raw))
    probes: list[Probe] = []
    for ref in refs:
        site = producer.get(ref.name)
        if site is None:
            warnings.append(f"{ref.name}: no node produces it; not probed")
            continue
        t = types.get(ref.name)
        elem = t.tensor_type.elem_type if t is not None else None  # None: unknown, Cast at run time
        probe = Probe(ref=ref, stats_on_host=host_stats)
        g = site.graph
        if stats and elem not in UNSUPPORTED_STATS_DTYPES:
            row = builder(g).stats_row(ref.name, elem, ref.shape if ref.shape is not None else _rank_only(t), nonfinite)
            top = lift(row, site.chain, row_type, "stats") if site.chain else row
            final = STATS_PREFIX + ref.name
            if final in names:
                final = builder(out.graph).fresh(final)
            builder(out.graph).graph.node.append(helper.make_node("Identity", [top], [final], name=builder(out.graph).fresh(f"onnxprobe/stats/{ref.name}")))
            names.add(final)
            add_top_output(final, row_type)
            probe.stats_output = final
        if shapes and not site.chain:
            shp = builder(g).node("Shape", [ref.name], SHAPE_PREFIX + ref.name)
            add_top_output(shp, helper.make_tensor_type_proto(TensorProto.INT64, [None]))
            probe.shape_output = shp
        if want_raw(ref.name):
            if not site.chain:
                add_top_output(ref.name, t)
                probe.raw_output = ref.name
            elif t is None or not elem:
                warnings.append(f"{ref.name}: type unknown inside a subgraph; raw values not saved")
            else:
                probe.raw_output = lift(ref.name, site.chain, t, "raw")
                add_top_output(probe.raw_output, _with_leading_dims(t, _loop_depth(site.chain)))
        probes.append(probe)
    for b in builders.values():
        b.interleave()
    return out, probes


def needs_masking(st) -> bool:
    """True when a "deferred" fast row came out non-finite: the tensor holds NaN or Inf (or squares past
    float32's range) and its statistics must be recomputed with expose(..., nonfinite="masked")."""
    import math

    return st is not None and st.nan == 0 and st.inf == 0 and not math.isfinite(st.sumsq)


def _suffix_axes(shape: tuple) -> list[int]:
    """The shortest suffix of axes holding >= 256 elements (symbolic dims count as large)."""
    axes, block = [], 1
    for ax in range(len(shape) - 1, -1, -1):
        axes.insert(0, ax)
        block *= shape[ax] if isinstance(shape[ax], int) and shape[ax] > 0 else 1024
        if block >= 256:
            break
    return axes


def _rank_only(t: onnx.TypeProto | None) -> tuple | None:
    if t is None or not t.tensor_type.HasField("shape"):
        return None
    return tuple(None for _ in t.tensor_type.shape.dim)


def _loosen(t: onnx.TypeProto) -> onnx.TypeProto:
    if not t.tensor_type.HasField("shape"):
        return t
    return helper.make_tensor_type_proto(t.tensor_type.elem_type, [None] * len(t.tensor_type.shape.dim))


def _loop_depth(chain: tuple) -> int:
    return sum(1 for n, _ in chain if n.op_type in ("Loop", "Scan"))


def _with_leading_dim(t: onnx.TypeProto) -> onnx.TypeProto:
    return _with_leading_dims(t, 1)


def _with_leading_dims(t: onnx.TypeProto, k: int) -> onnx.TypeProto:
    if k == 0 or not t.tensor_type.HasField("shape"):
        return t
    dims = [None] * k + [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.tensor_type.shape.dim]
    return helper.make_tensor_type_proto(t.tensor_type.elem_type, dims)
