"""One sample's pair sums (``stats.pooled.PairSums``) from two numpy arrays on the host: the fast path of finite
float32 pairs (the difference in float32, sums and products in float64), small pairs of one shape a stack at a
time (``pair_sums_many``), and the masked float64 path for anything else (NaN / Inf, other dtypes, integers
exactly, values past float64's comfortable range in units of 2^exp). The graph's pair nodes
(``graph.pair_nodes``) and a device's (``runtime.device_metrics``) compute the same sums where the tensors are."""

from __future__ import annotations

import math

import numpy as np

from onnxprobe.memory import MMAP_THRESHOLD
from onnxprobe.stats.metrics import rel_limits
from onnxprobe.stats.pooled import PairSums, ldexp_inf
from onnxprobe.stats.tensor_stats import dot, unit_for


def pair_sums(a: np.ndarray, b: np.ndarray, rtol: float = 0.0, sample: int = 0, light: bool = False) -> PairSums:
    """One sample's sums of a pair of numpy arrays of one shape. Finite float32 pairs (the common case)
    take a fast path: the difference in float32 (exact when a and b are within a factor of two of each
    other, else rounded to 2^-24 relative), products and sums in float64 without float64 copies
    (einsum); a pair of at most SMALL elements as a stack's row (``_rows``: float64 copies of 64 KiB at most,
    the code ``pair_sums_many`` runs). Anything else goes through a masked float64 path, over the positions finite on both sides
    (non-finite values must agree exactly: NaN with NaN, +Inf with +Inf, else they count as mismatches).
    ``light``: an introduced error's sums (the module doc), without the passes over |b|."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    if _stackable(a, b):  # the code a stack of small pairs takes (pair_sums_many), for the same bits either way
        got = _rows(a.reshape(1, -1), b.reshape(1, -1), [rtol], sample, light, a.shape)[0]
        if got is not None:
            return got
    with np.errstate(invalid="ignore", over="ignore"):  # +Inf and -Inf summed: NaN, which sends it to _masked
        finite = a.size and np.isfinite(np.add.reduce(a, axis=None, dtype=np.float64)) and np.isfinite(
            np.add.reduce(b, axis=None, dtype=np.float64))
    if a.size == 0 or a.dtype != np.float32 or b.dtype != np.float32 or not finite:
        return _masked(a, b, rtol, sample, light)
    af, bf = a.reshape(-1), b.reshape(-1)
    with np.errstate(over="ignore"):  # an overflow is caught below
        d = np.subtract(af, bf)
    np.abs(d, out=d)
    k = int(np.argmax(d))
    max_abs = float(d[k])
    if not math.isfinite(max_abs):  # a - b past float32's range (opposite signs near 3.4e38): in float64
        return _masked(a, b, rtol, sample, light)

    def dot(x: np.ndarray, y: np.ndarray) -> float:  # products and sum in float64, no float64 copies
        return float(np.einsum("i,i->", x, y, dtype=np.float64))

    sum_abs, dd, aa, bb, ab = float(np.add.reduce(d, dtype=np.float64)), dot(d, d), dot(af, af), dot(bf, bf), dot(af, bf)
    if light:
        return PairSums.one(sample, a.shape, count=af.size, max_abs=max_abs, argmax=k, b_absmax=0.0, excess=0.0,
                            max_rel=0.0, sum_abs=sum_abs, dd=dd, aa=aa, bb=bb, ab=ab, light=True)
    b_absmax = float(np.abs(bf).max())
    excess, max_rel = _rel_maxima(af, bf, rtol)
    excess = excess if rtol else max_abs
    return PairSums.one(sample, a.shape, count=af.size, max_abs=max_abs, argmax=k, b_absmax=b_absmax, excess=excess,
                        max_rel=max_rel, sum_abs=sum_abs, dd=dd, aa=aa, bb=bb, ab=ab)


# Small float32 pairs (a merged graph hands the host every pair of at most 32 KiB raw: thousands in a deep model)
# are summed a stack of them at a time, a row each: the ~20 numpy calls of a pair cost ~50 us, 0.57 s of a served
# diff of 6,000 pairs of [16, 96] (their sums and their introduced errors'); 0.27 s as stacks. A row's sums are those
# of its own float64 copy (numpy's pairwise sum along a contiguous row: the same bits in a stack of one row or of
# many), so that a pair reads the same whichever way it came (pair_sums takes one such pair through the same code).
SMALL = 8192  # elements: a float32 tensor of 32 KiB
# elements of a stack taken to float64 at once: each temporary under the mmap threshold the command line sets
# (memory.MMAP_THRESHOLD), past which glibc maps and unmaps it each time (stacks of 256K elements: 0.9 s, not 0.27)
STACK = MMAP_THRESHOLD // 8 - 1


def _stackable(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype == np.float32 and a.shape == b.shape and 0 < a.size <= SMALL


def pair_sums_many(pairs: list, rtols: list[float], sample: int = 0, light: bool = False) -> list[PairSums]:
    """``pair_sums`` of each (a, b) of ``pairs`` with its rtol, to the same bits: the small float32 pairs of one
    shape as rows of a stack (the comment above); the others, and a row the fast path does not take (NaN / Inf,
    a difference past float32's range), one by one."""
    out: list[PairSums | None] = [None] * len(pairs)
    groups: dict[tuple, list[int]] = {}
    for i, (a, b) in enumerate(pairs):
        a, b = np.asarray(a), np.asarray(b)
        if _stackable(a, b):
            groups.setdefault(a.shape, []).append(i)
        else:
            out[i] = pair_sums(a, b, rtols[i], sample, light)
    for shape, idx in groups.items():
        step = max(STACK // math.prod(shape), 1)
        for c in range(0, len(idx), step):
            part = idx[c:c + step]
            a2 = np.stack([np.asarray(pairs[i][0]).reshape(-1) for i in part])
            b2 = np.stack([np.asarray(pairs[i][1]).reshape(-1) for i in part])
            for i, got in zip(part, _rows(a2, b2, [rtols[i] for i in part], sample, light, shape)):
                out[i] = got if got is not None else pair_sums(pairs[i][0], pairs[i][1], rtols[i], sample, light)
    return out


def _rows(a2: np.ndarray, b2: np.ndarray, rtols: list[float], sample: int, light: bool,
          shape: tuple) -> list[PairSums | None]:
    """The sums of each row pair of two float32 stacks (n, m), as ``pair_sums``'s fast path defines them: the
    difference in float32, sums and products in float64; None for a row with a NaN / Inf, or a difference
    past float32's range (``_masked`` takes those)."""
    n = a2.shape[0]
    with np.errstate(all="ignore"):  # what a row not taken makes (Inf - Inf, Inf x 0) is never read
        d = np.abs(np.subtract(a2, b2))
        k = d.argmax(axis=1)  # a NaN or Inf anywhere in a row (or a difference past float32) is its maximum
        max_abs = d[np.arange(n), k].astype(np.float64)
        ok = np.isfinite(max_abs)
        d64, a64, b64 = d.astype(np.float64), a2.astype(np.float64), b2.astype(np.float64)
        del d
        sum_abs = d64.sum(axis=1)
        np.multiply(d64, d64, out=d64)
        dd = d64.sum(axis=1)
        aa, bb, ab = (np.multiply(x, y).sum(axis=1) for x, y in ((a64, a64), (b64, b64), (a64, b64)))
        if light:
            b_absmax = excess = max_rel = np.zeros(n)
        else:
            b_absmax = np.abs(b2).max(axis=1)
            r = np.asarray(rtols, np.float64)
            excess, rel = _rel_rows(a64, b64, r)
            excess = np.where(r != 0, excess, max_abs)
            max_rel = np.where(rel <= rel_limits(np.float32)[1], rel, math.inf)  # as the graph's float32 quotient overflows
    m = math.prod(shape)
    return [PairSums.one(sample, shape, count=m, max_abs=float(max_abs[j]), argmax=int(k[j]), b_absmax=float(b_absmax[j]),
                         excess=float(excess[j]), max_rel=float(max_rel[j]), sum_abs=float(sum_abs[j]), dd=float(dd[j]),
                         aa=float(aa[j]), bb=float(bb[j]), ab=float(ab[j]), light=light) if ok[j] else None
            for j in range(n)]


CHUNK = 1 << 16  # elements a chunk of _rel_maxima takes to float64 (1 MiB of temporaries)


def _rel_maxima(af: np.ndarray, bf: np.ndarray, rtol: float) -> tuple[float, float]:
    """The allclose excess max(|a-b| - rtol |b|) and the max relative error of two flat float32 arrays, in
    float64 as the rest of the host's metrics (in float32, rtol |b| rounded: a pair one float64 ulp over
    rtol passed), a chunk at a time: no float64 copy of a whole tensor."""
    excess = max_rel = -math.inf
    for k in range(0, af.size, CHUNK):
        a64, b64 = af[k:k + CHUNK].astype(np.float64), bf[k:k + CHUNK].astype(np.float64)
        e, r = _rel_rows(a64.reshape(1, -1), b64.reshape(1, -1), np.array([rtol], np.float64))
        excess, max_rel = max(excess, float(e[0])), max(max_rel, float(r[0]))  # max_rel <= 4.8e83: no overflow
    return excess, max_rel if max_rel <= rel_limits(np.float32)[1] else math.inf  # as the graph's float32 quotient overflows


def _rel_rows(a64: np.ndarray, b64: np.ndarray, rtols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's allclose excess max(|a-b| - rtol |b|) (its rtol of ``rtols``) and max relative error
    |a-b| / max(|b|, float32's smallest subnormal), of two float64 arrays (n, m), which it overwrites."""
    dev = np.abs(np.subtract(a64, b64, out=a64))
    absb = np.abs(b64, out=b64)
    with np.errstate(over="ignore"):  # rtol |b| past float64 (any finite rtol is taken): -inf
        excess = (dev - rtols[:, None] * absb).max(axis=1)
        return excess, (dev / np.maximum(absb, rel_limits(np.float32)[0])).max(axis=1)


def _masked(a: np.ndarray, b: np.ndarray, rtol: float, sample: int, light: bool = False) -> PairSums:
    a64 = np.asarray(a, np.float64)
    b64 = np.asarray(b, np.float64)
    ints = a.dtype.kind in "iub" and b.dtype.kind in "iub"
    fa, fb = np.isfinite(a64), np.isfinite(b64)
    both = fa & fb
    same_nonfinite = (~fa & ~fb) & ((np.isnan(a64) & np.isnan(b64)) | (a64 == b64))
    mismatch = int((~both & ~same_nonfinite).sum())
    n = int(both.sum())
    if n == 0:
        return PairSums.one(sample, a64.shape, count=0, max_abs=0.0, argmax=0, b_absmax=0.0, excess=0.0, max_rel=0.0,
                            sum_abs=0.0, dd=0.0, aa=0.0, bb=0.0, ab=0.0, mismatch=mismatch, light=light)
    af, bf = np.where(both, a64, 0.0).reshape(-1), np.where(both, b64, 0.0).reshape(-1)
    absa, absb = np.abs(af), np.abs(bf)
    # the sums' unit: values past UNIT_RANGE are scaled by a power of two (exact) before any square
    u = unit_for(0.0, max(float(absa.max()), float(absb.max())))
    e = math.frexp(u)[1] - 1
    if ints:  # a - b exactly: float64 keeps 53 bits, int64 and uint64 values have up to 64
        d = _int_absdiff(np.asarray(a).reshape(-1), np.asarray(b).reshape(-1))
    else:
        with np.errstate(invalid="ignore", over="ignore"):  # Inf - Inf at positions ``both`` leaves out
            d = np.where(both.reshape(-1), np.abs(af / u - bf / u), 0.0)  # ≤ 4 in the unit: no overflow
    if e:
        af, bf, absb = af / u, bf / u, absb / u
    if not ints:
        af, bf, absb, d, u, e = _unit_for_differences(af, bf, absb, d, u, e)
    # max_rel: |a-b| / max(|b|, the type's smallest subnormal) (stats.metrics), in the sums' unit; 0/0 is 0
    tiny, big = rel_limits(np.result_type(a.dtype, b.dtype))
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        rel = d / np.maximum(absb, tiny / u)  # tiny / u is 0 past 2^1074: b = 0 with a != 0 reads inf
        rel[d == 0] = 0.0
        max_rel = float(rel.max())
        max_d = float(d.max())
        return PairSums.one(sample, a64.shape, count=n, max_abs=ldexp_inf(max_d, e), argmax=int(np.argmax(d)),
                            b_absmax=ldexp_inf(float(absb.max()), e), excess=ldexp_inf(float((d - rtol * absb).max()), e),
                            max_rel=max_rel if max_rel <= big else math.inf, sum_abs=float(d.sum()), dd=dot(d, d),
                            aa=dot(af, af), bb=dot(bf, bf), ab=dot(af, bf), mismatch=mismatch,
                            light=light, exp=e)


def _unit_for_differences(af, bf, absb, d, u: float, e: int):
    """The arrays of ``_masked`` (in units of 2^e) in a smaller unit where the differences are so much smaller
    than the values that their squares fall below float64's range in this one: [1e200, 1, 2] against
    [1e200, 1, 2.5] got Σ(a-b)² = 0 (RMSE 0, SQNR inf beside max |a-b| 0.5: a false pass). The unit moves down
    by half the gap (a power of two: exact), so the values' squares and the differences' both fit, up to a gap
    of ~2^1000 (differences below 1e-300 of the largest value are still lost)."""
    top = float(d.max()) if d.size else 0.0
    if not top or top >= 2.0 ** -480:  # squares of 2^-480 and over are normal float64 numbers
        return af, bf, absb, d, u, e
    big = max(float(np.abs(af).max()), float(np.abs(bf).max()))
    # 2^shift ~ 1/sqrt(top·big): the largest value and the largest difference squared ~ big/top and top/big
    shift = -(math.frexp(top)[1] + math.frexp(big)[1]) // 2
    k = math.ldexp(1.0, shift)
    return af * k, bf * k, absb * k, d * k, u / k, e - shift


def _int_absdiff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| of two integer arrays, exact before its one rounding to float64. Of the same 8-byte type, the
    difference wraps modulo 2^64 and reads back right as int64 (uint64: as the larger minus the smaller)
    wherever it fits; the rare positions where it does not (int64 values of opposite signs past 2^62)
    are taken as Python integers."""
    if a.dtype != b.dtype or a.dtype.itemsize < 8:
        if a.dtype.itemsize < 8 and b.dtype.itemsize < 8:  # exact in float64 already
            return np.abs(a.astype(np.float64) - b.astype(np.float64))
        return np.array([float(abs(int(x) - int(y))) for x, y in zip(a.tolist(), b.tolist())], np.float64)
    if a.dtype.kind == "u":
        return np.where(a >= b, a - b, b - a).astype(np.float64)
    d = np.subtract(a, b)  # wraps where the true difference is past int64's range
    wrapped = (a < 0) != (b < 0)
    wrapped &= (d < 0) != (a < 0)
    out = np.abs(d.astype(np.float64))
    for i in np.flatnonzero(wrapped):
        out[i] = float(abs(int(a[i]) - int(b[i])))
    return out
