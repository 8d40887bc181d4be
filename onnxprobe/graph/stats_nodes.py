"""In-graph statistics: the nodes that reduce a tensor to one [1, 11] float64 row (layout
``stats.tensor_stats.ROW``: count, nan, nonfinite, min, max, shift, Σ(x-c), Σ(x-c)², Σ|x|, non-zero, and
the unit the three sums are in: 1 but for float64 tensors past ``UNIT_RANGE``, whose sums, scaled back to
their own values, would overflow or underflow float64),
and the nodes that merge the rows a Loop or Scan stacks.

Moments are taken about a shift c = (min + max) / 2, so they never cancel (``stats.tensor_stats``).
Two forms:

- the **fast row** (float tensors of known rank): min, max, x - c, Σ(x-c), Σ(x-c)² (as Σ of (x-c)·(x-c)),
  Σ|x| (as Σ of Abs) and the non-zero count (x cast to bool and back, summed); Σ|x| and the count are
  float32 partials over the shortest suffix of axes holding >= 16 elements, added in float64 (a two-level
  summation, relative error about 1e-7; a suffix of more than 16384 elements sums in float64 from the
  start; Σ|x| over a suffix of more than 1024 elements, or of a length not known here, too: a float32
  sum of one value repeated drifts by 3e-5 over 16381 elements, of 1e4 + noise by 1e-4 over 1M); the
  shifted moments Σ(x-c) and Σ(x-c)² are summed in float64 from the start (x - c taken in float64, where
  it is exact: the variance takes their difference, which cancels on skewed tensors);
- the **careful row** (in float64): NaN and Inf masked out, and x - c divided by the half-range before it is summed
  and squared (so nothing overflows or underflows, from subnormals to 3.4e38), the sums scaled back in
  float64. A fast row that cannot be trusted (``stats.tensor_stats.needs_rerun``: a NaN or Inf inside, a
  half-range outside 1e-18..1e17) is recomputed in this form: in the same run through an If node
  ("in-graph": self-contained, for ``mark --stats``), or by the caller in one more run over just those
  tensors ("deferred": If nodes cost onnxruntime a subgraph each to initialise).

Other tensors (ints, bool, double, unknown rank) are cast to float64 whole and take the careful form;
int64 and uint64 ones are first centred in the integers (``_int_centered``: float64 keeps 53 bits, and
2^62 + 1, + 3, + 5 cast whole all read 2^62, a std of 0).

A reader that assembles the statistics itself (``stats_parts``: layers, whose plans are made for the run's
input shapes) gets, for a float tensor of known size, the **block form** instead: the tensor as rows of
256-1024 elements, each reduced in float32 about its own mean, merged on the host in float64
(``block_parts``, ``TensorStats.from_blocks``); a NaN, an Inf or squares past float32's range show as
non-finite sums, and such a tensor is rerun in the careful form ("deferred").
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxprobe.graph.builder import INTEGER_TYPES, GraphBuilder, interleave
from onnxprobe.stats.tensor_stats import BLOCK_CORE, BLOCK_PARTS, COL, MAX_COL, MIN_COL, ROW, SAFE_HALF_RANGE, UNIT_RANGE
from onnxprobe.types import element_count

ROW_WIDTH = len(ROW)
# additive columns merge by sum, MIN_COL by min and MAX_COL by max; the shifted sums need a common shift
IDENTITY_ROW = np.array([[0, 0, 0, np.inf, -np.inf, 0, 0, 0, 0, 0, 1]], dtype=np.float64)
UNSUPPORTED_STATS_DTYPES = {TensorProto.STRING, TensorProto.UNDEFINED}
EXACT_IN_DOUBLE = INTEGER_TYPES
WIDE_INTS = {TensorProto.INT64: TensorProto.INT64, TensorProto.UINT64: TensorProto.UINT64}  # past float64's 53 bits
MIN_OPSET = 9  # IsNaN and Where
# a tensor of more elements is summarised in the block form a slice at a time (StatsBuilder._chunked): 16 MiB of float32
CHUNK_ELEMENTS = 1 << 22
TINY32 = np.float32(1.4e-45)  # the smallest float32 subnormal: a half-range that is 0 divides by this

__all__ = ["StatsBuilder", "block_size", "IDENTITY_ROW", "ROW_WIDTH", "UNSUPPORTED_STATS_DTYPES", "MIN_OPSET"]


class StatsBuilder(GraphBuilder):
    """A GraphBuilder that appends to one graph and emits statistics rows there."""

    def __init__(self, graph: onnx.GraphProto, opset: int, names: set[str]):
        super().__init__(names, opset, nodes=graph.node)
        self.graph = graph
        self.original = len(graph.node)  # nodes before this pass: interleave() places the rest among them
        self._int_extremes: dict[str, tuple[str, str]] = {}  # int64 tensor -> its int64 [1] min and max (``exact_extremes``)

    def interleave(self) -> None:
        interleave(self.graph, self.original)

    def red(self, op: str, x: str, base: str, axes: list[int] | None = None, keepdims: int = 1) -> str:
        """A Reduce* with a readable output stem."""
        return self.reduce(op, x, axes, keepdims, base=base)

    def f32(self, v) -> str:
        return self.const(np.array(v, np.float32))

    def f64(self, v) -> str:
        return self.const(np.array(v, np.float64))

    # -- the row ----------------------------------------------------------------------------------------
    def stats_row(self, x: str, elem_type: int | None, shape: tuple | None = None, nonfinite: str = "in-graph") -> str:
        """The [1, 10] float64 row of tensor ``x``. ``nonfinite``: how a fast row that cannot be trusted is
        fixed: "in-graph" (an If), "deferred" (the caller reruns it), or "masked" (the careful row at once)."""
        b = x
        f, axes, row, elem = self._prepared(x, elem_type, shape)
        size = self._size(f, b)
        if elem_type in EXACT_IN_DOUBLE:  # integers and bool: no NaN or Inf to mask, every sum exact enough in float64
            return self._fast_row(f, b, axes, size, row, elem, self._int_centered(x, f, elem_type))
        if nonfinite == "masked":
            return self._careful_row(f, b, axes, size, elem, row)
        fast = self._fast_row(f, b, axes, size, row, elem)
        if nonfinite == "deferred":
            return fast
        return self._checked(fast, f, b, axes, size, row, elem)

    def stats_parts(self, x: str, elem_type: int | None, shape: tuple | None = None,
                    extras: bool = True) -> tuple[str, str | None, int]:
        """For a reader that assembles the statistics itself (no NaN or Inf: statistics that cannot be
        trusted are rerun, as "deferred"): (first, second, block). A float tensor of a known static shape
        whose size some ``block_size`` divides: its per-block summaries (``block_parts``; second None),
        else the fast row's two computed pieces (block 0; the count from the tensor's shape): the extremes
        (min, max, shift; float32, or float64 for the flat forms; 3 elements, all-ones dims) and the float64
        sums (Σ(x-c), Σ(x-c)², Σ|x|, non-zero count), five nodes fewer than a row. ``extras`` False: the
        block form leaves out Σ|x| and the zero count (``block_parts``); the fast pieces keep them."""
        f, axes, row, elem = self._prepared(x, elem_type, shape)
        block = block_size(shape) if elem == TensorProto.FLOAT else None
        if block:
            return self.block_parts(f, x, block, extras, element_count(shape)), None, block
        return (*self._fast_parts(f, x, axes, row, elem, self._int_centered(x, f, elem_type)), 0)

    def block_parts(self, f: str, b: str, block: int, extras: bool = True, count: int | None = None) -> str:
        """The float32 tensor ``f`` as rows of ``block`` elements, each reduced to ``BLOCK_PARTS`` (its
        extremes, its mean m_b, Σ(x - m_b), Σ(x - m_b)², Σ|x|, its count of zeros): one [7 k, 1] output,
        merged on the host in float64 (``TensorStats.from_blocks``). About each block's own mean, the
        float32 sums do not cancel (k ~ 1, where the midpoint shift of ``_fast_parts`` left k = 137 on a
        sigmoid map and needed float64 sums from the first addition); no full-size float64 copy, no
        float64 reductions, no outer sums in the graph (PP-OCRv4 det 800x608, layers --all: 6,094 -> 4,741
        nodes; measured on a prototype, interleaved: session 0.24 -> 0.16 s, first run 0.46 -> 0.27 s).
        ``extras`` False: without Σ|x| and the zero count (``BLOCK_CORE``, [5 k, 1]; five nodes fewer: what the
        layers table shows needs neither; a [3600, 256] float32 tensor's kernels 0.56 -> 0.30 ms). A tensor of more
        than CHUNK_ELEMENTS (``count``) is summarised a slice of its rows at a time (``_chunked``)."""
        x = self.node("Reshape", [f, self.const(np.array([-1, block], np.int64))], f"{b}.blocks")
        if count is not None and count > CHUNK_ELEMENTS:
            return self._chunked(x, b, block, extras, count)
        return self.node("Concat", self._block_part_list(x, b, extras), f"{b}.blockparts", axis=0)

    def _chunked(self, x: str, b: str, block: int, extras: bool, count: int) -> str:
        """``block_parts`` of the [k, block] rows ``x`` a slice of at most CHUNK_ELEMENTS at a time, each part's
        slices concatenated in row order (the layout the host merges): a slice's x - m and its square are the only
        temporaries, where the whole tensor's were two of its size beside it (a [1, 64, 1024, 1024] activation's
        statistics took 512 MB more than the model, `layers` 2.05x plain inference's peak memory)."""
        k, rows = count // block, max(1, CHUNK_ELEMENTS // block)
        each = [self._block_part_list(self.slice(x, [s], [min(k, s + rows)], [0]), f"{b}.c{s // rows}", extras)
                for s in range(0, k, rows)]
        parts = [self.node("Concat", [c[i] for c in each], f"{b}.part{i}", axis=0) for i in range(len(each[0]))]
        return self.node("Concat", parts, f"{b}.blockparts", axis=0)

    def _block_part_list(self, x: str, b: str, extras: bool) -> list[str]:
        """The [rows, 1] parts of ``block_parts`` of the [rows, block] tensor ``x``, in the layout's order."""
        lo = self.red("ReduceMin", x, f"{b}.bmin", axes=[1])
        hi = self.red("ReduceMax", x, f"{b}.bmax", axes=[1])
        m = self.red("ReduceMean", x, f"{b}.bmean", axes=[1])
        d = self.node("Sub", [x, m], f"{b}.bd")
        r = self.red("ReduceSum", d, f"{b}.bs1", axes=[1])
        # Mul and ReduceSum, not ReduceSumSquare: onnxruntime's float32 ReduceSumSquare is slower (_sums)
        q = self.red("ReduceSum", self.node("Mul", [d, d], f"{b}.bdd"), f"{b}.bs2", axes=[1])
        parts = {"min": lo, "max": hi, "mean": m, "sum_d": r, "sumsq_d": q}
        if extras:
            parts["sumabs"] = self.red("ReduceSum", self.node("Abs", [x], f"{b}.babs"), f"{b}.bsumabs", axes=[1])
            parts["zeros"] = self.red("ReduceSum", self._is_zero(x, f"{b}.bz"), f"{b}.bzeros", axes=[1])
        return [parts[k] for k in (BLOCK_PARTS if extras else BLOCK_CORE)]

    def _is_zero(self, x: str, base: str) -> str:
        """x == 0 (float32) as 1.0 or 0.0 in float32, for a count of zeros. Equal (float inputs from opset 11) is
        faster than the cast of x to bool that older opsets need (onnxruntime 1.32, 2 threads, 1.9M float32
        elements: Equal, Cast and ReduceSum 0.63 ms against 0.82 ms for two Casts and ReduceSum; the whole
        PP-OCRv4 det `layers --all` did not move beyond the noise, interleaved on a quiet machine)."""
        if self.opset >= 11:
            hit = self.node("Equal", [x, self.f32(0.0)], f"{base}.b")
        else:
            hit = self.node("Not", [self.node("Cast", [x], f"{base}.nz", to=TensorProto.BOOL)], f"{base}.b")
        return self.node("Cast", [hit], f"{base}.f", to=TensorProto.FLOAT)

    def _prepared(self, x: str, elem_type: int | None, shape: tuple | None) -> tuple[str, list[int], int | None, int]:
        """(tensor, axes, row, element type) that the rows reduce: float32 (a copy of float16/bfloat16)
        with block sums over ``suffix_axes`` (``row``: their length) when the rank is known; else (integers,
        bool, double, an unknown type or rank) a flat float64 copy, summed whole (row 0)."""
        if elem_type in EXACT_IN_DOUBLE or not (elem_type in (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16) and shape):
            d = x if elem_type == TensorProto.DOUBLE else self.node("Cast", [x], f"{x}.f64", to=TensorProto.DOUBLE)
            return self.node("Reshape", [d, self.const(np.array([-1], np.int64))], f"{x}.flat"), [0], 0, TensorProto.DOUBLE
        f = x if elem_type == TensorProto.FLOAT else self.node("Cast", [x], f"{x}.f32", to=TensorProto.FLOAT)
        axes, row = suffix_axes(shape)
        return f, axes, row, TensorProto.FLOAT

    def _row(self, cols: list[str], b: str) -> str:
        row = self.node("Concat", cols, f"{b}.row10", axis=0)
        return self.node("Reshape", [row, self.const(np.array([1, ROW_WIDTH], np.int64))], f"{b}.row")

    def _size(self, f: str, b: str) -> str:
        flat = self.const(np.array([-1], np.int64))
        return self.node("Cast", [self.node("Reshape", [self.node("Size", [f], f"{b}.size"), flat], f"{b}.size1")],
                         f"{b}.size.f64", to=TensorProto.DOUBLE)

    def _as64(self, t: str, b: str, tag: str) -> str:
        """A [1]-shaped float64 copy of a reduced scalar (any shape of one element)."""
        r = self.node("Reshape", [t, self.const(np.array([-1], np.int64))], f"{b}.{tag}.flat")
        return self.node("Cast", [r], f"{b}.{tag}.f64", to=TensorProto.DOUBLE)

    def _sums(self, terms: list[tuple[str, str, str]], b: str, axes: list[int], row: int | None = 0, double: bool = False,
              exact: tuple[str, ...] = (), ready: tuple[str, ...] = ()) -> str:
        """Two-level sums of several tensors of one shape: partial reductions over ``axes`` (``_parts``), then one
        Cast and one float64 ReduceSum along the rows for all of them (``_tail``): shape [len(terms)]."""
        parts, to64 = self._parts(terms, b, axes, row, double, exact, ready)
        return self._tail(parts, b, to64)

    def _parts(self, terms: list[tuple[str, str, str]], b: str, axes: list[int], row: int | None = 0, double: bool = False,
               exact: tuple[str, ...] = (), ready: tuple[str, ...] = ()) -> tuple[list[str], bool]:
        """The partial reductions of ``_sums``' terms over ``axes`` (keepdims, so they stack on axis 0; all in float64
        when ``row``, their length, is past BLOCK_MAX; Σ|x| when it is past ABS_ROW_MAX or not known here, None),
        in the terms' order, and whether ``_tail`` casts them to float64. ``double``: the terms are float64 already.
        ``exact``: the tags of terms summed in float64 from the start (see _fast_parts); ``ready``: the tags of those
        among them that are float64 tensors already.

        Each term's nodes are made one after the other (its copy, its square, its partial sum): onnxruntime runs them
        in that order, so that one term's full-size temporaries are freed before the next one's are made (made
        together, every square of a row was held at once: PP-OCRv4 det 800x608 diff --all, a pair and its
        introduced error summed in one tail, 304 -> 313 MB)."""
        wide = row is not None and row > BLOCK_MAX
        long_abs = (row is None or row > ABS_ROW_MAX) and any(tag == "sumabs" for _, _, tag in terms)
        exact = () if wide or double else (*exact, "sumabs") if long_abs else exact
        # onnxruntime's float32 ReduceSumSquare and ReduceL1 over some axes are 3-6x slower than Mul / Abs and
        # a ReduceSum over the same axes (measured on CPU, a [1, 24, 200, 152] tensor): take that form. Not
        # for the float64 terms: there ReduceSumSquare is as fast and no float64 square is held (PP-OCRv4
        # det 800x608 layers --all: 1.21 -> 1.17 s, 284 -> 260 MB, interleaved)
        prep = {"ReduceSumSquare": lambda t, tag: self.node("Mul", [t, t], f"{b}.{tag}.sq"),
                "ReduceL1": lambda t, tag: self.node("Abs", [t], f"{b}.{tag}.abs")}
        cast: dict[str, str] = {}  # one float64 copy per tensor, however many terms read it
        parts = []
        for op, t, tag in terms:
            if wide and not double and tag not in ready:
                t = self.node("Cast", [t], f"{b}.{tag}.wide", to=TensorProto.DOUBLE)
            if tag in exact:
                if op == "ReduceL1":  # |x| taken in float32 (exact) and then cast: one float64 copy, no float64 ReduceL1
                    op, t = "ReduceSum", self.node("Abs", [t], f"{b}.{tag}.abs")
                if t not in cast:
                    cast[t] = t if tag in ready else self.node("Cast", [t], f"{b}.{tag}.f64", to=TensorProto.DOUBLE)
                t = cast[t]
            elif op in prep:
                op, t = "ReduceSum", prep[op](t, tag)
            part = self.red(op, t, f"{b}.{tag}.part", axes=axes, keepdims=1)
            if exact and tag not in exact:  # the float32 parts join the float64 ones (block sums: a 1/16 or less of the tensor)
                part = self.node("Cast", [part], f"{b}.{tag}.part64", to=TensorProto.DOUBLE)
            parts.append(part)
        return parts, not double and not exact

    def _tail(self, parts: list[str], b: str, to64: bool) -> str:
        """The float64 sums of ``parts`` (``_parts``), in their order: stacked, cast to float64 where ``to64``, summed
        along their rows."""
        # one row per term (parts stacked on axis 0, where each part's leading dims are whole): the outer sum
        # runs along contiguous rows; a [blocks, terms] layout summed down its columns made onnxruntime's
        # strided ReduceSum cost more than the four partial sums together (measured on PP-OCRv4 det)
        cat = self.node("Concat", parts, f"{b}.parts", axis=0) if len(parts) > 1 else parts[0]
        if to64:
            cat = self.node("Cast", [cat], f"{b}.parts64", to=TensorProto.DOUBLE)
        rows = self.node("Reshape", [cat, self.const(np.array([len(parts), -1], np.int64))], f"{b}.parts2d")
        return self.red("ReduceSum", rows, f"{b}.sums", axes=[1], keepdims=0)

    def _int_centered(self, x: str, f: str, elem_type: int | None) -> tuple[str, str, str, str] | None:
        """For an int64 or uint64 tensor ``x`` (``f``: its flat float64 copy): (lo, hi, c, x - c) in float64,
        with c the midpoint rounded to a float64 and x - c taken in the integers (it wraps modulo 2^64 and
        reads back right as int64 while the range is under 2^62; past that, float64's rounding is far below
        the spread and x - c is taken in float64). lo and hi are rounded to float64 but kept in the type
        (uint64's 2^64 - 1 rounds to 2^64: the largest float64 below it instead); distinct values that round
        to one float64 keep their spread in the integer sums (``TensorStats.with_spread``; hi moved up an
        ulp past every value, and past UINT64_MAX). None for any other type."""
        if elem_type not in WIDE_INTS:
            return None
        b, to = x, elem_type
        flat = self.node("Reshape", [x, self.const(np.array([-1], np.int64))], f"{b}.iflat")
        if to == TensorProto.UINT64:  # onnxruntime has no uint64 ReduceMin/Max; rounding to float64 is
            # monotonic, so the extremes of the float64 copy are the rounded extremes, as the Casts below give
            lo = self.red("ReduceMin", f, f"{b}.imin.f64", keepdims=1)
            hi = self.red("ReduceMax", f, f"{b}.imax.f64", keepdims=1)
        else:
            lo_i = self.red("ReduceMin", flat, f"{b}.imin", keepdims=1)
            hi_i = self.red("ReduceMax", flat, f"{b}.imax", keepdims=1)
            self._int_extremes[x] = (lo_i, hi_i)
            lo = self.node("Cast", [lo_i], f"{b}.imin.f64", to=TensorProto.DOUBLE)
            hi = self.node("Cast", [hi_i], f"{b}.imax.f64", to=TensorProto.DOUBLE)
        top = float(np.nextafter(2.0 ** 63 if to == TensorProto.INT64 else 2.0 ** 64, 0))  # the largest float64 in the type
        mid = self.node("Floor", [self.node("Add", [self.node("Mul", [lo, self.f64(0.5)], f"{b}.ilo2"),
                                                     self.node("Mul", [hi, self.f64(0.5)], f"{b}.ihi2")], f"{b}.imid_raw")], f"{b}.imid_f")
        c = self.node("Min", [mid, self.f64([top])], f"{b}.ishift")
        lo = self.node("Min", [lo, self.f64([top])], f"{b}.imin.in")
        hi = self.node("Min", [hi, self.f64([top])], f"{b}.imax.in")
        c_i = self.node("Cast", [c], f"{b}.ishift.int", to=to)
        d_i = self.node("Sub", [flat, c_i], f"{b}.id")
        if to == TensorProto.UINT64:
            d_i = self.node("Cast", [d_i], f"{b}.id.signed", to=TensorProto.INT64)
        d_int = self.node("Cast", [d_i], f"{b}.id.f64", to=TensorProto.DOUBLE)
        wide = self.node("Greater", [self.node("Sub", [hi, lo], f"{b}.irange"), self.f64(2.0 ** 61)], f"{b}.iwide")
        d = self.node("Where", [wide, self.node("Sub", [f, c], f"{b}.id_wide"), d_int], f"{b}.d_exact")
        return lo, hi, c, d

    def exact_extremes(self, x: str, elem_type: int | None) -> str | None:
        """[min, max] of an int64 or uint64 tensor ``x`` in its own type, exactly, beside its row (whose
        extremes are float64: 2^60 + 1 reads 2^60 there); None for any other type. An int64 row's own
        reductions where the row made them; uint64, which onnxruntime has no ReduceMin/Max of, moved by -2^63
        into int64 (a wrap that keeps the order), reduced there and moved back. Empty: the type's limits,
        which a reader ignores (no value)."""
        if elem_type not in WIDE_INTS:
            return None
        b = x
        if elem_type == TensorProto.INT64:
            if x not in self._int_extremes:
                flat = self.node("Reshape", [x, self.const(np.array([-1], np.int64))], f"{b}.iflat")
                self._int_extremes[x] = (self.red("ReduceMin", flat, f"{b}.imin", keepdims=1),
                                         self.red("ReduceMax", flat, f"{b}.imax", keepdims=1))
            return self.node("Concat", list(self._int_extremes[x]), f"{b}.extremes", axis=0)
        half = self.const(np.array([2 ** 63], np.uint64))
        flat = self.node("Reshape", [x, self.const(np.array([-1], np.int64))], f"{b}.uflat")
        moved = self.node("Cast", [self.node("Sub", [flat, half], f"{b}.umoved")], f"{b}.umoved.i64", to=TensorProto.INT64)
        both = self.node("Concat", [self.red("ReduceMin", moved, f"{b}.umin", keepdims=1),
                                    self.red("ReduceMax", moved, f"{b}.umax", keepdims=1)], f"{b}.uextremes", axis=0)
        return self.node("Add", [self.node("Cast", [both], f"{b}.uextremes.u64", to=TensorProto.UINT64), half],
                         f"{b}.extremes")

    def _fast_parts(self, f: str, b: str, axes: list[int], row: int | None, elem: int,
                    centered: tuple[str, str, str, str] | None = None) -> tuple[str, str]:
        """(extremes [lo, hi, c] concatenated on axis 0, the float64 sums [4]) of ``f``: float32 (or, for
        the flat forms, float64, ``elem``). ``centered``: the extremes, shift and x - c where they were
        taken apart from ``f`` (``_int_centered``)."""
        if centered is not None:
            lo, hi, c, d = centered
        else:
            lo = self.red("ReduceMin", f, f"{b}.min", keepdims=1)
            hi = self.red("ReduceMax", f, f"{b}.max", keepdims=1)
            # (lo + hi) / 2 overflows to inf only for |x| near float32's limit: the sums then come out
            # non-finite, which needs_rerun catches (the careful row halves before it adds)
            half = self.f32(0.5) if elem == TensorProto.FLOAT else self.f64(0.5)
            c = self.node("Mul", [self.node("Add", [lo, hi], f"{b}.lohi"), half], f"{b}.shift")
            if elem == TensorProto.FLOAT:  # x - c in float64, where it is exact: float32's rounds each term
                # to an ulp of c, all the same way on a sparse map (1e-7s and one 1.0: the mean 7e-4 off)
                c64 = self.node("Cast", [c], f"{b}.shift.f64", to=TensorProto.DOUBLE)
                d = self.node("Sub", [self.node("Cast", [f], f"{b}.x.f64", to=TensorProto.DOUBLE), c64], f"{b}.d")
            else:
                d = self.node("Sub", [f, c], f"{b}.d")
        # the non-zero count: x != 0 as a bool, cast back and summed (4x faster than Σ|sign(x)|)
        nonzero = self.node("Cast", [self.node("Cast", [f], f"{b}.nonzero.b", to=TensorProto.BOOL)], f"{b}.nonzero.f",
                            to=elem)
        # Σ(x-c) and Σ(x-c)² in float64 from the first addition: the variance s2/n - (s1/n)² cancels by
        # ((c - mean) / std)², which a skewed tensor makes large (a sigmoid map of ~1e-7 with rare 1s:
        # 137², where float32 block sums left its std 1.7% off; QA against numpy float64 on PP-OCRv4 det)
        sums = self._sums([("ReduceSum", d, "s1"), ("ReduceSumSquare", d, "s2"), ("ReduceL1", f, "sumabs"),
                           ("ReduceSum", nonzero, "nonzero")], b, axes, row, double=elem == TensorProto.DOUBLE,
                          exact=("s1", "s2"), ready=("s1", "s2"))
        return self.node("Concat", [lo, hi, c], f"{b}.mmc", axis=0), sums  # lo, hi and c keep their (all ones) dims

    def _fast_row(self, f: str, b: str, axes: list[int], size: str, row: int | None = 0, elem: int = TensorProto.FLOAT,
                  centered: tuple[str, str, str, str] | None = None) -> str:
        mmc, sums = self._fast_parts(f, b, axes, row, elem, centered)
        # of rank 1 (axes [0]: the flat float64 rows), [3] already; else [3, 1, ...]
        extremes = self.node("Cast", [mmc], f"{b}.mmc.f64", to=TensorProto.DOUBLE) if axes == [0] else self._as64(mmc, b, "mmc")
        return self._row([size, self.f64([0.0, 0.0]), extremes, sums, self.f64([1.0])], b)

    def _careful_row(self, f: str, b: str, axes: list[int], size: str, elem: int, row: int | None = 0) -> str:
        """NaN / Inf masked out (counted), x - c divided by the half-range, sums scaled back in float64.
        ``f`` is float32 (or, for the cast-to-double path, float64). A float32 ``f`` is taken in float64
        (its x - c exact there; float32's, divided by the half-range, rounded each term of a sparse map of
        1e-7s and one 1.0 the same way: the mean 2.6e-3 off; the careful row is the rare one)."""
        if elem == TensorProto.FLOAT:
            f, elem = self.node("Cast", [f], f"{b}.careful.f64", to=TensorProto.DOUBLE), TensorProto.DOUBLE
        dt = np.float64 if elem == TensorProto.DOUBLE else np.float32
        const = (lambda v: self.const(np.array(v, dt)))
        nan = self.node("IsNaN", [f], f"{b}.isnan")
        if self.opset >= 10:
            bad = self.node("Or", [nan, self.node("IsInf", [f], f"{b}.isinf")], f"{b}.nonfinite")
        else:
            bad = self.node("IsNaN", [self.node("Sub", [f, f], f"{b}.f_minus_f")], f"{b}.nonfinite")
        lo = self.red("ReduceMin", self.node("Where", [bad, const(np.inf), f], f"{b}.for_min"), f"{b}.min", keepdims=1)
        hi = self.red("ReduceMax", self.node("Where", [bad, const(-np.inf), f], f"{b}.for_max"), f"{b}.max", keepdims=1)
        lo2 = self.node("Mul", [lo, const(0.5)], f"{b}.lo2")
        hi2 = self.node("Mul", [hi, const(0.5)], f"{b}.hi2")
        c = self.node("Add", [lo2, hi2], f"{b}.c_raw")
        h = self.node("Sub", [hi2, lo2], f"{b}.h_raw")
        am = self.node("Max", [self.node("Abs", [lo], f"{b}.abslo"), self.node("Abs", [hi], f"{b}.abshi")], f"{b}.am_raw")
        # no finite value at all: c, h and the abs-max are not finite; use 0, 1 and 1 (every term is masked)
        c = self.node("Where", [self.node("IsNaN", [c], f"{b}.c_nan"), const(0.0), c], f"{b}.c")
        tiny = const(TINY32 if dt == np.float32 else 5e-324)
        ok_h = self.node("IsNaN", [self.node("Sub", [h, h], f"{b}.h_minus_h")], f"{b}.h_nonfinite")
        h = self.node("Where", [ok_h, const(1.0), self.node("Max", [h, tiny], f"{b}.h_tiny")], f"{b}.h")
        ok_am = self.node("IsNaN", [self.node("Sub", [am, am], f"{b}.am_minus_am")], f"{b}.am_nonfinite")
        am = self.node("Where", [ok_am, const(1.0), self.node("Max", [am, tiny], f"{b}.am_tiny")], f"{b}.am")
        d = self.node("Div", [self.node("Sub", [self.node("Where", [bad, c, f], f"{b}.clean"), c], f"{b}.centered"), h], f"{b}.d")
        a = self.node("Div", [self.node("Where", [bad, const(0.0), f], f"{b}.clean0"), am], f"{b}.scaled")
        count = (lambda m, tag: (self.node("Cast", [m], f"{b}.{tag}.f", to=elem), tag))
        nanc, nanc_tag = count(nan, "nan")
        badc, badc_tag = count(bad, "nonfinite")
        nzc, nzc_tag = count(self.node("Cast", [f], f"{b}.nonzero.b", to=TensorProto.BOOL), "nonzero")
        sums = self._sums([("ReduceSum", d, "s1"), ("ReduceSumSquare", d, "s2"), ("ReduceL1", a, "sumabs"),
                           ("ReduceSum", nanc, nanc_tag), ("ReduceSum", badc, badc_tag), ("ReduceSum", nzc, nzc_tag)], b, axes, row,
                          double=elem == TensorProto.DOUBLE, exact=("s1", "s2"))  # see _fast_parts
        h64, am64 = self._as64(h, b, "h"), self._as64(am, b, "am")
        # the unit u of the sums (TensorStats.unit): 1, or for float64 past UNIT_RANGE the abs-max itself
        # (the host takes the power of two below it; any unit will do, the row carries it)
        extreme = self.node("Or", [self.node("Greater", [am64, self.f64(UNIT_RANGE[1])], f"{b}.am_big"),
                                   self.node("Less", [am64, self.f64(UNIT_RANGE[0])], f"{b}.am_small")], f"{b}.am_extreme")
        unit = self.node("Where", [extreme, am64, self.f64([1.0])], f"{b}.unit")
        hu = self.node("Div", [h64, unit], f"{b}.hu")
        scale = self.node("Concat", [hu, self.node("Mul", [hu, hu], f"{b}.hu2"), self.node("Div", [am64, unit], f"{b}.amu"),
                                     self.f64([1.0, 1.0, 1.0])], f"{b}.scale", axis=0)
        sums = self.node("Mul", [sums, scale], f"{b}.sums_scaled")  # s1 * h/u, s2 * (h/u)², sumabs * am/u, counts
        pick = (lambda cols, tag: self.node("Gather", [sums, self.const(np.array(cols, np.int64))], f"{b}.{tag}", axis=0))
        extremes = self._as64(self.node("Concat", [lo, hi, c], f"{b}.mmc", axis=0), b, "mmc")
        return self._row([size, pick([3, 4], "counts"), extremes, pick([0, 1, 2, 5], "moments"), unit], b)

    def _checked(self, fast: str, f: str, b: str, axes: list[int], size: str, row: int | None, elem: int = TensorProto.FLOAT) -> str:
        """An If that returns the careful row when the fast one cannot be trusted (the condition of
        ``needs_rerun``, computed in the graph)."""
        take = (lambda cols, tag: self.node("Gather", [self.node("Reshape", [fast, self.const(np.array([-1], np.int64))], f"{b}.fastflat"),
                                                        self.const(np.array(cols, np.int64))], f"{b}.{tag}", axis=0))
        vals = take([COL["min"], COL["max"], COL["shift"], COL["sum_d"], COL["sumsq_d"], COL["sumabs"]], "checked")
        total = self.red("ReduceSum", vals, f"{b}.checked_total", keepdims=0)  # NaN/Inf anywhere shows here
        bad = self.node("IsNaN", [self.node("Sub", [total, total], f"{b}.total_minus_total")], f"{b}.has_nonfinite")
        ext = take([COL["min"], COL["max"]], "extremes")
        half = self.red("ReduceSum", self.node("Mul", [ext, self.f64([-0.5, 0.5])], f"{b}.halves"), f"{b}.half", keepdims=0)
        small = self.node("And", [self.node("Greater", [half, self.f64(0.0)], f"{b}.half_pos"),
                                  self.node("Less", [half, self.f64(SAFE_HALF_RANGE[0])], f"{b}.half_small")], f"{b}.tiny_range")
        big = self.node("Greater", [half, self.f64(SAFE_HALF_RANGE[1])], f"{b}.huge_range")
        cond = self.node("Or", [bad, self.node("Or", [small, big], f"{b}.range_unsafe")], f"{b}.needs_care")
        cond = self.node("Reshape", [cond, self.const(np.array([], np.int64))], f"{b}.needs_care_s")
        slow_graph = onnx.GraphProto(name=self.fresh(f"{b}.careful_stats"))
        slow = StatsBuilder(slow_graph, self.opset, self.names)
        slow_graph.output.append(helper.make_tensor_value_info(slow._careful_row(f, b, axes, size, elem, row),
                                                               TensorProto.DOUBLE, [1, ROW_WIDTH]))
        keep_graph = onnx.GraphProto(name=self.fresh(f"{b}.fast_stats"))
        keep = StatsBuilder(keep_graph, self.opset, self.names)
        keep_graph.output.append(helper.make_tensor_value_info(keep.node("Identity", [fast], f"{b}.fast"), TensorProto.DOUBLE, [1, ROW_WIDTH]))
        out = self.fresh(f"{b}.row_checked")
        self.nodes.append(helper.make_node("If", [cond], [out], name=self.fresh(f"onnxprobe/If/{b}"),
                                           then_branch=slow_graph, else_branch=keep_graph))
        return out

    def merge_rows(self, stacked: str) -> str:
        """Rows stacked by Loop/Scan, [..., 1, 11] -> one merged [1, 11] row (empty stack -> identity row):
        counts add, extremes combine, the sums move to the largest unit u (r_i = u_i / u) and the shifted
        ones to the merged range's shift c (δ_i = (c_i - c) / u): Σ|x| = Σ_i r_i a_i,
        Σ(x-c) = Σ_i r_i s1_i + n_i δ_i, Σ(x-c)² = Σ_i r_i² s2_i + 2 δ_i r_i s1_i + n_i δ_i²."""
        s = stacked
        r = self.node("Reshape", [stacked, self.const(np.array([-1, ROW_WIDTH], np.int64))], f"{s}.rows")
        col = (lambda k: self.node("Gather", [r, self.const(np.array(k, np.int64))], f"{s}.col{k}", axis=1))
        sums = self.red("ReduceSum", r, f"{s}.sum", axes=[0], keepdims=1)
        lo = self.red("ReduceMin", col(MIN_COL), f"{s}.min", keepdims=0)
        hi = self.red("ReduceMax", col(MAX_COL), f"{s}.max", keepdims=0)
        c = self.node("Add", [self.node("Mul", [lo, self.f64(0.5)], f"{s}.lo2"), self.node("Mul", [hi, self.f64(0.5)], f"{s}.hi2")], f"{s}.c_raw")
        c = self.node("Where", [self.node("IsNaN", [self.node("Sub", [c, c], f"{s}.c_minus_c")], f"{s}.c_bad"), self.f64(0.0), c], f"{s}.c")
        n = self.node("Sub", [col(COL["count"]), col(COL["nonfinite"])], f"{s}.n")
        units = col(COL["unit"])
        u = self.red("ReduceMax", units, f"{s}.unit", keepdims=0)
        ratio = self.node("Div", [units, u], f"{s}.uratio")
        delta = self.node("Div", [self.node("Sub", [col(COL["shift"]), c], f"{s}.delta_raw"), u], f"{s}.delta")
        s1i = self.node("Mul", [col(COL["sum_d"]), ratio], f"{s}.s1u")
        s2i = self.node("Mul", [col(COL["sumsq_d"]), self.node("Mul", [ratio, ratio], f"{s}.uratio2")], f"{s}.s2u")
        absi = self.node("Mul", [col(COL["sumabs"]), ratio], f"{s}.absu")
        sumabs = self.red("ReduceSum", absi, f"{s}.sumabs", keepdims=0)
        nd = self.node("Mul", [n, delta], f"{s}.nd")
        s1 = self.red("ReduceSum", self.node("Add", [s1i, nd], f"{s}.s1i"), f"{s}.s1", keepdims=0)
        s2_terms = self.node("Add", [self.node("Add", [s2i, self.node("Mul", [self.node("Mul", [delta, s1i], f"{s}.ds1"), self.f64(2.0)],
                                                                                f"{s}.2ds1")], f"{s}.s2a"),
                                     self.node("Mul", [nd, delta], f"{s}.ndd")], f"{s}.s2i")
        s2 = self.red("ReduceSum", s2_terms, f"{s}.s2", keepdims=0)
        moments = self.node("Reshape", [self.node("Concat", [self.node("Reshape", [t, self.const(np.array([1], np.int64))], f"{s}.{k}1")
                                                             for t, k in ((lo, "lo"), (hi, "hi"), (c, "cc"), (s1, "s1"), (s2, "s2"),
                                                                          (sumabs, "sa"))],
                                                  f"{s}.lhcs", axis=0), self.const(np.array([1, 6], np.int64))], f"{s}.lhcs2")
        counts = self.node("Gather", [sums, self.const(np.array([COL["count"], COL["nan"], COL["nonfinite"]], np.int64))], f"{s}.counts", axis=1)
        nonzero = self.node("Gather", [sums, self.const(np.array([COL["nonzero"]], np.int64))], f"{s}.nonzero", axis=1)
        unit = self.node("Reshape", [u, self.const(np.array([1, 1], np.int64))], f"{s}.unit11")
        merged = self.node("Concat", [counts, moments, nonzero, unit], f"{s}.merged_raw", axis=1)
        return merged


# block_parts' rows: at least BLOCK_ROW[0] elements (its [7 k, 1] output is at most 7/256 of the tensor), at
# most BLOCK_ROW[1]: onnxruntime's float32 row sums drift with their length (std against numpy float64 on
# PP-OCRv4 rec, worst tensor: rows of up to 4096 elements 1.5e-6, 2048 3.3e-7, 1024 7.5e-8; the same time)
BLOCK_ROW = (256, 1024)


def block_size(shape: tuple | None) -> int | None:
    """The largest divisor of the size of a tensor of static ``shape`` within BLOCK_ROW (None: a shape not
    known here, or no such divisor)."""
    if not shape or not all(isinstance(d, int) and d > 0 for d in shape):
        return None
    n = element_count(shape)
    return next((b for b in range(min(n, BLOCK_ROW[1]), BLOCK_ROW[0] - 1, -1) if n % b == 0), None)


BLOCK_MIN = 16  # partial sums over at least this many elements (at most 1/16 of the tensor goes to float64)
BLOCK_MAX = 16384  # over more than this many, float32 partial sums drift: those tensors sum in float64
# Σ|x| adds terms of one sign, so its float32 rounding errors need not cancel: over rows of more than this
# many (or of a length not known when the graph is made) it is summed in float64 from the start. Measured
# against numpy float64 (abs_mean): a constant over rows of 1024 1.9e-6, 4093 4e-6, 16381 3e-5; 1e4 + N(0, 1)
# over a row of 1M (a symbolic length: layers --inputs-dir with batches of several shapes, mark --stats) 1e-4
ABS_ROW_MAX = BLOCK_ROW[1]


def suffix_axes(shape: tuple) -> tuple[list[int], int | None]:
    """The shortest suffix of axes holding >= BLOCK_MIN elements (symbolic dims count as large), and its
    number of elements (None when a symbolic dim is among them): the length of the partial sums (_sums)."""
    axes, block, known = [], 1, True
    for ax in range(len(shape) - 1, -1, -1):
        axes.insert(0, ax)
        fixed = isinstance(shape[ax], int) and shape[ax] > 0
        known = known and fixed
        block *= shape[ax] if fixed else 1024
        if block >= BLOCK_MIN:
            break
    return axes, block if known else None
