"""A data-independent log-bucket histogram: mergeable exactly, in any order, across shards and workers.

Each finite value falls in a bucket fixed by its sign, binary exponent and the top bits of its mantissa:
``SUB`` buckets per octave, so a bucket spans at most 1/SUB (3.125 %) of its values' magnitude and a
percentile read from the histogram is within that (3.125 %) of the exact one, and never outside [min, max]:
it is read at its rank within its bucket, the bucket narrowed to the data's range. Zero has a bucket of its own. Bucket codes sort in value order, so percentiles need no
other data. Counts are integers: merging adds them, exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

SUB = 32
_OFFSET = 1100  # above float64's most negative exponent (-1074), so every magnitude code is positive
MAX_CODE = (1025 + _OFFSET) * SUB  # the largest magnitude code a float64 can have (frexp's exponent <= 1024)
CHUNK = 1 << 20  # Histogram.from_array's values at a time


@dataclass
class Histogram:
    counts: dict[int, int] = field(default_factory=dict)

    @classmethod
    def from_array(cls, a: np.ndarray) -> "Histogram":
        """The histogram of ``a``'s finite values, CHUNK of them at a time, a float32 one in float32 (its mantissa
        and exponent are float64's, exactly): a tensor's whole float64 copy, its codes and their sort took ~13 bytes
        a byte of it (a dataset's 128 MB tensors peaked at 3.2 GB beside 393 MB of plain inference)."""
        flat = np.asarray(a).reshape(-1)
        dtype = flat.dtype if flat.dtype in (np.float32, np.float64) else np.float64
        counts: dict[int, int] = {}
        for start in range(0, flat.size, CHUNK):
            x = flat[start:start + CHUNK].astype(dtype, copy=False)
            x = x[np.isfinite(x)]
            if not x.size:
                continue
            m, e = np.frexp(np.abs(x))  # |x| = m * 2**e, m in [0.5, 1)
            sub = np.minimum(((m - 0.5) * (2 * SUB)).astype(np.int64), SUB - 1)
            mag = (e.astype(np.int64) + _OFFSET) * SUB + sub + 1
            codes = np.where(x == 0, 0, np.where(x < 0, -mag, mag))
            low = int(codes.min())
            got = np.bincount(codes - low)  # at most 2 MAX_CODE + 1 bins: a count, not a sort
            for k in np.flatnonzero(got):
                counts[int(k) + low] = counts.get(int(k) + low, 0) + int(got[k])
        return cls(dict(sorted(counts.items())))

    def merge(self, other: "Histogram") -> "Histogram":
        out = dict(self.counts)
        for k, v in other.counts.items():
            out[k] = out.get(k, 0) + v
        return Histogram(out)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @staticmethod
    def value(code: int) -> float:
        """The middle of a bucket."""
        if code == 0:
            return 0.0
        mag = abs(code) - 1
        e, sub = divmod(mag, SUB)
        e -= _OFFSET
        mid = _ldexp(0.5 + (sub + 0.5) / (2 * SUB), e)
        return -mid if code < 0 else mid

    @staticmethod
    def bounds(code: int) -> tuple[float, float]:
        """The values a bucket holds, as [low, high] (zero's bucket: [0, 0])."""
        if code == 0:
            return 0.0, 0.0
        e, sub = divmod(abs(code) - 1, SUB)
        lo, hi = _ldexp(0.5 + sub / (2 * SUB), e - _OFFSET), _ldexp(0.5 + (sub + 1) / (2 * SUB), e - _OFFSET)
        return (-hi, -lo) if code < 0 else (lo, hi)

    def percentile(self, q: float, lo: float | None = None, hi: float | None = None) -> float | None:
        """q in [0, 100]: in the bucket where the cumulative count reaches q%, the value at that rank as if
        the bucket's values were spread evenly over it, the bucket first narrowed to the data's [lo, hi].
        (The bucket's middle alone put p0.01 and p99.99 of 1e4 + N(0, 1), whose values share one bucket
        216 wide, both at its max.)"""
        n = self.total
        if n == 0:
            return None
        target = q / 100.0 * n
        acc = 0
        for code in sorted(self.counts):
            count = self.counts[code]
            if acc + count >= target and acc + count > 0:
                b_lo, b_hi = self.bounds(code)
                b_lo = max(b_lo, lo) if lo is not None else b_lo
                b_hi = min(b_hi, hi) if hi is not None else b_hi
                if b_lo > b_hi:  # a bucket beyond the data's extremes (they came from other rows): its edge
                    return b_hi if hi is not None and b_lo > hi else b_lo
                frac = min(max((target - acc) / count, 0.0), 1.0)
                v = b_lo + frac * (b_hi - b_lo)  # rounded: int64 extremes near 2^64 (exact ints) round past them
                v = max(v, lo) if lo is not None else v
                return min(v, hi) if hi is not None else v
            acc += count
        return None

    def to_dict(self) -> dict:
        codes = sorted(self.counts)
        return {"scheme": f"log2/{SUB}", "codes": codes, "counts": [self.counts[c] for c in codes]}

    @classmethod
    def from_dict(cls, d: dict) -> "Histogram":
        if d.get("scheme", f"log2/{SUB}") != f"log2/{SUB}":
            raise ValueError(f"histogram scheme {d.get('scheme')!r} is not log2/{SUB}")
        codes = [int(c) for c in d["codes"]]
        bad = next((c for c in codes if abs(c) > MAX_CODE), None)
        if bad is not None:  # no float64 falls there (a hand-edited or damaged shard): its value would overflow
            raise ValueError(f"histogram code {bad} is out of range (|code| <= {MAX_CODE})")
        return cls(dict(zip(codes, (int(n) for n in d["counts"]))))


def _ldexp(m: float, e: int) -> float:
    """m * 2**e, the largest float64 where that is past its range (the top buckets' upper edges: 2**1024)."""
    try:
        return math.ldexp(m, e)
    except OverflowError:
        return float(np.finfo(np.float64).max)


def binned(a, bins: int = 40, weights=None) -> dict:
    """Counts of the finite values of ``a`` in ``bins`` equal bins over their range (one bin per distinct
    value where the range holds fewer float64 steps than that), for a chart:
    {"edges", "counts", "count", "nan", "inf"} (``weights``: a count per value, for bucket middles)."""
    x = np.asarray(a, dtype=np.float64).reshape(-1)
    w = None if weights is None else np.asarray(weights, dtype=np.float64).reshape(-1)
    finite = np.isfinite(x)
    nan = int(np.isnan(x).sum()) if w is None else int(w[np.isnan(x)].sum())
    inf = int((~finite).sum()) - int(np.isnan(x).sum()) if w is None else int(w[np.isinf(x)].sum())
    xf = x[finite]
    wf = None if w is None else w[finite]
    if xf.size == 0:
        return {"edges": [], "counts": [], "count": 0, "nan": nan, "inf": inf}
    lo, hi = float(xf.min()), float(xf.max())
    if lo == hi:  # one value: a bin around it (wider than its rounding at any magnitude, within float64)
        d = max(0.5, abs(lo) * 2.0 ** -20)
        top = float(np.finfo(np.float64).max)
        lo, hi = max(lo - d, -top), min(hi + d, top)
    # a range past float64's (-1e308 to 1e308) has no finite bin width: bin a quarter of each value (exact,
    # a power of two) and scale the edges back
    scale = 1.0 if np.isfinite(hi - lo) else 4.0
    edges = np.linspace(lo / scale, hi / scale, bins + 1)
    if not np.all(edges[:-1] < edges[1:]):  # a range of fewer float64 steps than bins (1 and 1 + 2^-52, 1e10
        # + noise, int64 near 2^62 read as float64): numpy refuses it; one bin per distinct value instead,
        # [v_i, v_i+1), the last closed at the next float64 up (at most ``bins`` of them here)
        u = np.unique(xf / scale)
        with np.errstate(over="ignore"):
            top = np.nextafter(u[-1], np.inf)
        edges = np.append(u, top) if np.isfinite(top) else u  # (lo < hi: u holds two values at least)
        edges = np.unique(np.linspace(lo / scale, hi / scale, bins + 1)) if edges.size > bins + 1 else edges
    counts, edges = np.histogram(xf / scale, bins=edges, weights=wf)
    edges = edges * scale
    return {"edges": [float(e) for e in edges], "counts": [int(round(c)) for c in counts],
            "count": int(xf.size if wf is None else wf.sum()), "nan": nan, "inf": inf}


def difference(a, b) -> np.ndarray:
    """a - b as float64 for an error histogram, without numpy's warnings: NaN where both sides are
    infinite (Inf - Inf: no error to tell; numpy's 'invalid value' reached the user's stderr from diff
    --html), ±inf where finite values differ past float64's range (binned counts it as such), and integer
    pairs subtracted in the integers (cast first, int64 values past 2^53 that differ by 2 read 0)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iu" and b.dtype.kind in "iu" and max(a.dtype.itemsize, b.dtype.itemsize) == 8:
        if a.dtype == b.dtype == np.uint64:
            return np.where(a >= b, (a - b).astype(np.float64), -(b - a).astype(np.float64))
        if a.dtype == b.dtype == np.int64:
            d = np.subtract(a, b)  # wraps where the true difference is past int64's range: those in Python ints
            out = d.astype(np.float64)
            for i in zip(*np.nonzero(((a < 0) != (b < 0)) & ((d < 0) != (a < 0)))):
                out[i] = float(int(a[i]) - int(b[i]))
            return out
        return np.array([float(int(x) - int(y)) for x, y in zip(a.reshape(-1).tolist(), b.reshape(-1).tolist())],
                        np.float64).reshape(a.shape)
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    both_inf = np.isinf(a64) & np.isinf(b64)
    d = np.full(a64.shape, np.nan)
    with np.errstate(over="ignore"):  # a true difference past float64's range: inf, what binned counts
        np.subtract(a64, b64, out=d, where=~both_inf)
    return d


def histogram_bins(h: Histogram, bins: int = 40) -> dict:
    """A log-bucket Histogram (dataset statistics) as ``binned`` equal bins over its bucket middles."""
    codes = sorted(h.counts)
    return binned([Histogram.value(c) for c in codes], bins, weights=[h.counts[c] for c in codes])
