"""In-graph pair metrics: the nodes that reduce two tensors a (under test) and b (the reference) of one
shape to one [1, 9] float64 row (layout ``PAIR_ROW``), so that only scalars leave the run; the host
turns the row into the same ``PairMetrics`` as the host's ``stats.pooled.pair_sums`` (``compare.fused``).

d = a - b in float32 (as the host's fast path), |d| with its maximum and flat argmax, max |b|, the
allclose excess max(|d| - rtol |b|), max |d| / (|b| + 1e-30); the sums Σ|d|, Σd², Σa², Σb² are
float32 partials over the shortest suffix of axes holding >= 16 elements, added in float64 (the
statistics' two-level summation: relative error about 1e-7); Σab is (Σa² + Σb² - Σd²) / 2, taken on the
host in float64 (one product and one sum fewer per pair). A NaN or Inf on either side shows as a
non-finite Σd², Σa² or Σb²: the caller measures that pair on the host instead (masked, float64).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from onnxprobe.graph.stats_nodes import StatsBuilder, suffix_axes

PAIR_ROW = ("max_abs", "b_absmax", "excess", "max_rel", "argmax", "sum_abs", "dd", "bb", "aa")


class PairBuilder(StatsBuilder):
    def __init__(self, graph, opset: int, names: set[str]):
        super().__init__(graph, opset, names)
        self._aa: dict[str, str] = {}  # tensor -> the float64 [4] sums of the row that summed its Σa² (last)

    def pair_row(self, a: str, b: str, shape: tuple, rtol: float, base: str) -> str:
        """The [1, 9] float64 row of the pair (a, b): float32 tensors of the static rank of ``shape``.
        ``rtol`` 0: no allclose excess (it is max |d|). Σa² of an ``a`` that an earlier row summed (the
        layer's tensor, compared with B's and then with B's node recomputed on A's inputs) is taken from
        that row, not summed again."""
        flat = self.const(np.array([-1], np.int64))
        key = a
        if not shape:  # scalars: as [1] (the maxima below keep their dims to concatenate)
            a, b, shape = (self.node("Reshape", [a, flat], f"{base}.a1"), self.node("Reshape", [b, flat], f"{base}.b1"), (1,))
        axes, wide = suffix_axes(shape)
        d = self.node("Sub", [a, b], f"{base}.d")
        ad = self.node("Abs", [d], f"{base}.ad")
        absb = self.node("Abs", [b], f"{base}.absb")
        max_abs = self.red("ReduceMax", ad, f"{base}.max_abs", keepdims=1)
        argmax = self.node("ArgMax", [self.node("Reshape", [ad, flat], f"{base}.ad_flat")], f"{base}.argmax", axis=0, keepdims=1)
        b_absmax = self.red("ReduceMax", absb, f"{base}.b_absmax", keepdims=1)
        excess = (self.red("ReduceMax", self.node("Sub", [ad, self.node("Mul", [absb, self.f32(rtol)], f"{base}.rtol_b")],
                                                  f"{base}.excess_el"), f"{base}.excess", keepdims=1) if rtol else max_abs)
        rel = self.node("Div", [ad, self.node("Add", [absb, self.f32(1e-30)], f"{base}.absb_tiny")], f"{base}.rel")
        max_rel = self.red("ReduceMax", rel, f"{base}.max_rel", keepdims=1)
        terms = [("ReduceSum", ad, "sum_abs"), ("ReduceSumSquare", d, "dd"), ("ReduceSumSquare", b, "bb")]
        earlier = self._aa.get(key)
        if earlier is None:
            terms.append(("ReduceSumSquare", a, "aa"))
        sums = self._sums(terms, base, axes, wide)
        if earlier is None:
            self._aa[key] = sums
        else:
            sums = self.node("Concat", [sums, self.node("Gather", [earlier, self.const(np.array([3], np.int64))], f"{base}.aa",
                                                        axis=0)], f"{base}.sums4", axis=0)
        # the four maxima (keepdims: all-ones shapes of one rank) concatenate and cast together
        maxima = self.node("Cast", [self.node("Reshape", [self.node("Concat", [max_abs, b_absmax, excess, max_rel], f"{base}.maxima",
                                                                    axis=0), flat], f"{base}.maxima1")], f"{base}.maxima64", to=TensorProto.DOUBLE)
        arg64 = self.node("Cast", [argmax], f"{base}.argmax64", to=TensorProto.DOUBLE)
        row = self.node("Concat", [maxima, arg64, sums], f"{base}.row9", axis=0)
        return self.node("Reshape", [row, self.const(np.array([1, len(PAIR_ROW)], np.int64))], f"{base}.row")
