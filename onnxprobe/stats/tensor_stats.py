"""Mergeable tensor statistics that are right on any distribution.

A ``TensorStats`` holds counts (all values, NaN, ±Inf, zeros), the extremes of the finite values, and
their first two moments about a shift ``c`` inside their range: ``s1 = Σ(x - c)`` and ``s2 = Σ(x - c)²``,
plus ``sumabs = Σ|x|``. Moments about a shift near the middle of the data do not cancel: the variance is
``s2/n - (s1/n)²`` with ``s1/n`` small, so a mean of 1000 with a spread of 0.001 keeps its digits, as do
values near 1e20, near 1e-30, float16 tensors and attention-mask fills of -3.4e38 (the graph scales
``x - c`` by the half-range before squaring where squares could overflow or underflow). float64 values
past ``UNIT_RANGE`` keep the three sums in a ``unit`` near their magnitude (their squares overflow
float64 past ~1.3e154 and underflow below ~1e-162), so every finite float64 has its statistics; int64
and uint64 values take x - c in the integers (``_from_int64``, whose extremes are the exact Python ints). A
single value, or a constant tensor, has a std of exactly 0; int64 values that differ though min and max
round to one float64 are ``distinct`` and keep the std of their exact integer sums (moving max an ulp up
to say so put it past every value, and past UINT64_MAX near 2^64).

The graph computes the row in float64 (``graph.stats_nodes``, layout ``ROW``); ``from_row`` reads it,
``from_array`` computes the same with numpy on the host. Two TensorStats merge by moving both to a
common shift (Chan et al.'s pairwise update), so statistics of a dataset are computed shard by shard;
``stats.moments`` merges them exactly, in any order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# the in-graph row: counts, the extremes, the shift, the three sums, the non-zero count, the unit of the sums
ROW = ("count", "nan", "nonfinite", "min", "max", "shift", "sum_d", "sumsq_d", "sumabs", "nonzero", "unit")
COL = {name: i for i, name in enumerate(ROW)}
# a tensor summarised block by block in the graph (graph.stats_nodes.block_parts): per block of B elements,
# float32, its extremes, its mean m_b, Σ(x - m_b), Σ(x - m_b)², Σ|x| and its count of zeros (from_blocks)
BLOCK_PARTS = ("min", "max", "mean", "sum_d", "sumsq_d", "sumabs", "zeros")
# the block form without its last two parts (Σ|x| and the zero count: abs_mean and zero_fraction, which the
# layers table does not show): ``TensorStats.extras`` False, graph.stats_nodes.block_parts(extras=False)
BLOCK_CORE = BLOCK_PARTS[:5]
MIN_COL, MAX_COL = COL["min"], COL["max"]
# a half-range outside these bounds may overflow or underflow float32 squares: the statistics are then
# recomputed with x - c scaled by the half-range (graph.stats_nodes, "careful" rows)
SAFE_HALF_RANGE = (1e-18, 1e17)
# float64 values whose magnitude is outside these bounds keep their sums in a unit u near their largest
# magnitude (s1 = Σ(x-c)/u, s2 = Σ((x-c)/u)², sumabs = Σ|x|/u): squares of values past ~1.3e154 overflow
# float64 (std and cosine of 1e160s read null, -inf dB) and those of values below ~1e-162 underflow
UNIT_RANGE = (2.0 ** -400, 2.0 ** 400)
# the most a float32 square loses below float32's normal range: half its smallest subnormal (from_blocks)
FLOAT32_SQUARE_LOSS = 2.0 ** -150


HOST_CHUNK = 1 << 22  # elements of a float32 tensor summarised on the host at a time (32 MB of float64 scratch)


def dot(x: np.ndarray, y: np.ndarray) -> float:
    """Σ x·y of two 1-D arrays, in their type (float64 here), without BLAS: OpenBLAS runs a dot of more than
    10,000 elements on its thread pool, whose wake-up on a busy machine cost 8-16 ms a call (measured: 65,536
    float64 elements, 2 loaded cores, 8.0 ms against 0.006 ms for numpy's own loop), several times per tensor,
    and splits the sum over as many threads as it runs, so its rounding depended on them: a Ray actor (one
    BLAS thread) and one process (one per CPU) gave one batch's Σx² 1 ulp apart. ``np.vecdot`` is such a
    BLAS dot; einsum's own loop, never BLAS for one output, sums in the same order on any machine."""
    return float(np.einsum("i,i->", x, y))


def rowdot(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Σ x·y along the rows of two 2-D arrays, with einsum's own loop as ``dot`` (not ``np.vecdot``, a BLAS dot
    per row, whose rounding depends on OpenBLAS's threads for rows of more than 10,000 elements)."""
    return np.einsum("ij,ij->i", x, y)


def unit_for(lo: float, hi: float) -> float:
    """The unit a tensor of finite extremes ``lo``, ``hi`` keeps its sums in: 1 inside UNIT_RANGE, else
    the power of two at or below its largest magnitude (so |x|/u < 2, and (x - c)/u squared, with x - c
    at least an ulp of the values, neither overflows nor underflows)."""
    am = max(abs(lo), abs(hi)) if math.isfinite(lo) and math.isfinite(hi) else 0.0
    if am == 0 or UNIT_RANGE[0] <= am <= UNIT_RANGE[1]:
        return 1.0
    return math.ldexp(1.0, math.frexp(am)[1] - 1)


def _converted(v: float, src: float, dst: float, power: int = 1) -> float:
    """v (in units of ``src``, to the ``power``) in units of ``dst``: through mantissas and exponents, so
    that no intermediate ratio overflows or underflows where the answer does not."""
    (ms, es), (md, ed) = math.frexp(src), math.frexp(dst)
    try:
        return math.ldexp(v * (ms / md) ** power, power * (es - ed))
    except OverflowError:
        return math.copysign(math.inf, v)


def _shift(lo: float, hi: float) -> float:
    return lo / 2 + hi / 2 if math.isfinite(lo) and math.isfinite(hi) else 0.0



def narrow_type(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is one of ml_dtypes' (what onnx maps BFLOAT16, the float8s, INT4 and UINT4 to): types
    numpy lacks, a void dtype to it (float8_e5m2 one of kind 'f' that np.save writes and np.load refuses)."""
    return dtype.type.__module__.startswith("ml_dtypes")


def widened(a: np.ndarray) -> np.ndarray:
    """A tensor of ml_dtypes' types (``narrow_type``: bfloat16, float8, int4, uint4) as float32, exactly (the
    same values), as onnxprobe reads every such tensor back, a weight's too (a float8 or int4 weight was saved
    as its raw bytes, numpy void '|V1', and had no statistics); else ``a`` itself."""
    return a.astype(np.float32) if narrow_type(a.dtype) else a


def has_statistics(dtype: np.dtype) -> bool:
    """Whether values of ``dtype`` get statistics: numbers, booleans and ml_dtypes' types (widened), not strings."""
    return dtype.kind in "biuf" or narrow_type(dtype)

@dataclass(frozen=True)
class TensorStats:
    """Statistics of one tensor: element ``count``, NaN, Inf and zero counts, min and max of the finite
    values, and their sums about ``shift`` (kept in units of ``unit`` so that nothing overflows); the
    properties ``mean``, ``std`` and ``abs_mean`` are derived from them (``to_dict`` gives what reports
    show). A tensor without finite values has min inf and max -inf (JSON: null). ``extras`` False: Σ|x| and the
    zero count were not computed (the light block form, ``api.layers(extras=False)``): ``zeros`` and ``sumabs``
    hold nothing, and ``abs_mean`` and ``zero_fraction`` are None."""

    count: int = 0
    nan: int = 0
    inf: int = 0
    zeros: int = 0
    min: float = math.inf
    max: float = -math.inf
    shift: float = 0.0  # c: the moments are about this value
    s1: float = 0.0  # Σ (x - c) over the finite values
    s2: float = 0.0  # Σ (x - c)² over the finite values
    sumabs: float = 0.0  # Σ |x| over the finite values
    unit: float = 1.0  # s1, sumabs in units of this, s2 in its square (UNIT_RANGE; 1 for all but extreme float64)
    distinct: bool = False  # values that differ though min == max (int64 past 2^53 rounded to one float64)
    extras: bool = True  # zeros and sumabs were computed (False: the light block form; abs_mean, zero_fraction None)

    @classmethod
    def from_row(cls, row: np.ndarray) -> "TensorStats":
        r = np.asarray(row, dtype=np.float64).reshape(-1)
        count, nan, nonfinite, nonzero = (int(round(v)) if math.isfinite(v) else -1 for v in
                                          (r[COL["count"]], r[COL["nan"]], r[COL["nonfinite"]], r[COL["nonzero"]]))
        # a fast row over a tensor holding NaN has a NaN non-zero count: read it as all non-zero
        # (that row is recomputed with masks anyway, see needs_rerun)
        nonzero = count if nonzero < 0 else nonzero
        nan, nonfinite = max(nan, 0), max(nonfinite, 0)
        unit = float(r[COL["unit"]]) if r.size > COL["unit"] else 1.0
        if count - nonfinite <= 0:  # no finite value (an empty tensor's integer extremes are the type's limits)
            return cls(count=max(count, 0), nan=nan, inf=max(nonfinite - nan, 0), zeros=max(count - nonzero, 0))
        out = cls(count=count, nan=nan, inf=nonfinite - nan, zeros=count - nonzero,
                  min=float(r[COL["min"]]), max=float(r[COL["max"]]), shift=float(r[COL["shift"]]),
                  s1=float(r[COL["sum_d"]]), s2=float(r[COL["sumsq_d"]]), sumabs=float(r[COL["sumabs"]]),
                  unit=unit if math.isfinite(unit) and unit > 0 else 1.0)
        return out.with_spread()

    def with_spread(self) -> "TensorStats":
        """``distinct`` set where min == max but the sums hold a spread: every float row of a constant has
        sums of exactly 0 about it (its shift is its value), so only integers that float64 rounds to one
        value (int64 rows, centred in the integers; merged parts of 2^62 and 2^62 + 1) get here."""
        if self.distinct or self.min != self.max or not self.finite or not (math.isfinite(self.s1) and math.isfinite(self.s2)):
            return self
        n = self.finite
        if self.s2 / n - (self.s1 / n) ** 2 <= 0:
            return self
        return TensorStats(self.count, self.nan, self.inf, self.zeros, self.min, self.max, self.shift, self.s1, self.s2,
                           self.sumabs, self.unit, True, self.extras)

    def with_extremes(self, lo: int, hi: int) -> "TensorStats":
        """These statistics of an int64 or uint64 tensor with its exact extremes (Python ints, as
        ``_from_int64`` gives them) for the row's float64 ones; as they are where no value is finite (an
        empty tensor's reductions give the type's limits)."""
        if not self.finite:
            return self
        return TensorStats(self.count, self.nan, self.inf, self.zeros, lo, hi, self.shift, self.s1, self.s2,
                           self.sumabs, self.unit, lo != hi and float(lo) == float(hi), self.extras)

    @classmethod
    def from_rows(cls, rows: np.ndarray) -> "TensorStats":
        """Merge several rows (e.g. one per loop iteration)."""
        out = cls()
        for r in np.asarray(rows, dtype=np.float64).reshape(-1, len(ROW)):
            out = out.merge(cls.from_row(r))
        return out

    @classmethod
    def from_blocks(cls, parts: np.ndarray, block: int, extras: bool = True) -> "TensorStats":
        """The statistics of a tensor of finite values from its per-block summaries (``BLOCK_PARTS``, each a
        row of k blocks of ``block`` elements). Each block's moments are about its own mean, so its
        float32 sums do not cancel however skewed or offset the tensor is; the blocks are merged here in
        float64 about the tensor's mean c (Chan et al.): Σ(x-c) = Σ_b r_b + B (m_b - c) and
        Σ(x-c)² = Σ_b q_b + 2 (m_b - c) r_b + B (m_b - c)². A block of one sign has Σ|x| = |B m_b + r_b|,
        as exact as its mean: its float32 Σ|x| adds terms that all round the same way on a near-constant
        block (1.9e-6 off over 1024 elements of one value, 1.4e-6 on a DenseNet Conv output, against numpy
        float64); blocks of both signs keep it. Within about 1e-7 of numpy float64 (a std 4.4e-7 off on
        2e4 + N(0, 1), whose squares lie on a coarse grid and sum in float32 rounding one way), and 3e-6 on spiky or sparse
        blocks (one large square swallows the rounding of the small ones in the float32 sums: README). A NaN or
        Inf in the tensor shows as a non-finite sum, which ``needs_rerun`` catches; so does a spread so small
        that the squares float32 flushes to 0 or rounds to a subnormal (each up to ``FLOAT32_SQUARE_LOSS`` off)
        may be 1e-7 of Σ(x-c)² (a half-range of 1e-18, values 2.5e-23 either side of 0: std 1.6e-4 off).
        ``extras`` False: ``parts`` holds ``BLOCK_CORE`` only (no Σ|x|, no zero count): ``extras`` False too."""
        return cls.from_many_blocks([(parts, block, extras)])[0]

    @classmethod
    def from_many_blocks(cls, items: list[tuple]) -> list["TensorStats"]:
        """``from_blocks`` of each (parts, block) or (parts, block, extras) of ``items``, in one pass of numpy
        calls per group of tensors of the same block size, count and layout (a run's 265 tensors took 265
        passes of ~15 small calls each). Each tensor is a row of its group's arrays, and every sum is taken
        along the row, as numpy takes it over the tensor alone (pairwise, one inner loop a row): the same
        statistics, bit for bit."""
        out: list = [None] * len(items)
        groups: dict[tuple[int, int, bool], list[tuple[int, np.ndarray]]] = {}
        for i, (parts, block, *rest) in enumerate(items):
            extras = bool(rest[0]) if rest else True
            p = np.asarray(parts, np.float64).reshape(len(BLOCK_PARTS if extras else BLOCK_CORE), -1)
            groups.setdefault((block, p.shape[1], extras), []).append((i, p))
        for (block, k, extras), members in groups.items():
            stacked = np.stack([p for _, p in members]).transpose(1, 0, 2)  # each [tensors, k]
            lo, hi, m, r, q = stacked[:5]
            n = k * block
            with np.errstate(all="ignore"):
                lows, highs = lo.min(axis=1), hi.max(axis=1)
                c = np.mean(m + r / block, axis=1)
                e = m - c[:, None]
                s1 = r.sum(axis=1) + block * e.sum(axis=1)
                s2 = q.sum(axis=1) + 2 * rowdot(e, r) + block * rowdot(e, e)
                if extras:
                    a, z = stacked[5:]
                    sumabs = np.where((lo >= 0) | (hi <= 0), np.abs(block * m + r), a).sum(axis=1)
                    zeros = z.sum(axis=1)
                else:  # not computed (BLOCK_CORE): extras False
                    sumabs = zeros = np.zeros(len(members))
                means_finite = np.isfinite(m).all(axis=1)
            for j, (i, _) in enumerate(members):
                low, high = float(lows[j]), float(highs[j])
                # a constant: sums of exactly 0 about it (its means finite: onnxruntime's ReduceMin/Max skip a
                # NaN, which then shows only in its block's mean and sums, and must reach needs_rerun); its
                # value is the extremes', not the float32 means' rounding, which ``with_spread`` would read as a spread
                if low == high and math.isfinite(low) and means_finite[j]:
                    out[i] = (cls(count=n, zeros=n if low == 0 else 0, min=low, max=low, shift=low, sumabs=abs(low) * n)
                              if extras else cls(count=n, min=low, max=low, shift=low, extras=False))
                    continue
                v2, nz = float(s2[j]), float(zeros[j])
                if n * FLOAT32_SQUARE_LOSS > 1e-7 * v2:  # squares lost below float32's subnormals may matter: rerun
                    v2 = math.nan
                out[i] = cls(count=n, zeros=int(nz) if math.isfinite(nz) and extras else 0, min=low, max=high,
                             shift=float(c[j]), s1=float(s1[j]), s2=max(v2, 0.0) if math.isfinite(v2) else v2,
                             sumabs=float(sumabs[j]) if extras else 0.0, extras=extras)
        return out

    @classmethod
    def from_array(cls, a: np.ndarray) -> "TensorStats":
        a = widened(np.asarray(a))
        if a.dtype.kind not in "biufc":
            raise TypeError(f"no statistics for dtype {a.dtype}")
        if a.dtype in (np.float32, np.float16) and a.size:
            fast = cls._from_float32(a.reshape(-1))
            if fast is not None:
                return fast
        if a.dtype.kind in "iu" and a.dtype.itemsize == 8 and a.size:
            return cls._from_int64(a.reshape(-1))
        x = a.astype(np.float64, copy=False).reshape(-1)
        finite = np.isfinite(x)
        nan = int(np.isnan(x).sum())
        f = x[finite] if not finite.all() else x
        if not f.size:
            return cls(count=int(x.size), nan=nan, inf=int(x.size - nan), zeros=0)
        lo, hi = float(f.min()), float(f.max())
        c = _shift(lo, hi)
        h = max(hi / 2 - lo / 2, 5e-324)
        am = max(abs(lo), abs(hi), 5e-324)
        u = unit_for(lo, hi)  # h/u <= 2 and am/u < 2: the sums scaled back to u stay in range
        if u == 1.0 and am >= UNIT_RANGE[0]:
            # inside UNIT_RANGE the sums of x - c and its squares cannot overflow: taken as they are, exact where
            # the values are integers (the mean of int8 [127, -128, 0, 1, 5, -5, 100, -100] read -4.4e-16 through
            # the division by h below, whose quotients round)
            d = f - c
            s1, s2 = float(d.sum()), dot(d, d)
        else:
            d = (f - c) / h  # |d| <= 1: no overflow or underflow in the sums, whatever the magnitude
            s1, s2 = float(d.sum()) * (h / u), dot(d, d) * (h / u) ** 2
        return cls(count=int(x.size), nan=nan, inf=int(x.size - finite.sum() - nan), zeros=int((x == 0).sum()),
                   min=lo, max=hi, shift=c, s1=s1, s2=s2, sumabs=float(np.abs(f / am).sum()) * (am / u), unit=u)

    @classmethod
    def _from_int64(cls, x: np.ndarray) -> "TensorStats":
        """``from_array`` of a flat int64 or uint64 tensor: x - c taken in the integers, before any rounding
        to float64 (which keeps 53 bits: 2^62 + 1, + 3, + 5 all read 2^62, a std of 0). c is the midpoint
        rounded to a float64 (so the shift the moments are about is the one the row holds); the
        difference wraps modulo 2^64 and reads back right as int64 while the range is under 2^62, past
        which float64's rounding is far below the spread anyway. min and max are the exact Python ints
        (2^64 - 1 rounds to 2^64, past uint64: JSON and CSV write them as they are)."""
        lo, hi = int(x.min()), int(x.max())
        c = float((lo + hi) // 2)
        limit = float(np.iinfo(x.dtype).max)  # 2^63 or 2^64 as a float64: one past the type
        c = min(c, float(np.nextafter(limit, 0)))
        if hi - lo < 2 ** 62:
            d = np.subtract(x, np.array(int(c), x.dtype)).view(np.int64).astype(np.float64)
        else:
            d = x.astype(np.float64) - c
        absx = np.abs(x.astype(np.float64))
        return cls(count=int(x.size), zeros=int(x.size - np.count_nonzero(x)), min=lo, max=hi, shift=c,
                   s1=float(d.sum()), s2=dot(d, d), sumabs=float(absx.sum()),
                   distinct=lo != hi and float(lo) == float(hi))

    @classmethod
    def _from_float32(cls, x: np.ndarray) -> "TensorStats | None":
        """``from_array`` of a flat float32 or float16 tensor of finite values, in a few passes over it and one float64 copy (None
        when it holds a NaN or Inf: the masked form then). x - c is exact in float64 and its square can
        neither overflow nor underflow there (float32's limits squared are within float64's), so no
        scaling is needed: the same sums as the masked form, 8-10x sooner on 64K-1M elements (measured:
        a 256K-element tensor 7.0 -> 0.7 ms), which is what makes summarising on the host cheaper than
        ~20 statistics nodes for tensors of up to a few MiB (``runtime.runners.base.SMALL_ON_HOST``)."""
        if x.dtype == np.float16:
            x = x.astype(np.float32)
        lo, hi = x.min(), x.max()  # NaN propagates through both
        if not (np.isfinite(lo) and np.isfinite(hi)):
            return None
        lo, hi = float(lo), float(hi)
        c = _shift(lo, hi)
        # a chunk at a time (one for most tensors, summed as whole): a large tensor's float64 copy and |x| took 3x the
        # tensor in scratch (a 512 MB activation of an OpenVINO run: 1.5 GB more at the peak, QA); the sums, about one
        # shift, add up alike
        s1 = s2 = sumabs = 0.0
        for k in range(0, x.size, HOST_CHUNK):
            part = x[k:k + HOST_CHUNK]
            d = part.astype(np.float64)
            d -= c
            s1, s2 = s1 + float(d.sum()), s2 + dot(d, d)
            sumabs += float(np.add.reduce(np.abs(part), dtype=np.float64))
        return cls(count=int(x.size), zeros=int(x.size - np.count_nonzero(x)), min=lo, max=hi, shift=c, s1=s1, s2=s2,
                   sumabs=sumabs)

    def merge(self, other: "TensorStats") -> "TensorStats":
        """Both moved to the shift of the merged range and to a common unit, then added (Chan et al.)."""
        lo, hi = min(self.min, other.min), max(self.max, other.max)
        c = _shift(lo, hi)
        parts = [t for t in (self, other) if t.finite]
        u = max([unit_for(lo, hi)] + [t.unit for t in parts])
        s1 = s2 = sumabs = 0.0
        for t in parts:
            n, d = t.finite, (t.shift - c) / u
            t1 = _converted(t.s1, t.unit, u)
            s1 += t1 + n * d
            s2 += _converted(t.s2, t.unit, u, 2) + 2 * d * t1 + n * d * d
            sumabs += _converted(t.sumabs, t.unit, u)
        # parts of one rounded value that differ (batches of 2^62 and of 2^62 + 1) show it in the merged sums
        return TensorStats(self.count + other.count, self.nan + other.nan, self.inf + other.inf, self.zeros + other.zeros,
                           lo, hi, c, s1, max(s2, 0.0), sumabs, u, any(t.distinct for t in parts),
                           self.extras and other.extras).with_spread()

    def scaled(self, f: float) -> "TensorStats":
        """The statistics of f·x (f > 0): a mean loss's gradients from a summed one's (the sums keep their
        values, in a unit f times larger)."""
        return TensorStats(self.count, self.nan, self.inf, self.zeros, self.min * f, self.max * f, self.shift * f,
                           self.s1, self.s2, self.sumabs, self.unit * f, self.distinct, self.extras)

    # -- derived -------------------------------------------------------------------------------------
    @property
    def finite(self) -> int:
        return self.count - self.nan - self.inf

    @property
    def mean(self) -> float:
        if not self.finite or not math.isfinite(self.s1):  # sums past float64's range (values near 1.8e308)
            return math.nan  # unknown, not clamped to an extreme that would pass for a mean
        m = self.shift + self.unit * (self.s1 / self.finite)
        # rounding never puts the mean outside the data: a float where one lies within it; an int64 tensor's exact
        # extreme (a Python int) where none does ([2^63 - 1000, 2^63 - 1] holds no float64: 2^63 is past the type)
        m = min(max(m, self.min), self.max)
        if isinstance(m, int) and self.min <= float(m) <= self.max:  # an exact extreme float64 holds within the data
            return float(m)
        return m

    def _var_in_units(self) -> float:
        """The variance in units of ``unit`` squared (where the true one may overflow float64)."""
        if not self.finite:
            return math.nan
        if self.min == self.max and not self.distinct:
            return 0.0
        if not (math.isfinite(self.s1) and math.isfinite(self.s2)):
            return math.nan
        n = self.finite
        return max(self.s2 / n - (self.s1 / n) ** 2, 0.0)

    @property
    def var(self) -> float:
        v = self._var_in_units()
        return v * self.unit * self.unit if v else v

    @property
    def std(self) -> float:
        return self.unit * math.sqrt(self._var_in_units()) if self.finite else math.nan

    @property
    def sum(self) -> float:
        """Σ x over the finite values."""
        return self.finite * self.shift + self.unit * self.s1

    def _sumsq_in_units(self) -> float:
        n, c = self.finite, self.shift / self.unit
        return max(self.s2 + 2 * c * self.s1 + n * c * c, 0.0)

    @property
    def sumsq(self) -> float:
        """Σ x² over the finite values (from the shifted moments: no cancellation, as every term adds)."""
        return self._sumsq_in_units() * self.unit * self.unit

    @property
    def norm(self) -> float:
        """The L2 norm of the finite values; taken at their scale where Σ x² in units would underflow or
        overflow (a constant 1e-300 or 1e160 kept about its shift in unit 1: n c² is 0 or inf, the norm is not)."""
        n, c = self.finite, self.shift / self.unit
        m = max(abs(c), math.sqrt(self.s2 / n) if n and self.s2 > 0 else 0.0)
        if not (m > 0 and math.isfinite(m)) or 1e-100 < m < 1e100:
            return self.unit * math.sqrt(self._sumsq_in_units())
        q = self.s2 / m / m + 2 * (c / m) * (self.s1 / m) + n * (c / m) * (c / m)
        return self.unit * m * math.sqrt(max(q, 0.0))

    @property
    def abs_mean(self) -> float | None:
        """Mean |x| over the finite values; of values of one sign, |mean|, from the shifted sums: Σ|x| is a
        plain sum, which onnxruntime's float64 ReduceSum rounds to 4.5e-7 of int64 values near 2^60. None
        where Σ|x| was not computed (``extras`` False)."""
        if not self.extras:
            return None
        if not self.finite:
            return math.nan
        m = self.mean  # NaN where its sums overflowed (values near float64's limit): Σ|x| is in units
        if (self.min >= 0 or self.max <= 0) and math.isfinite(m):
            return abs(m)
        return self.unit * (self.sumabs / self.finite)

    def __repr__(self) -> str:  # a notebook's view: the statistics, not the shifted sums they are kept as
        if not self.count:
            return "TensorStats(empty)"
        if not self.finite:
            return f"TensorStats(count={self.count}, nan={self.nan}, inf={self.inf}: no finite value)"
        g = (lambda v: f"{v:.6g}")
        return (f"TensorStats(count={self.count}, min={g(self.min)}, max={g(self.max)}, mean={g(self.mean)}, "
                f"std={g(self.std)}, nan={self.nan}, inf={self.inf})")

    @property
    def zero_fraction(self) -> float | None:
        """Zeros over the finite values, as every other statistic (NaN when there is none; None where the
        zeros were not counted, ``extras`` False)."""
        if not self.extras:
            return None
        return self.zeros / self.finite if self.finite else math.nan

    @property
    def has_nonfinite(self) -> bool:
        return bool(self.nan or self.inf)

    def to_dict(self) -> dict:
        """JSON-ready values: non-finite floats become None so that every JSON reader accepts them."""

        def num(v: float | None) -> float | None:
            return v if v is not None and math.isfinite(v) else None

        return {
            "count": self.count, "min": num(self.min), "max": num(self.max), "mean": num(self.mean),
            "std": num(self.std), "abs_mean": num(self.abs_mean), "nan": self.nan, "inf": self.inf,
            "zero_fraction": num(self.zero_fraction),
        }


def needs_rerun(st: TensorStats | None) -> bool:
    """True when a fast in-graph row (no masks, no scaling) cannot be trusted: the tensor holds NaN or Inf
    (a non-finite extreme or sum), or its half-range is so small or so large that float32 squares of
    ``x - c`` underflow or overflow. Such tensors are summarised again with a careful row."""
    if st is None or st.count == 0:
        return False
    vals = (st.min, st.max, st.shift, st.s1, st.s2, st.sumabs)
    if not all(math.isfinite(v) for v in vals):
        return True
    half = st.max / 2 - st.min / 2
    return half > 0 and not (SAFE_HALF_RANGE[0] <= half <= SAFE_HALF_RANGE[1])
