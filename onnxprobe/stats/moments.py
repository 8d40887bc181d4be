"""Exactly mergeable moments for dataset statistics.

Sums are kept as lists of non-overlapping float64 partials (Shewchuk's algorithm, the one behind
``math.fsum``): the partials represent the exact real sum of everything merged so far, so merging
shards in any order and any grouping gives bit-identical results; ``value`` rounds once, at the end.
Counts are integers and min/max are exact by nature.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from onnxprobe.stats.tensor_stats import TensorStats


def _add(partials: list[float], x: float) -> list[float]:
    """Shewchuk's exact accumulation: partials + x, still exact and non-overlapping."""
    out = []
    for y in partials:
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo:
            out.append(lo)
        x = hi
    out.append(x)
    return out


def exact_sum(parts: list[float]) -> list[float]:
    """The exact sum of ``parts`` in canonical form: [rounded sum, rounded remainder, ...], so equal exact
    sums have equal representations whatever order they were built in."""
    acc: list[float] = []
    for p in parts:
        if math.isfinite(p):
            acc = _add(acc, p)
    out: list[float] = []
    while acc and len(out) < 64:
        v = math.fsum(acc)
        if v == 0:
            break
        out.append(v)
        rest: list[float] = []
        for p in acc + [-v]:
            rest = _add(rest, p)
        acc = [p for p in rest if p]
    return out


@dataclass
class Moments:
    count: int = 0
    nan: int = 0
    inf: int = 0
    zeros: int = 0
    min: float = math.inf
    max: float = -math.inf
    sum: list[float] = field(default_factory=list)
    sumsq: list[float] = field(default_factory=list)
    sumabs: list[float] = field(default_factory=list)

    @classmethod
    def from_stats(cls, st: TensorStats) -> "Moments":
        return cls(st.count, st.nan, st.inf, st.zeros, st.min, st.max, exact_sum([st.sum]), exact_sum([st.sumsq]), exact_sum([st.sumabs]))

    def merge(self, o: "Moments") -> "Moments":
        return Moments(self.count + o.count, self.nan + o.nan, self.inf + o.inf, self.zeros + o.zeros,
                       min(self.min, o.min), max(self.max, o.max), exact_sum(self.sum + o.sum),
                       exact_sum(self.sumsq + o.sumsq), exact_sum(self.sumabs + o.sumabs))

    def stats(self) -> TensorStats:
        return TensorStats(self.count, self.nan, self.inf, self.zeros, self.min, self.max,
                           math.fsum(self.sum), math.fsum(self.sumsq), math.fsum(self.sumabs))

    def to_dict(self) -> dict:
        def f(v: float) -> float | None:
            return v if math.isfinite(v) else None

        return {"count": self.count, "nan": self.nan, "inf": self.inf, "zeros": self.zeros, "min": f(self.min),
                "max": f(self.max), "sum": self.sum, "sumsq": self.sumsq, "sumabs": self.sumabs}

    @classmethod
    def from_dict(cls, d: dict) -> "Moments":
        return cls(int(d["count"]), int(d["nan"]), int(d["inf"]), int(d["zeros"]),
                   math.inf if d["min"] is None else float(d["min"]), -math.inf if d["max"] is None else float(d["max"]),
                   exact_sum(d["sum"]), exact_sum(d["sumsq"]), exact_sum(d["sumabs"]))
