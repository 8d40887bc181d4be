"""Exactly mergeable moments for dataset statistics.

Each batch's statistics (``TensorStats``: counts, extremes, moments about a shift) become the exact sums
Σx, Σx² and Σ|x| of its finite values, each kept as a list of non-overlapping float64 partials (Shewchuk's
representation, the one behind ``math.fsum``): Σx = n·c + s1 and Σx² = s2 + 2·c·s1 + n·c² are formed in
exact rational arithmetic, so the partials represent those sums exactly, whatever the magnitudes (values
near 1e20, fills of -3.4e38). Merging shards adds partials, exactly, in any order and grouping; ``stats``
rounds once, at the end, computing the mean and the variance exactly from the totals (no cancellation:
var = Σx²/n - (Σx/n)² is evaluated in rationals). Counts are integers and min/max exact by nature.
Values past ``tensor_stats.UNIT_RANGE`` (float64 near 1e160, or subnormals) keep their sums in units of
2^exp (Σx and Σ|x| in 2^exp, Σx² in 2^(2 exp)), where float64 partials hold them; shards in different
units meet at the larger, exactly (a power of two moves only the exponents).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from fractions import Fraction

from onnxprobe.stats.tensor_stats import TensorStats, unit_for


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
    if len(parts) == 1:  # one term is its own canonical form (0 none): PairSums.one makes five per pair
        p = parts[0]
        return [math.nan] if not math.isfinite(p) else [float(p)] if p else []
    acc: list[float] = []
    for p in parts:
        if not math.isfinite(p):  # a sum that overflowed (or is unknown) leaves the total unknown: [nan]
            return [math.nan]
        acc = _add(acc, p)
    return _canonical(acc)


def _canonical(acc: list[float]) -> list[float]:
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


def partials_of(q: Fraction) -> list[float]:
    """A dyadic rational as canonical non-overlapping float64 partials (exact while within float64's
    exponent range)."""
    out: list[float] = []
    while q and len(out) < 64:
        try:
            v = float(q)
        except OverflowError:
            v = math.copysign(math.inf, q)
        if v == 0 or not math.isfinite(v):
            if not math.isfinite(v):
                out.append(v)
            break
        out.append(v)
        q -= Fraction(v)
    return out


def value_of(partials: list[float]) -> Fraction:
    return sum((Fraction(p) for p in partials if math.isfinite(p)), Fraction(0))


class Impossible(ValueError):
    """Moments well-formed but inconsistent: no values could have them (a damaged or edited report)."""


@dataclass
class Moments:
    count: int = 0
    nan: int = 0
    inf: int = 0
    zeros: int = 0
    min: float = math.inf
    max: float = -math.inf
    sum: list[float] = field(default_factory=list)  # Σx, exact partials
    sumsq: list[float] = field(default_factory=list)  # Σx², exact partials
    sumabs: list[float] = field(default_factory=list)  # Σ|x|, exact partials
    exp: int = 0  # the sums are in units of 2^exp (Σx² in 2^(2 exp)): see the module doc

    @classmethod
    def from_stats(cls, st: TensorStats) -> "Moments":
        n = st.finite
        e = _exp_for(st.min, st.max)
        unit, scale = Fraction(st.unit), Fraction(2) ** -e
        if not n:
            sx = sx2 = Fraction(0)
        elif not all(math.isfinite(v) for v in (st.shift, st.s1, st.s2)):  # sums past float64's range: unknown
            return cls(st.count, st.nan, st.inf, st.zeros, st.min, st.max, [math.nan], [math.nan],
                       partials_of(Fraction(st.sumabs) * unit * scale) if math.isfinite(st.sumabs) else [math.nan], e)
        else:  # Σx/2^e and Σx²/2^(2e), exactly
            c, s1, s2 = Fraction(st.shift) * scale, Fraction(st.s1) * unit * scale, Fraction(st.s2) * (unit * scale) ** 2
            sx = n * c + s1
            sx2 = s2 + 2 * c * s1 + n * c * c
        sa = partials_of(Fraction(st.sumabs) * unit * scale) if math.isfinite(st.sumabs) else [math.nan]
        return cls(st.count, st.nan, st.inf, st.zeros, st.min, st.max, partials_of(sx), partials_of(sx2), sa, e)

    def merge(self, o: "Moments") -> "Moments":
        # the larger unit of the sides with values: an empty one's (Moments(), where merge-stats starts) is 0,
        # which moved the sums of subnormals (units of 2^-1062) below float64: std 0 for k*1e-320
        e = max((m.exp for m in (self, o) if m.count - m.nan - m.inf > 0), default=max(self.exp, o.exp))
        x, y = self._in(e), o._in(e)
        return Moments(self.count + o.count, self.nan + o.nan, self.inf + o.inf, self.zeros + o.zeros,
                       _unsigned(min(self.min, o.min)), _unsigned(max(self.max, o.max)), exact_sum(x.sum + y.sum),
                       exact_sum(x.sumsq + y.sumsq), exact_sum(x.sumabs + y.sumabs), e)

    def _in(self, e: int) -> "Moments":
        """These sums in units of 2^e (e >= exp: exact but for partials that fall below float64's range)."""
        k = self.exp - e
        if not k:
            return self
        move = (lambda ps, p: [math.ldexp(v, p * k) for v in ps])
        return Moments(self.count, self.nan, self.inf, self.zeros, self.min, self.max, move(self.sum, 1),
                       move(self.sumsq, 2), move(self.sumabs, 1), e)

    def stats(self) -> TensorStats:
        """The merged statistics, each rounded once: about the exact mean, s1 is 0 and s2 = n·var (in the
        unit 2^exp, where they keep their digits)."""
        n = self.count - self.nan - self.inf
        if n <= 0:
            return TensorStats(self.count, self.nan, self.inf, self.zeros, self.min, self.max)
        unit = math.ldexp(1.0, self.exp)
        if not all(math.isfinite(p) for p in self.sum + self.sumsq):  # a shard's sums overflowed: moments unknown
            return TensorStats(self.count, self.nan, self.inf, self.zeros, self.min, self.max, math.nan, math.nan, math.nan,
                               math.fsum(self.sumabs), unit)
        sx, sx2 = value_of(self.sum), value_of(self.sumsq)
        mean = sx / n
        m2 = max(sx2 - sx * mean, Fraction(0))  # Σ(x - mean)², exactly
        c = float(mean * Fraction(unit))
        cu = Fraction(c) / Fraction(unit)  # the rounded shift, in the unit
        s1 = float(sx - n * cu)  # Σ(x - c) for the rounded c
        s2 = float(m2 + (mean - cu) ** 2 * n)
        return TensorStats(self.count, self.nan, self.inf, self.zeros, self.min, self.max, c, s1, s2,
                           math.fsum(self.sumabs), unit).with_spread()  # int64 batches of one rounded value that differ

    def to_dict(self) -> dict:
        def f(v: float) -> float | None:
            return v if math.isfinite(v) else None

        def sums(v: list[float]) -> list[float | None]:  # an unknown sum (it overflowed) as [null], zero as [0.0]
            return [p if math.isfinite(p) else None for p in v] or [0.0]

        return {"count": self.count, "nan": self.nan, "inf": self.inf, "zeros": self.zeros, "min": f(self.min),
                "max": f(self.max), "sum": sums(self.sum), "sumsq": sums(self.sumsq), "sumabs": sums(self.sumabs),
                "exp": self.exp}

    @classmethod
    def from_dict(cls, d: dict) -> "Moments":
        if not isinstance(d, dict):
            raise ValueError(f"not an object of counts and sums but a {type(d).__name__}")
        lack = [k for k in ("count", "nan", "inf", "zeros", "min", "max", "sum", "sumsq", "sumabs") if k not in d]
        if lack:
            raise ValueError(f"no {', '.join(repr(k) for k in lack)}")

        def partial_list(k: str) -> list[float]:
            v = d[k]
            if not isinstance(v, list) or not all(p is None or (isinstance(p, (int, float)) and not isinstance(p, bool)) for p in v):
                raise ValueError("sums must be lists of numbers")
            if not all(p is None or math.isfinite(p) for p in v):  # never written: an unknown sum is null
                raise ValueError("sums hold a bare NaN or Infinity (onnxprobe writes an unknown sum as null)")
            try:
                return exact_sum([math.nan if p is None else float(p) for p in v])
            except (OverflowError, ValueError):  # fsum: '-inf + inf in fsum' of partials past float64's range
                raise ValueError(f"{k}'s partials add up past float64's range (onnxprobe writes such a sum in units "
                                 "of 2^exp, or as null)") from None

        def bound(v, default: float) -> float:
            if v is None:
                return default
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise ValueError("min/max must be finite numbers (null when there is none)")
            return v if isinstance(v, int) else float(v)  # an int64 extreme as the exact integer it was written

        counts = []
        for k in ("count", "nan", "inf", "zeros"):
            v = d[k]
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{k} must be a non-negative integer")
            counts.append(v)
        count, nan, inf, zeros = counts
        if nan + inf > count or zeros > count - nan - inf:  # a NaN count past the count made the mean 0.0, std -0.0
            raise ValueError(f"the counts do not add up: count {count} holds {nan} NaN, {inf} Inf and {zeros} zeros "
                             "(zeros are finite values)")
        exp = d.get("exp", 0)  # absent: a report written before units (every sum in units of 1)
        if not isinstance(exp, int) or isinstance(exp, bool):
            raise ValueError("exp must be an integer (the power of two the sums are in units of)")
        if abs(exp) > 1100:  # float64 values need 2^-1074 .. 2^1024
            raise ValueError(f"exp {exp} is beyond any float64's power of two (|exp| <= 1100)")
        lo, hi = bound(d["min"], math.inf), bound(d["max"], -math.inf)
        if lo > hi and counts[0] - counts[1] - counts[2] > 0:  # finite values, yet no value between min and max
            raise ValueError("min is above max")
        if zeros and (lo > 0 or hi < 0):
            raise Impossible(f"{zeros} zeros, yet every value lies in [{lo:g}, {hi:g}]")
        sums = {k: partial_list(k) for k in ("sum", "sumsq", "sumabs")}
        for k in ("sum", "sumsq", "sumabs"):  # [null]: a sum that overflowed, which one float64 holds cannot have
            if None in d[k] and count - nan - inf > 0 and not _unknown_sums_hold(
                    count - nan - inf, lo, hi, exp, 2 if k == "sumsq" else 1):
                raise ValueError(f"{k} is unknown (null) for {count - nan - inf} values in [{lo:g}, {hi:g}], whose "
                                 "sum float64 holds (onnxprobe writes null only for a sum that overflowed)")
        known = {k: value_of(v) for k, v in sums.items() if all(map(math.isfinite, v))}  # not [nan] (overflowed)
        if count - nan - inf == 0:  # no finite value: no extremes, every sum 0 (else they moved a merge's mean)
            held = [k for k in ("sum", "sumsq", "sumabs") if known.get(k, 1)] + [k for k, v in (("min", d["min"]),
                                                                                           ("max", d["max"])) if v is not None]
            if held:
                raise Impossible(f"no finite value (count {count}: {nan} NaN, {inf} Inf), yet a {'/'.join(held)} of some")
        nonzero = count - nan - inf > 0 and (lo or hi)  # finite values, not all zero: Σx², Σ|x| > 0 (see unit_for)
        for k in ("sumsq", "sumabs"):
            if k in known and (known[k] < 0 or nonzero and known[k] == 0):
                raise ValueError(f"{k} is {float(known[k]):g}, a sum of squares or magnitudes of "
                                 f"{'values that are not all zero' if nonzero else 'values'}")
        if nonzero and not d["sum"]:  # a zero Σx is written [0.0]; [] is damage (or an older report's exact 0)
            raise ValueError("sum is an empty list (a zero sum is written [0.0])")
        if nonzero and "sum" in known and (lo > 0 and known["sum"] <= 0 or hi < 0 and known["sum"] >= 0):
            raise ValueError(f"sum {float(known['sum']):g} has the wrong sign for values in [{lo:g}, {hi:g}]")
        _check_bounds(count - nan - inf, lo, hi, exp, known)
        return cls(*counts, lo, hi, sums["sum"], sums["sumsq"], sums["sumabs"], exp)


def _unsigned(v):
    """A float zero extreme as +0.0: min(-0.0, 0.0) keeps the first, so merged shards of +0 and -0 values said
    0 or -0 as their order fell (merge-stats promises the same bytes in any order)."""
    return 0.0 if isinstance(v, float) and v == 0 else v


def _unknown_sums_hold(n: int, lo, hi, exp: int, power: int) -> bool:
    """Whether a sum of ``n`` values in [lo, hi] (of their squares: ``power`` 2), in units of 2^exp, may pass
    float64's range, the one case onnxprobe writes it unknown ([null])."""
    top = max(abs(Fraction(lo)), abs(Fraction(hi))) if math.isfinite(lo) and math.isfinite(hi) else None
    return top is None or n * top ** power / Fraction(2) ** (exp * power) > Fraction(sys.float_info.max)


SUMS_RTOL = Fraction(1, 10**6)  # a batch's sums come from float64 (or float32 rows') statistics: rounded


def _check_bounds(n: int, lo, hi, exp: int, known: dict) -> None:
    """ValueError where the sums of ``n`` finite values in [lo, hi] cannot be theirs, beyond rounding: a mean
    outside [lo, hi], Σ|x| below |Σx|, a negative variance or one past (max - mean)(mean - min), the largest
    that values in [lo, hi] have (Bhatia-Davis). Exact, in rationals; the slack is SUMS_RTOL of the largest
    magnitude (squared for Σx²)."""
    if n <= 0 or not math.isfinite(lo) or not math.isfinite(hi):
        return
    unit = Fraction(2) ** exp
    L, H = Fraction(lo) / unit, Fraction(hi) / unit
    top = max(abs(L), abs(H))
    tol, tol2 = n * top * SUMS_RTOL, n * top * top * SUMS_RTOL
    low_abs = min(abs(L), abs(H)) if L > 0 or H < 0 else Fraction(0)
    S, Q, A = known.get("sum"), known.get("sumsq"), known.get("sumabs")
    if S is not None and not n * L - tol <= S <= n * H + tol:
        raise Impossible(f"the mean {float(S * unit / n):.6g} lies outside [min {lo:g}, max {hi:g}]")
    if A is not None and not (n * low_abs - tol <= A <= n * top + tol and (S is None or A >= abs(S) - tol)):
        raise Impossible(f"sumabs {float(A * unit):.6g} is no sum of {n} magnitudes in [{lo:g}, {hi:g}]"
                         + (f" with sum {float(S * unit):.6g}" if S is not None else ""))
    if S is not None and Q is not None:
        mean = S / n
        var = Q / n - mean * mean
        if var * n < -tol2 or var * n > n * (H - mean) * (mean - L) + tol2:
            raise Impossible(f"sumsq {float(Q * unit * unit):.6g} is no sum of squares of {n} values in [{lo:g}, {hi:g}] "
                             f"with sum {float(S * unit):.6g} (a variance of {float(var * unit * unit):.6g})")


def _exp_for(lo: float, hi: float) -> int:
    """The exponent of ``tensor_stats.unit_for`` (0 inside UNIT_RANGE)."""
    return math.frexp(unit_for(lo, hi))[1] - 1
