"""Pair metrics pooled over a dataset: the sums behind every metric, exactly mergeable.

A ``PairSums`` holds, for a pair (a under test, b the reference) over any number of samples, the sums
Σ|a-b|, Σ(a-b)², Σa², Σb², Σab (exact float64 partials, ``stats.moments.exact_sum``), the count of
finite pairs, the maxima max |a-b| (with the sample and the flat index of the worst element), max |b|,
the allclose excess and max relative error (with its sample), and each sample's own SQNR. Metrics come
from the totals (``metrics``): SQNR = 10 log10(Σb² / Σ(a-b)²) over all samples, cosine from the pooled
Σab, Σa², Σb², never an average of per-sample ratios. Merging adds partials exactly and takes maxima
with ties broken by the lower (sample, index), so shards merge to the same bytes in any order; one
sample's PairSums gives exactly the metrics ``compare`` gives for that sample (``compare`` is built on it).

Float64 pairs past ``tensor_stats.UNIT_RANGE`` (values near 1e160, or subnormals) keep their sums in
units of 2^exp (Σ|a-b| in 2^exp, the squares and products in 2^(2 exp)), where float64 holds them (their
squares overflow past ~1.3e154: cosine 0 and -inf dB for a pair 1e-7 apart); pairs of different units
meet at the larger, exactly. Integer pairs take a - b in the integers (float64 keeps 53 bits: int64
values past 2^53 that differ by 2 read equal once cast).

The sums of an introduced error (``light``) take no max |b|, allclose excess or max relative error: their
fields hold the merge identities (0, -inf, 0), ``introduced`` turns them into an ``IntroducedError`` and
``metrics`` refuses them. A light sum merged with a full one is light.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction

import numpy as np

from onnxprobe.stats.metrics import IntroducedError, PairMetrics, from_sums, sqnr_from_norms
from onnxprobe.stats.moments import exact_sum, value_of
from onnxprobe.text import NONFINITE_JSON, json_float, json_word

SUMS = ("sum_abs", "dd", "aa", "bb", "ab")
MAX_ELEMENTS = int(np.iinfo(np.intp).max)  # the most elements an array (and so a tensor's shape) can have
# what light sums hold for the fields they do not take (module doc): the merge identities
LIGHT_FIELDS = {"b_absmax": 0.0, "excess": -math.inf, "max_rel": 0.0, "max_rel_sample": 0}


@dataclass
class PairSums:
    samples: int = 0
    count: int = 0  # finite element pairs summed
    mismatch: int = 0  # positions where one side is NaN/Inf and the other not (or they differ)
    max_abs: float = 0.0
    worst: tuple[int, int] = (0, 0)  # (sample, flat index in that sample) of the largest |a-b|
    worst_shape: tuple[int, ...] = ()  # the shape of that sample's tensor
    b_absmax: float = 0.0
    excess: float = -math.inf  # max(|a-b| - rtol |b|)
    max_rel: float = 0.0
    max_rel_sample: int = 0
    sum_abs: list[float] = field(default_factory=list)  # exact partials, like the four below
    dd: list[float] = field(default_factory=list)
    aa: list[float] = field(default_factory=list)
    bb: list[float] = field(default_factory=list)
    ab: list[float] = field(default_factory=list)
    shape: tuple | None = None  # dimensions every sample agrees on, None where they differ
    # sample -> its own SQNR (inf: exact; None: nothing compared in it; nan: NaN/Inf on one side, so no SQNR)
    per_sample: dict[int, float | None] = field(default_factory=dict)
    light: bool = False  # an introduced error's sums: no max |b|, allclose excess or max relative error
    positions: int | None = None  # element positions over every sample, NaN/Inf ones too (None: an older report)
    mismatch_sample: int | None = None  # the first sample with a NaN/Inf mismatch (None: none, or an older report)
    exp: int = 0  # the sums are in units of 2^exp (the squares and products in 2^(2 exp)): the module doc

    @classmethod
    def one(cls, sample: int, shape: tuple[int, ...], *, count: int, max_abs: float, argmax: int, b_absmax: float,
            excess: float, max_rel: float, sum_abs: float, dd: float, aa: float, bb: float, ab: float,
            mismatch: int = 0, light: bool = False, exp: int = 0) -> "PairSums":
        """One sample's sums (from the graph's row, a device, or numpy); ``light``: an introduced error's,
        whose ``b_absmax``, ``excess`` and ``max_rel`` are ignored; ``exp``: the sums' unit, 2^exp."""
        shape = tuple(int(d) for d in shape)
        # an empty sample is no exact one, nor is one whose finite pairs agree beside NaN/Inf on one side
        own = (None if not count and not mismatch else math.nan if mismatch
               else sqnr_from_norms(math.sqrt(max(bb, 0.0)), math.sqrt(max(dd, 0.0))))
        out = cls(1, count, mismatch, float(max_abs), (sample, int(argmax)), shape, float(b_absmax), float(excess),
                  float(max_rel), sample, exact_sum([sum_abs]), exact_sum([dd]), exact_sum([aa]), exact_sum([bb]),
                  exact_sum([ab]), shape, {sample: own},
                  positions=math.prod(shape), mismatch_sample=sample if mismatch else None, exp=exp)
        return out.as_introduced() if light else out

    def as_introduced(self) -> "PairSums":
        """These sums as an introduced error's (``light``: see the module doc)."""
        return self if self.light else replace(self, light=True, **LIGHT_FIELDS)

    def merge(self, o: "PairSums") -> "PairSums":
        if not o.samples:
            return self
        if not self.samples:
            return o
        if set(self.per_sample) & set(o.per_sample):
            raise ValueError(f"sample {min(set(self.per_sample) & set(o.per_sample))} counted twice")
        if self.light != o.light:
            return self.as_introduced().merge(o.as_introduced())
        if self.exp != o.exp:
            e = max(self.exp, o.exp)
            return self.in_units(e).merge(o.in_units(e))
        # the worst element is one a sample has: an empty sample (a 0 dim) ties at 0 and names none
        worst = max((self, o), key=lambda s: (s.max_abs, s.count > 0, -s.worst[0], -s.worst[1]))
        rel = max((self, o), key=lambda s: (s.max_rel, -s.max_rel_sample))
        return PairSums(self.samples + o.samples, self.count + o.count, self.mismatch + o.mismatch, worst.max_abs,
                        worst.worst, worst.worst_shape, max(self.b_absmax, o.b_absmax), max(self.excess, o.excess),
                        rel.max_rel, rel.max_rel_sample,
                        *(exact_sum(getattr(self, k) + getattr(o, k)) for k in SUMS),
                        merged_shape(self.shape, o.shape), dict(sorted({**self.per_sample, **o.per_sample}.items())),
                        self.light, None if self.positions is None or o.positions is None else self.positions + o.positions,
                        min((x for x in (self.mismatch_sample, o.mismatch_sample) if x is not None), default=None),
                        self.exp)

    def in_units(self, e: int) -> "PairSums":
        """These sums in units of 2^e (e >= exp: exact, but for partials that fall below float64's range)."""
        k = self.exp - e
        if not k:
            return self
        move = {k2: [math.ldexp(p, (1 if k2 == "sum_abs" else 2) * k) for p in getattr(self, k2)] for k2 in SUMS}
        return replace(self, exp=e, **{k2: exact_sum(v) for k2, v in move.items()})

    def total(self, k: str) -> float:
        return math.fsum(getattr(self, k))

    def metrics(self, rtol: float = 0.0) -> PairMetrics:
        """The metrics of the pooled sums (``stats.metrics.from_sums``); not of light sums (``introduced``)."""
        if self.light:
            raise ValueError("an introduced error's sums hold no max |b|, allclose excess or relative error: use introduced()")
        return self._metrics(rtol)

    def introduced(self) -> IntroducedError:
        """The introduced error these sums measure (light or not: what ``IntroducedError`` holds)."""
        return IntroducedError.of(self._metrics(0.0))

    def _metrics(self, rtol: float) -> PairMetrics:
        if not self.count:
            m = PairMetrics(0.0, 0.0, 0.0, 0.0, 1.0, math.inf, (), 0.0, 0.0, self.mismatch)
        else:
            m = from_sums(max_abs=self.max_abs, argmax=self.worst[1], sum_abs=self.total("sum_abs"), dd=self.total("dd"),
                          aa=self.total("aa"), bb=self.total("bb"), ab=self.total("ab"), b_absmax=self.b_absmax,
                          excess=self.excess, max_rel=self.max_rel, shape=self.worst_shape, rtol=rtol, count=self.count,
                          nonfinite_mismatch=self.mismatch)
            if self.exp:  # cosine and SQNR are ratios, the same in any unit; the means are not
                m = replace(m, mean_abs=ldexp_inf(m.mean_abs, self.exp), rmse=ldexp_inf(m.rmse, self.exp))
        return replace(m, nonfinite_same=self.nonfinite_same())

    def nonfinite_same(self) -> int | None:
        """Positions NaN/Inf alike on both sides, left out of the sums: every position less the finite pairs
        and the mismatches; None when that is not known (a report written before sums kept their
        positions, whose samples' shapes differ)."""
        if self.positions is not None:
            return max(self.positions - self.count - self.mismatch, 0)
        if self.shape is None or any(d is None for d in self.shape):
            return None
        return max(self.samples * math.prod(self.shape) - self.count - self.mismatch, 0)

    def spread(self) -> dict:
        """The per-sample SQNR, JSON-ready: min (and its sample), p5 and median (sample values: the inverted
        CDF; "inf" exact, "-inf" where B is all zeros and A is not, None with no sample to rank) over the
        samples with an SQNR; those with nothing compared (``not_compared``) or with NaN/Inf on one side
        (``nonfinite``) are left out and counted."""
        items = sorted(((s, x) for s, x in self.per_sample.items() if x is not None and not math.isnan(x)),
                       key=lambda kv: (kv[1], kv[0]))
        none = sum(1 for x in self.per_sample.values() if x is None)
        left = {"not_compared": none, "nonfinite": len(self.per_sample) - len(items) - none}
        if not items:
            return {"min": None, "min_sample": None, "p5": None, "median": None, **left}
        v = [x for _, x in items]

        def q(p: float) -> float | str:
            return _enc(v[max(math.ceil(p / 100 * len(v)) - 1, 0)])

        return {"min": _enc(v[0]), "min_sample": items[0][0], "p5": q(5), "median": q(50), **left}

    def shifted(self, by: int) -> "PairSums":
        """The same sums with every sample index moved by ``by`` (shards laid end to end)."""
        out = PairSums(self.samples, self.count, self.mismatch, self.max_abs, (self.worst[0] + by, self.worst[1]),
                       self.worst_shape, self.b_absmax, self.excess, self.max_rel, self.max_rel_sample + by,
                       *(list(getattr(self, k)) for k in SUMS), self.shape, {s + by: x for s, x in self.per_sample.items()},
                       positions=self.positions,
                       mismatch_sample=None if self.mismatch_sample is None else self.mismatch_sample + by, exp=self.exp)
        return out.as_introduced() if self.light else out

    def to_dict(self) -> dict:
        """JSON-ready; light sums say ``"light": true`` and leave out what they do not take (``LIGHT_FIELDS``)."""
        d = {"samples": self.samples, "count": self.count, "mismatch": self.mismatch, "max_abs": _enc(self.max_abs),
             "worst": list(self.worst), "worst_shape": list(self.worst_shape), "b_absmax": _enc(self.b_absmax),
             "excess": _enc(self.excess), "max_rel": _enc(self.max_rel), "max_rel_sample": self.max_rel_sample,
             **{k: [p if math.isfinite(p) else None for p in getattr(self, k)] for k in SUMS},  # unknown (overflowed): null
             "shape": None if self.shape is None else list(self.shape),
             "per_sample": [[s, None if x is None else _enc(x)] for s, x in self.per_sample.items()], "positions": self.positions,
             "mismatch_sample": self.mismatch_sample, "exp": self.exp}
        if self.light:
            return {"light": True, **{k: v for k, v in d.items() if k not in LIGHT_FIELDS}}
        return d

    @classmethod
    def from_dict(cls, d) -> "PairSums":
        """The inverse of ``to_dict``; ValueError naming the field that is malformed."""
        if not isinstance(d, dict):
            raise ValueError("not an object")
        light = d.get("light", False)
        if not isinstance(light, bool):
            raise ValueError("'light' is not true or false")
        if light:  # the fields light sums leave out: their merge identities
            d = {**d, **{k: _enc(v) for k, v in LIGHT_FIELDS.items()}}
        ints = {k: _int(d, k) for k in ("samples", "count", "mismatch", "max_rel_sample")}
        worst = _ints(d.get("worst"), "worst")
        if len(worst) != 2:
            raise ValueError("'worst' is [sample, index]")
        sums = {}
        for k in SUMS:
            v = d.get(k)
            if not isinstance(v, list) or not all(p is None or (isinstance(p, (int, float)) and not isinstance(p, bool)) for p in v):
                raise ValueError(f"'{k}' is not a list of numbers")
            if not all(p is None or math.isfinite(p) for p in v):  # never written: an unknown sum is null
                raise ValueError(f"'{k}' holds a bare NaN or Infinity (onnxprobe writes an unknown sum as null)")
            sums[k] = exact_sum([math.nan if p is None else float(p) for p in v])
            if k != "ab" and sums[k] and math.isfinite(sums[k][0]) and value_of(sums[k]) < 0:  # Σ|d|, Σd², Σa², Σb²
                raise ValueError(f"'{k}' is negative, a sum of magnitudes or squares")
        shape = d.get("shape")
        if shape is not None and (not isinstance(shape, list) or not all(
                x is None or (isinstance(x, int) and not isinstance(x, bool) and x >= 0) for x in shape)):
            raise ValueError("'shape' is not a list of dimensions")
        per = d.get("per_sample")
        if not isinstance(per, list) or not all(isinstance(p, list) and len(p) == 2 for p in per):
            raise ValueError("'per_sample' is not a list of [sample, SQNR]")
        per_sample = {}
        for s, x in per:
            if not isinstance(s, int) or isinstance(s, bool) or s < 0 or s in per_sample:
                raise ValueError("'per_sample' has a bad or repeated sample index")
            per_sample[s] = None if x is None else _dec(x, "per_sample")  # null: nothing compared in it
        if len(per_sample) != ints["samples"]:
            raise ValueError(f"'per_sample' holds {len(per_sample)} samples, 'samples' says {ints['samples']}")
        exp = d.get("exp", 0)  # absent: a report written before units (every sum in units of 1)
        if not isinstance(exp, int) or isinstance(exp, bool) or abs(exp) > 1100:
            raise ValueError("'exp' is not an integer")
        max_abs = _dec(d.get("max_abs"), "max_abs")
        for k in ("max_abs", "b_absmax", "max_rel"):  # maxima of absolute values (a light one's identities: 0)
            v = _dec(d.get(k), k)
            if math.isnan(v):  # never written (NaN/Inf are counted apart); merged, it spread or vanished by file name
                raise ValueError(f"'{k}' is nan, and a maximum of absolute values is a number or inf")
            if v < 0:
                raise ValueError(f"'{k}' is negative, a maximum of absolute values")
        if ints["count"] and math.isfinite(max_abs) and max_abs > 0 and not (sums["sum_abs"] and sums["dd"]):
            raise ValueError(f"max |a-b| is {max_abs:g} but 'sum_abs' or 'dd' is zero")
        positions = _int(d, "positions") if d.get("positions") is not None else None
        _check_pairs_have(ints["count"], ints["mismatch"], positions, max_abs, sums, exp)
        worst_shape = _ints(d.get("worst_shape"), "worst_shape")
        for k, dims in (("worst_shape", worst_shape), ("shape", shape or [])):
            if math.prod(x or 1 for x in dims) > MAX_ELEMENTS:  # no array has as many: a damaged report
                raise ValueError(f"'{k}' has more elements than any tensor can hold")
        return cls(ints["samples"], ints["count"], ints["mismatch"], _dec(d.get("max_abs"), "max_abs"), tuple(worst),
                   tuple(worst_shape), _dec(d.get("b_absmax"), "b_absmax"),
                   _dec(d.get("excess"), "excess"), _dec(d.get("max_rel"), "max_rel"), ints["max_rel_sample"],
                   **sums, shape=None if shape is None else tuple(shape), per_sample=dict(sorted(per_sample.items())),
                   light=light, positions=positions,
                   mismatch_sample=_int(d, "mismatch_sample") if d.get("mismatch_sample") is not None else None, exp=exp)


def dataset_fields(sums: PairSums, intro: PairSums | None, labels: list[str]) -> dict:
    """What a dataset report adds to a pair's metrics: the samples of the worst errors, the per-sample
    SQNR spread, and the sums themselves (what ``merge-stats`` pools)."""
    sp = sums.spread()

    def name(i: int | None) -> str | None:
        return labels[i] if i is not None and 0 <= i < len(labels) else None

    return {"worst_sample": name(sums.worst[0]), "max_rel_sample": name(sums.max_rel_sample),
            "nonfinite_sample": name(sums.mismatch_sample),  # the first sample where NaN/Inf is on one side only
            "sqnr_per_sample": {**sp, "min_sample": name(sp["min_sample"])},
            "sums": sums.to_dict(), "introduced_sums": intro.to_dict() if intro is not None else None}


def pool(parts) -> PairSums:
    """The merge of any number of PairSums."""
    out = PairSums()
    for p in parts:
        out = out.merge(p)
    return out


def merged_shape(x: tuple | None, y: tuple | None) -> tuple | None:
    if x is None or y is None or len(x) != len(y):
        return None
    return tuple(p if p == q else None for p, q in zip(x, y))


def ldexp_inf(v: float, e: int) -> float:
    """v·2^e, inf past float64's range (a maximum or mean that itself overflows)."""
    try:
        return math.ldexp(v, e)
    except OverflowError:
        return math.copysign(math.inf, v)


def _enc(v: float) -> float | str:
    """A float for JSON: non-finite values as the strings 'inf', '-inf', 'nan' (``text.json_word``, every report's)."""
    return json_word(v)


def _check_pairs_have(count: int, mismatch: int, positions: int | None, max_abs: float, sums: dict, exp: int) -> None:
    """ValueError where no element pairs have these sums, beyond rounding (1e-6): more pairs or NaN/Inf
    mismatches than positions, sums of no pair, Σ|a-b| above count·max|a-b| or Σ(a-b)² above count·max|a-b|²
    (a pooled mean |a-b| or rmse above the maximum)."""
    if positions is not None and count + mismatch > positions:
        raise ValueError(f"{count} finite pairs and {mismatch} NaN/Inf mismatches in {positions} element positions")
    known = {k: value_of(v) for k, v in sums.items() if all(map(math.isfinite, v))}  # not [nan] (unknown)
    if not count:
        held = [k for k, v in known.items() if v]
        if held or max_abs:
            raise ValueError(f"no finite pair (count 0), yet {'/'.join(held) or 'max_abs'} of some")
        return
    if all(k in known for k in ("aa", "bb", "ab")):  # products of one set of pairs (Σa², Σb², Σab in one unit)
        aa, bb, ab = (float(known[k]) for k in ("aa", "bb", "ab"))
        if abs(ab) > math.sqrt(aa) * math.sqrt(bb) * 1.001:  # |Σab| <= sqrt(Σa² Σb²) (Cauchy-Schwarz), beyond rounding
            raise ValueError("'ab' is larger than 'aa' and 'bb' allow (|Σab| <= sqrt(Σa²·Σb²))")
        # Σ(a-b)² = Σa² - 2Σab + Σb², to float32 rounding of sums over many pairs (1e-2 of Σa² + Σb²: far beyond it)
        if "dd" in known and abs(float(known["dd"]) - (aa - 2 * ab + bb)) > 1e-2 * (aa + bb):
            raise ValueError("'dd' is not 'aa' - 2 'ab' + 'bb' (Σ(a-b)² = Σa² - 2Σab + Σb²)")
    if not math.isfinite(max_abs):
        return
    top = Fraction(max_abs) / Fraction(2) ** exp  # in the sums' unit
    slack = 1 + Fraction(1, 10**6)
    if known.get("sum_abs", 0) > count * top * slack or known.get("dd", 0) > count * top * top * slack:
        raise ValueError(f"'sum_abs' or 'dd' is more than {count} differences of at most max |a-b| {max_abs:g} have")


def _dec(v, what: str) -> float:
    if isinstance(v, str) and v in NONFINITE_JSON:
        return json_float(v)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if not math.isfinite(v):  # written as the strings above: a bare NaN or Infinity is not onnxprobe's
            raise ValueError(f"'{what}' is a bare NaN or Infinity (onnxprobe writes 'nan', 'inf')")
        return float(v)
    raise ValueError(f"'{what}' is not a number")


def _int(d: dict, k: str) -> int:
    v = d.get(k)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ValueError(f"'{k}' is not a non-negative integer")
    return v


def _ints(v, what: str) -> list[int]:
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v):
        raise ValueError(f"'{what}' is not a list of non-negative integers")
    return v
