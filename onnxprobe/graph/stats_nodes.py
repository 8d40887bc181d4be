"""In-graph statistics: the nodes that reduce a tensor to one [1, 9] float64 row (layout
``stats.tensor_stats.ROW``), and the nodes that merge the rows a Loop or Scan stacks."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxprobe.graph.builder import GraphBuilder, interleave
from onnxprobe.stats.tensor_stats import MAX_COL, MIN_COL

ROW_WIDTH = 9
# additive columns merge by sum, MIN_COL by min and MAX_COL by max (see stats.tensor_stats.ROW)
IDENTITY_ROW = np.array([[0, 0, 0, np.inf, -np.inf, 0, 0, 0, 0]], dtype=np.float64)
UNSUPPORTED_STATS_DTYPES = {TensorProto.STRING, TensorProto.UNDEFINED}
MIN_OPSET = 9  # IsNaN and Where


class StatsBuilder(GraphBuilder):
    """A GraphBuilder that appends to one graph and emits statistics rows there."""

    def __init__(self, graph: onnx.GraphProto, opset: int, names: set[str]):
        super().__init__(names, opset, nodes=graph.node)
        self.graph = graph
        self.original = len(graph.node)  # nodes before this pass: interleave() places the rest among them

    def interleave(self) -> None:
        interleave(self.graph, self.original)

    def red(self, op: str, x: str, base: str, axes: list[int] | None = None, keepdims: int = 1) -> str:
        """A Reduce* with a readable output stem."""
        return self.reduce(op, x, axes, keepdims, base=base)

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
        d = self.node("Reshape", [d, self.const(np.array([-1], np.int64))], f"{b}.flat")
        nan = self.node("IsNaN", [d], f"{b}.isnan")
        bad = self.node("IsNaN", [self.node("Sub", [d, d], f"{b}.d_minus_d")], f"{b}.nonfinite")
        zero = self.const(np.array(0.0))
        clean = self.node("Where", [bad, zero, d], f"{b}.finite")
        lo = self.red("ReduceMin", self.node("Where", [bad, self.const(np.array(np.inf)), d], f"{b}.for_min"), f"{b}.min")
        hi = self.red("ReduceMax", self.node("Where", [bad, self.const(np.array(-np.inf)), d], f"{b}.for_max"), f"{b}.max")

        def count(mask: str, tag: str) -> str:
            return self.red("ReduceSum", self.node("Cast", [mask], f"{b}.{tag}.f64", to=TensorProto.DOUBLE), f"{b}.{tag}.count")

        nonzero = self.node("Cast", [d], f"{b}.nonzero", to=TensorProto.BOOL)
        size = self.node("Cast", [self.node("Shape", [d], f"{b}.size")], f"{b}.size.f64", to=TensorProto.DOUBLE)
        cols = [
            size, count(nan, "nan"), count(bad, "nonfinite"), lo, hi, count(nonzero, "nonzero"),
            self.red("ReduceSum", clean, f"{b}.sum"),
            self.red("ReduceSumSquare", clean, f"{b}.sumsq"),
            self.red("ReduceL1", clean, f"{b}.sumabs"),
        ]
        return self._row(cols, b)

    def _row(self, cols: list[str], b: str) -> str:
        row = self.node("Concat", cols, f"{b}.row9", axis=0)
        return self.node("Reshape", [row, self.const(np.array([1, ROW_WIDTH], np.int64))], f"{b}.row")

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
        parts = [self.red(op, t, f"{b}.{tag}.part", axes=axes, keepdims=1) for op, t, tag in (
            ("ReduceL1", self.node("Sign", [f], f"{b}.sign"), "nonzero"), ("ReduceSum", f, "sum"),
            ("ReduceSumSquare", f, "sumsq"), ("ReduceL1", f, "sumabs"))]
        parts = self.node("Cast", [self.node("Concat", parts, f"{b}.parts", axis=-1)], f"{b}.parts64", to=TensorProto.DOUBLE)
        sums = self.red("ReduceSum", self.node("Reshape", [parts, self.const(np.array([-1, 4], np.int64))], f"{b}.parts2d"),
                           f"{b}.sums", axes=[0], keepdims=0)
        lo = self.red("ReduceMin", f, f"{b}.min", keepdims=1)
        hi = self.red("ReduceMax", f, f"{b}.max", keepdims=1)
        extremes = self.node("Cast", [self.node("Reshape", [self.node("Concat", [lo, hi], f"{b}.minmax", axis=0),
                                                            self.const(np.array([2], np.int64))], f"{b}.minmax2")],
                             f"{b}.minmax64", to=TensorProto.DOUBLE)
        fast = self._row([size, self.const(np.array([0.0, 0.0])), extremes, sums], b)
        if nonfinite == "deferred":
            return fast
        total = self.red("ReduceSum", sums, f"{b}.sums_total", keepdims=0)  # NaN/Inf in any sum shows here
        nonfinite = self.node("IsNaN", [self.node("Sub", [total, total], f"{b}.total_minus_total")], f"{b}.has_nonfinite")
        cond = self.node("Reshape", [nonfinite, self.const(np.array([], np.int64))], f"{b}.has_nonfinite_s")
        slow_graph = onnx.GraphProto(name=self.fresh(f"{b}.masked_stats"))
        slow = StatsBuilder(slow_graph, self.opset, self.names)
        slow_graph.output.append(helper.make_tensor_value_info(slow._masked_row(f, b, axes, size), TensorProto.DOUBLE, [1, ROW_WIDTH]))
        keep_graph = onnx.GraphProto(name=self.fresh(f"{b}.fast_stats"))
        keep = StatsBuilder(keep_graph, self.opset, self.names)
        keep_graph.output.append(helper.make_tensor_value_info(keep.node("Identity", [fast], f"{b}.fast"), TensorProto.DOUBLE, [1, ROW_WIDTH]))
        out = self.fresh(f"{b}.row_checked")
        self.nodes.append(helper.make_node("If", [cond], [out], name=self.fresh(f"onnxprobe/If/{b}"),
                                           then_branch=slow_graph, else_branch=keep_graph))
        return out

    def _size(self, f: str, b: str) -> str:
        flat = self.const(np.array([-1], np.int64))
        return self.node("Cast", [self.node("Reshape", [self.node("Size", [f], f"{b}.size"), flat], f"{b}.size1")],
                         f"{b}.size.f64", to=TensorProto.DOUBLE)

    def _total(self, t: str, op: str, tag: str, b: str, axes: list[int]) -> str:
        """float32 partial reductions over ``axes``, added up in float64: shape [1]."""
        flat = self.const(np.array([-1], np.int64))
        part = self.red(op, t, f"{b}.{tag}.part", axes=axes, keepdims=0)
        part = self.node("Cast", [self.node("Reshape", [part, flat], f"{b}.{tag}.partflat")], f"{b}.{tag}.part64", to=TensorProto.DOUBLE)
        return self.red("ReduceSum", part, f"{b}.{tag}")

    def _extreme(self, t: str, op: str, b: str, tag: str) -> str:
        flat = self.const(np.array([-1], np.int64))
        r = self.node("Reshape", [self.red(op, t, f"{b}.{tag}.r"), flat], f"{b}.{tag}.flat")
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
            return self.node("Where", [bad, self.const(np.array(fill, np.float32)), f], f"{b}.for_{tag}")

        clean = masked(0.0, "sum")
        cols = [self.node("Identity", [size], f"{b}.size_in"), count(nan, "nan"), count(bad, "nonfinite"),
                self._extreme(masked(np.inf, "min"), "ReduceMin", b, "min"), self._extreme(masked(-np.inf, "max"), "ReduceMax", b, "max"),
                count(self.node("Cast", [f], f"{b}.nonzero", to=TensorProto.BOOL), "nonzero"),
                self._total(clean, "ReduceSum", "sum", b, axes), self._total(clean, "ReduceSumSquare", "sumsq", b, axes),
                self._total(clean, "ReduceL1", "sumabs", b, axes)]
        return self._row(cols, b)

    def merge_rows(self, stacked: str) -> str:
        """Rows stacked by Loop/Scan, [..., 1, 9] -> one merged [1, 9] row (empty stack -> identity row)."""
        r = self.node("Reshape", [stacked, self.const(np.array([-1, ROW_WIDTH], np.int64))], f"{stacked}.rows")
        s = self.red("ReduceSum", r, f"{stacked}.sum", axes=[0], keepdims=1)
        lo = self.red("ReduceMin", r, f"{stacked}.min", axes=[0], keepdims=1)
        hi = self.red("ReduceMax", r, f"{stacked}.max", axes=[0], keepdims=1)
        is_min = self.const(np.array([[c == MIN_COL for c in range(ROW_WIDTH)]]))
        is_max = self.const(np.array([[c == MAX_COL for c in range(ROW_WIDTH)]]))
        return self.node("Where", [is_min, lo, self.node("Where", [is_max, hi, s], f"{stacked}.maxmerge")], f"{stacked}.merged")


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
