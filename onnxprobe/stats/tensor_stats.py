"""Mergeable tensor statistics.

A ``TensorStats`` holds additive moments (count, NaN / non-finite / non-zero counts, sum, sum of squares,
sum of |x|, all over finite values, accumulated in float64) plus min and max. Two of them merge exactly
and in any order, so statistics of a dataset can be computed shard by shard.

The graph computes the same nine numbers in-graph (``graph.expose``) as one float64 row, laid out as
``ROW``; ``from_row`` reads it. ``from_array`` computes them with numpy on the host.

Derived values: ``mean = sum / n_finite``, ``std = sqrt(max(sumsq / n_finite - mean**2, 0))`` (the
population standard deviation; float64 accumulation keeps the cancellation error below 1e-12 relative
for |mean| / std < 1e2), ``abs_mean = sumabs / n_finite``, ``zero_fraction = zeros / count``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# the in-graph row: counts, then the two extremes, then the four additive sums (kept together so that
# the graph reduces them in one pass)
ROW = ("count", "nan", "nonfinite", "min", "max", "nonzero", "sum", "sumsq", "sumabs")
MIN_COL, MAX_COL = ROW.index("min"), ROW.index("max")


@dataclass(frozen=True)
class TensorStats:
    count: int = 0
    nan: int = 0
    inf: int = 0
    zeros: int = 0
    min: float = math.inf
    max: float = -math.inf
    sum: float = 0.0
    sumsq: float = 0.0
    sumabs: float = 0.0

    @classmethod
    def from_row(cls, row: np.ndarray) -> "TensorStats":
        r = np.asarray(row, dtype=np.float64).reshape(-1)
        # a fast row over a tensor holding NaN has a NaN non-zero count: read it as all non-zero
        # (that row is recomputed with masks anyway, see graph.expose.needs_masking)
        count, nan, nonfinite, nonzero = (int(round(v)) if math.isfinite(v) else -1 for v in (r[0], r[1], r[2], r[5]))
        nonzero = count if nonzero < 0 else nonzero
        nan, nonfinite = max(nan, 0), max(nonfinite, 0)
        return cls(count=count, nan=nan, inf=nonfinite - nan, zeros=count - nonzero,
                   min=float(r[3]), max=float(r[4]), sum=float(r[6]), sumsq=float(r[7]), sumabs=float(r[8]))

    @classmethod
    def from_rows(cls, rows: np.ndarray) -> "TensorStats":
        """Merge several rows (e.g. one per loop iteration)."""
        out = cls()
        for r in np.asarray(rows, dtype=np.float64).reshape(-1, len(ROW)):
            out = out.merge(cls.from_row(r))
        return out

    @classmethod
    def from_array(cls, a: np.ndarray) -> "TensorStats":
        a = np.asarray(a)
        if a.dtype.kind not in "biufc":
            raise TypeError(f"no statistics for dtype {a.dtype}")
        x = a.astype(np.float64, copy=False).reshape(-1)
        nan = int(np.isnan(x).sum())
        finite = np.isfinite(x)
        f = x[finite]
        return cls(
            count=int(x.size), nan=nan, inf=int(x.size - finite.sum() - nan), zeros=int((x == 0).sum()),
            min=float(f.min()) if f.size else math.inf, max=float(f.max()) if f.size else -math.inf,
            sum=float(f.sum()), sumsq=float(np.dot(f, f)), sumabs=float(np.abs(f).sum()),
        )

    def merge(self, other: "TensorStats") -> "TensorStats":
        return TensorStats(
            count=self.count + other.count, nan=self.nan + other.nan, inf=self.inf + other.inf,
            zeros=self.zeros + other.zeros, min=min(self.min, other.min), max=max(self.max, other.max),
            sum=self.sum + other.sum, sumsq=self.sumsq + other.sumsq, sumabs=self.sumabs + other.sumabs,
        )

    # -- derived -------------------------------------------------------------------------------------
    @property
    def finite(self) -> int:
        return self.count - self.nan - self.inf

    @property
    def mean(self) -> float:
        return self.sum / self.finite if self.finite else math.nan

    @property
    def std(self) -> float:
        if not self.finite:
            return math.nan
        m = self.mean
        return math.sqrt(max(self.sumsq / self.finite - m * m, 0.0))

    @property
    def norm(self) -> float:
        """The L2 norm of the finite values."""
        return math.sqrt(self.sumsq)

    @property
    def abs_mean(self) -> float:
        return self.sumabs / self.finite if self.finite else math.nan

    @property
    def zero_fraction(self) -> float:
        return self.zeros / self.count if self.count else math.nan

    @property
    def has_nonfinite(self) -> bool:
        return bool(self.nan or self.inf)

    def to_dict(self) -> dict:
        """JSON-ready values: non-finite floats become None so that every JSON reader accepts them."""

        def num(v: float) -> float | None:
            return v if math.isfinite(v) else None

        return {
            "count": self.count, "min": num(self.min), "max": num(self.max), "mean": num(self.mean),
            "std": num(self.std), "abs_mean": num(self.abs_mean), "nan": self.nan, "inf": self.inf,
            "zero_fraction": num(self.zero_fraction),
        }
