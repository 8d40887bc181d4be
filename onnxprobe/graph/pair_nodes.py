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

PAIR_ROW = ("max_abs", "argmax", "b_absmax", "excess", "max_rel", "sum_abs", "dd", "aa", "bb")


class PairBuilder(StatsBuilder):
    def pair_row(self, a: str, b: str, shape: tuple, rtol: float, base: str) -> str:
        """The [1, 9] float64 row of the pair (a, b): float32 tensors of the static rank of ``shape``.
        ``rtol`` 0: no allclose excess (it is max |d|)."""
        axes, wide = suffix_axes(shape)
        d = self.node("Sub", [a, b], f"{base}.d")
        ad = self.node("Abs", [d], f"{base}.ad")
        absb = self.node("Abs", [b], f"{base}.absb")
        flat = self.const(np.array([-1], np.int64))
        max_abs = self.red("ReduceMax", ad, f"{base}.max_abs", keepdims=0)
        argmax = self.node("ArgMax", [self.node("Reshape", [ad, flat], f"{base}.ad_flat")], f"{base}.argmax", axis=0, keepdims=0)
        b_absmax = self.red("ReduceMax", absb, f"{base}.b_absmax", keepdims=0)
        excess = (self.red("ReduceMax", self.node("Sub", [ad, self.node("Mul", [absb, self.f32(rtol)], f"{base}.rtol_b")],
                                                  f"{base}.excess_el"), f"{base}.excess", keepdims=0) if rtol else max_abs)
        rel = self.node("Div", [ad, self.node("Add", [absb, self.f32(1e-30)], f"{base}.absb_tiny")], f"{base}.rel")
        max_rel = self.red("ReduceMax", rel, f"{base}.max_rel", keepdims=0)
        sums = self._sums([("ReduceSum", ad, "sum_abs"), ("ReduceSumSquare", d, "dd"), ("ReduceSumSquare", a, "aa"),
                           ("ReduceSumSquare", b, "bb")], base, axes, wide)
        scalars = [self.node("Cast", [self.node("Reshape", [t, flat], f"{base}.{k}.1")], f"{base}.{k}.64", to=TensorProto.DOUBLE)
                   for t, k in ((max_abs, "max_abs"), (argmax, "argmax"), (b_absmax, "b_absmax"), (excess, "excess"),
                                (max_rel, "max_rel"))]
        row = self.node("Concat", scalars + [sums], f"{base}.row10", axis=0)
        return self.node("Reshape", [row, self.const(np.array([1, len(PAIR_ROW)], np.int64))], f"{base}.row")
