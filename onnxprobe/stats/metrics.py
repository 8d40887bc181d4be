"""Comparison metrics for a pair of tensors, and the pass/fail criteria. The sums behind them are taken
by ``stats.pooled`` (numpy, float64: ``compare``, ``pair_sums``), in the graph (``graph.pair_nodes``) or
on a device; ``from_sums`` turns them into ``PairMetrics``.

``a`` is the tensor under test, ``b`` the reference. All metrics are over finite pairs.

- max_abs = max |a - b|, mean_abs = mean |a - b|, rmse = sqrt(mean (a - b)^2)
- max_rel = max |a - b| / max(|b|, the type's smallest subnormal): |a - b| / |b| wherever b is not 0,
  subnormals included; 0 where a = b = 0; where b = 0 and a is not, |a - b| over that subnormal (1.4e-45
  in float32, 4.9e-324 in float64): inf for |a - b| past 4.8e-7 in float32 (the graph's float32 division
  overflows; the host says inf past the type's largest value too, float32's for float16), huge below. (|b| + 1e-30 read 2e-10
  for b = 1e-40 and a = 1.5 b, and 1e-5 for a = 1e-35 against b = 0: both passed --rtol 1e-6.)
- cosine = <a, b> / (|a| |b|)
- sqnr_db = 10 log10(sum b^2 / sum (a - b)^2), with no floor (onnxruntime's qdq_loss_debug floors both
  norms at float64 eps, which reads 0 dB for tensors of 1e-20); identical tensors (no error at all, zeros
  included) are +inf, "exact"; b all zeros against an a that is not, -inf
- worst = the multi-index of the largest |a - b|

``count`` is the number of finite pairs the metrics are over. With none (an empty tensor, or NaN/Inf at
every position) there is nothing to measure: the metrics are not available (None in JSON), the pair is
never exact and never passes a criterion (``compare.diff.finish`` says why it was not compared).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from onnxprobe.errors import UsageError, in_words, said, setting_error, settings_error
from onnxprobe.text import as_word, json_word
from onnxprobe.types import element_count

REL_TINY = float(np.finfo(np.float32).smallest_subnormal)  # float32's max_rel divisor floor (the graph's, a device's)


def rel_limits(dtype) -> tuple[float, float]:
    """max_rel's divisor floor and largest value for tensors of ``dtype`` (the module doc): its smallest
    subnormal and its largest finite value (float64's for integers), float32's for a half-precision type;
    a quotient past the latter is inf. The quotient is no value of the tensors' type: capped at float16's
    65504, two float16 tensors with max |a-b|/|b| = 99982 read inf and failed --rtol 1e6 (QA)."""
    dt = np.dtype(dtype)
    f = np.finfo(dt if dt.kind == "f" else np.float64)
    return float(f.smallest_subnormal), float(max(f.max, np.finfo(np.float32).max))


FLOAT32_ROUNDING = 2.0 ** -20  # a few float32 roundings (2^-24 each), with room: Tolerance.near_float32_threshold
SCALE_FLOOR = 1e-2  # Tolerance.at_scale: a relative atol is never taken of less than this fraction of the run's scale
# at_scale of an SQNR rule (diff --grad, quantized models): a max|a-b| of at most this fraction of the run's scale passes, as
# allclose's 1e-4 of its floor: a key bias's gradient, 0 in exact arithmetic, is float32 noise on each side (3e-10 vs 1.5)
NOISE_FLOOR = 1e-6
METRICS = ("allclose", "max_abs", "mean_abs", "rmse", "max_rel", "cosine", "sqnr")


@dataclass(frozen=True)
class PairMetrics:
    """How tensor a (model A) differs from b (the reference): max and mean |a-b|, max relative error,
    RMSE, cosine similarity, SQNR in dB (10 log10 Σb² / Σ(a-b)²; inf when equal, -inf when b is all zeros
    and a is not), the flat index of the worst element as coordinates (``worst``), the allclose excess, max
    |b|, and the NaN/Inf positions that differ (``nonfinite_mismatch``) or agree (``nonfinite_same``),
    over ``count`` finite pairs of elements."""

    max_abs: float
    mean_abs: float | None  # None (and max_rel, worst): not measured, a light diff's (``api.diff(extras=False)``)
    max_rel: float | None
    rmse: float
    cosine: float
    sqnr_db: float
    worst: tuple[int, ...] | None
    allclose_excess: float  # max(|a-b| - rtol*|b|): allclose passes when this is <= atol
    b_absmax: float
    nonfinite_mismatch: int  # positions where exactly one side is NaN/Inf, or they differ
    # finite pairs measured. 0 by default on purpose: metrics built without a count (stats.pooled's for
    # sums over no finite pair: zeros, cosine 1) stand for nothing measured, so they can never read "exact"
    count: int = 0
    nonfinite_same: int | None = None  # positions NaN/Inf on both sides alike (left out); None: not known

    def to_dict(self) -> dict:
        def f(v: float | None) -> float | str | None:
            """null: nothing measured (or not this metric: a light diff's); a value past float64's range (a - b overflowing), or max_rel's inf where b is
            0 and a is not (the module doc), said as ``text.json_word`` says it ("inf", "nan"), as the SQNR's -inf."""
            return json_word(float(v)) if self.count and v is not None else None

        return {"max_abs": f(self.max_abs), "mean_abs": f(self.mean_abs), "max_rel": f(self.max_rel), "rmse": f(self.rmse),
                "cosine": f(self.cosine), "sqnr_db": json_sqnr(self.sqnr_db, self.count, self.exact), "exact": self.exact,
                "worst_index": list(self.worst) if self.count and self.worst is not None else None, "nonfinite_mismatch": self.nonfinite_mismatch,
                "count": self.count, "nonfinite_same": self.nonfinite_same}

    @property
    def exact(self) -> bool:
        """No error at all: some finite pairs compared, every one equal, and the non-finite values agree."""
        return self.count > 0 and self.max_abs == 0 and self.nonfinite_mismatch == 0

    @property
    def empty(self) -> bool:
        """No finite pair to measure: the numbers are not metrics of anything."""
        return self.count == 0


@dataclass(frozen=True)
class IntroducedError:
    """The error a layer adds by itself: B's node fed with A's matched inputs, against A's tensor (the
    ``introduced`` of a diff's pair). Only the magnitudes the reports show are taken for it: no max |b|,
    allclose excess or max relative error (they would cost the one-run diff eight more passes over every
    tensor, for numbers no verdict reads)."""
    max_abs: float
    mean_abs: float | None  # None (and worst): of a light diff's pair (PairMetrics.mean_abs)
    rmse: float
    cosine: float
    sqnr_db: float
    worst: tuple[int, ...] | None
    nonfinite_mismatch: int
    count: int = 0  # finite pairs measured (PairMetrics.count: 0, nothing, is never exact)

    @classmethod
    def of(cls, m: PairMetrics) -> "IntroducedError":
        return cls(m.max_abs, m.mean_abs, m.rmse, m.cosine, m.sqnr_db, m.worst, m.nonfinite_mismatch, m.count)

    @property
    def exact(self) -> bool:
        return self.count > 0 and self.max_abs == 0 and self.nonfinite_mismatch == 0


def json_sqnr(v: float, count: int, exact: bool) -> float | str | None:
    """An SQNR for JSON: null where nothing was measured (no finite pair) and beside ``"exact": true`` (which
    says its +inf); otherwise a number, or ``text.json_word``'s "-inf" (B all zeros where A is not), "inf"
    (no error over the finite pairs, a NaN/Inf mismatch elsewhere) or "nan" (sums past float64's range), as
    max_rel says its inf: never null, which would read as not measured."""
    return None if not count or exact else json_word(float(v))


def sqnr_from_norms(signal: float, noise: float) -> float:
    """20 log10(|b| / |a - b|): +inf when there is no error at all (also for zeros against zeros), -inf
    when b is all zeros and a is not. No floor: tensors of 1e-20 or of subnormals have their true ratio
    (a floor at machine epsilon read 0 dB for any pair whose norms were both below it)."""
    if noise == 0:
        return math.inf
    if not (math.isfinite(signal) and math.isfinite(noise)):  # sums past float64's range: no ratio to tell
        return math.nan
    if signal == 0:
        return -math.inf
    return 20.0 * (math.log10(signal) - math.log10(noise))  # no quotient to overflow or underflow


def sqnr_db(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, np.float64).reshape(-1)
    b = np.asarray(b, np.float64).reshape(-1)
    with np.errstate(all="ignore"):  # Inf - Inf, norms past float64: sqnr_from_norms tells (nan), no RuntimeWarning
        return sqnr_from_norms(float(np.linalg.norm(b)), float(np.linalg.norm(a - b)))


def from_sums(*, max_abs: float, argmax: int, sum_abs: float, dd: float, aa: float, bb: float, ab: float,
              b_absmax: float, excess: float, max_rel: float, shape: tuple[int, ...], rtol: float = 0.0,
              count: int | None = None, nonfinite_mismatch: int = 0) -> PairMetrics:
    """PairMetrics from the reductions of a pair computed elsewhere (in the graph, on a device, pooled over
    samples: ``stats.pooled``): ``argmax`` is the flat index of the largest |a - b| in ``shape``,
    ``excess`` max(|a-b| - rtol |b|), ``count`` the number of finite pairs summed (default: all of
    ``shape``)."""
    size = count if count is not None else element_count(shape or ())
    na, nb = math.sqrt(max(aa, 0.0)), math.sqrt(max(bb, 0.0))
    if na > 0 and nb > 0:
        # sums rounded apart (partials, pooled samples) can put ab/(na nb) a few ulps outside [-1, 1], and a
        # pair with no difference at all is exactly aligned
        cosine = 1.0 if dd == 0 else min(1.0, max(-1.0, ab / (na * nb)))
    else:
        cosine = 1.0 if na == nb else 0.0
    # no position in an empty tensor (a sample with a 0 dim): no worst element
    worst = tuple(int(i) for i in np.unravel_index(int(argmax), shape)) if shape and 0 <= argmax < math.prod(shape) else ()
    return PairMetrics(max_abs=max_abs, mean_abs=sum_abs / size if size else 0.0, max_rel=max_rel,
                       rmse=math.sqrt(max(dd, 0.0) / size) if size else 0.0, cosine=cosine,
                       sqnr_db=sqnr_from_norms(nb, math.sqrt(max(dd, 0.0))), worst=worst,
                       allclose_excess=excess if rtol else max_abs, b_absmax=b_absmax,
                       nonfinite_mismatch=nonfinite_mismatch, count=size)


ABSOLUTE = ("max_abs", "mean_abs", "rmse")  # judged against atol (+ rtol max|b| when --rtol is given, or neither)
THRESHOLDS = {"min_sqnr": "sqnr", "min_cosine": "cosine"}  # threshold flag -> the metric it sets
DEFAULTS = {"atol": 1e-4, "rtol": 1e-3, "min_sqnr": 30.0, "min_cosine": 0.999}
# Tolerance.from_flags's parameters and the flags they are given by, as its messages name them (errors.setting_error)
FLAGS = {k: (k, "--" + k.replace("_", "-")) for k in ("metric", "atol", "rtol", "min_sqnr", "min_cosine")}
USES = {"allclose": ("atol", "rtol"), "max_abs": ("atol", "rtol"), "mean_abs": ("atol", "rtol"), "rmse": ("atol", "rtol"),
        "max_rel": ("rtol",), "cosine": ("min_cosine",), "sqnr": ("min_sqnr",)}  # the thresholds each metric reads


@dataclass(frozen=True)
class Tolerance:
    """A pass/fail criterion: ``metric`` and its thresholds. An exact match (no error at all) passes
    under every metric; a non-finite value on one side only fails under every metric, and so does a pair
    with no finite value to measure (nothing compared earns no pass)."""

    metric: str = "allclose"
    # None: the default (DEFAULTS); an absolute metric with atol given and no rtol gets rtol 0, as its flags
    # do (``from_flags``): Tolerance('max_abs', atol=0.5) means max|a-b| <= 0.5
    atol: float | None = None
    rtol: float | None = None
    min_sqnr: float = 30.0
    min_cosine: float = 0.999
    # why this criterion: what a default is the default for ("the default for float models"), or the flags given
    why: str = ""
    abs_floor: float | None = None  # sqnr only: a pair whose max|a-b| is at most this passes too (near-silent tensors)
    # atol is a fraction of each pair's max|b| (its own scale): diff --grad's default, as gradients span many
    # orders of magnitude (an absolute 1e-4 passed every pair of gradients of 1e-9, cosine 0.92 included)
    atol_relative: bool = False
    # with atol_relative: the least scale atol is a fraction of (``at_scale``): 1e-2 of the largest max|b| of the
    # pairs judged together, so that a gradient 0 in exact arithmetic (a key bias under Softmax: float32 noise of
    # 3e-8 against 1.2 for its weight) is judged at the run's scale, not at its own noise's
    atol_floor: float = 0.0
    given: tuple[str, ...] = field(default=(), compare=False)  # the thresholds flags named (from_flags); see over()
    metric_only: bool = field(default=False, compare=False)  # flags named the metric alone (from_flags); see over()
    scale: str = ""  # a default's relative atol: how it scales, said after ``why`` ("atol relative to each ...")
    # a default chosen for what is compared: ``describe`` says too which settings change it, in each reader's
    # words (``errors.said``: the API's ``tolerance=Tolerance(...)``, the command line's ``--metric, --atol``)
    default: bool = False

    def __post_init__(self) -> None:
        # checked when made: an unknown metric or a negative threshold would otherwise surface at the first
        # pair measured (a KeyError there), or pass everything silently
        if self.metric not in METRICS:
            raise UsageError(f"Tolerance metric {as_word(self.metric)}: choose one of {', '.join(METRICS)}")
        if self.rtol is None:
            object.__setattr__(self, "rtol", 0.0 if self.metric in ABSOLUTE and self.atol is not None else DEFAULTS["rtol"])
        if self.atol is None:
            object.__setattr__(self, "atol", DEFAULTS["atol"])
        for k in ("atol", "rtol", "min_sqnr", "min_cosine", "abs_floor"):
            v = getattr(self, k)
            if v is None and k == "abs_floor":
                continue
            if not isinstance(v, (int, float, np.floating, np.integer)) or isinstance(v, bool) or not math.isfinite(v):
                raise UsageError(f"Tolerance {k}={v!r}: thresholds are finite numbers")
            if k != "min_sqnr" and v < 0:  # an SQNR in dB may be negative; the others are sizes of an error
                raise UsageError(f"Tolerance {k}={v!r}: thresholds are finite and non-negative")
        if self.min_cosine > 1:  # no cosine similarity is above 1: nothing but an exact match would pass
            raise UsageError(f"Tolerance min_cosine={self.min_cosine!r}: a cosine similarity is at most 1; "
                             "give a threshold in [0, 1], e.g. 0.999")

    @classmethod
    def from_flags(cls, metric: str | None = None, *, atol: float | None = None, rtol: float | None = None,
                   min_sqnr: float | None = None, min_cosine: float | None = None) -> "Tolerance | None":
        """The criterion the flags describe, or None when they say nothing (the caller picks a default).
        A threshold implies its metric (``--min-sqnr 25`` means ``--metric sqnr``); a threshold of
        another metric than ``--metric`` is refused."""
        if metric is not None and metric not in METRICS:
            raise setting_error(UsageError, FLAGS["metric"], f"{as_word(metric)}: choose one of {', '.join(METRICS)}")
        named = metric is not None  # a metric a threshold implies (--min-sqnr 25) was not given: not said so
        given = {k: v for k, v in (("min_sqnr", min_sqnr), ("min_cosine", min_cosine)) if v is not None}
        implied = {THRESHOLDS[k] for k in given}
        if len(implied) > 1:
            raise settings_error(UsageError, lambda say: f"{say(FLAGS['min_sqnr'])} and {say(FLAGS['min_cosine'])} set different criteria; "
                                 f"give one (or {say(FLAGS['metric'])})")
        if metric is None and implied:
            metric = implied.pop()
        for k in given:
            if THRESHOLDS[k] != metric:
                raise settings_error(UsageError, lambda say: f"{say(FLAGS[k])} is a threshold of {say(FLAGS['metric'])} {THRESHOLDS[k]}, "
                                     f"not of {say(FLAGS['metric'])} {metric}")
        if metric in ("sqnr", "cosine") and (atol is not None or rtol is not None):
            raise settings_error(UsageError, lambda say: f"{say(FLAGS['atol'])} / {say(FLAGS['rtol'])} are thresholds of allclose, "
                                 f"max_abs, mean_abs, rmse and max_rel, not of {say(FLAGS['metric'])} {metric}")
        if metric == "max_rel" and atol is not None:
            raise settings_error(UsageError, lambda say: f"{say(FLAGS['atol'])} is not a threshold of {say(FLAGS['metric'])} max_rel "
                                 f"(give {say(FLAGS['rtol'])})")
        if metric is None and atol is None and rtol is None:
            return None
        for k, v in (("atol", atol), ("rtol", rtol), ("min_cosine", min_cosine)):
            if v is not None and (v < 0 or not math.isfinite(v)):
                raise setting_error(UsageError, FLAGS[k], f"{v}: thresholds are finite and non-negative")
        if min_cosine is not None and min_cosine > 1:
            raise setting_error(UsageError, FLAGS["min_cosine"], f"{min_cosine}: a cosine similarity is at most 1; give a threshold in [0, 1], e.g. 0.999")
        if min_sqnr is not None and not math.isfinite(min_sqnr):
            raise setting_error(UsageError, FLAGS["min_sqnr"], f"{min_sqnr}: give a finite number of dB")
        values = {"atol": atol, "rtol": rtol, "min_sqnr": min_sqnr, "min_cosine": min_cosine}
        given = tuple(k for k, v in values.items() if v is not None)
        metric_given = named
        metric = metric or "allclose"
        # --metric max_abs --atol 0.5 means max|a-b| <= 0.5: the default rtol added 0.001 max|b| unasked (a
        # max|a-b| of 5 passed against |b| ~ 1e4); with --rtol too, both
        atol_only = metric in ABSOLUTE and atol is not None and rtol is None
        # the report says the criterion and why (README): these flags, and which thresholds are defaults
        said = ([f"--metric {metric}"] if metric_given else []) + [f"--{k.replace('_', '-')} {exact(values[k])}" for k in given]
        rest = [k for k in USES[metric] if k not in given and not (atol_only and k == "rtol")]
        why = f"given: {' '.join(said)}" + (f"; {', '.join(rest)} the default{'s' if len(rest) > 1 else ''}" if rest else "")
        return cls(metric, DEFAULTS["atol"] if atol is None else atol,
                   0.0 if atol_only else DEFAULTS["rtol"] if rtol is None else rtol,
                   DEFAULTS["min_sqnr"] if min_sqnr is None else min_sqnr,
                   DEFAULTS["min_cosine"] if min_cosine is None else min_cosine, why=why,
                   given=given + (("rtol",) if atol_only else ()),  # over() keeps that 0
                   metric_only=metric_given and not given)

    def over(self, default: "Tolerance") -> "Tolerance":
        """This criterion where flags named only some thresholds of the ``default`` one's metric: the default
        with those thresholds replaced (--atol 1 against a torch export keeps its rtol 1e-4, where the
        generic 1e-3 took its place); the default's own metric named alone (--metric allclose against a torch export,
        --metric sqnr on a float16 model) is the default itself: naming what it already judges by changed its
        thresholds to the generic ones (a tenfold looser rtol against torch, float16's floor dropped); a full
        criterion (the API's), or another metric, as it is."""
        if self.metric != default.metric:
            return self
        if not self.given:
            return default if self.metric_only else self
        named = ", ".join(f"--{k.replace('_', '-')}" for k in self.given)
        # a given --atol is absolute, as the flag says, whatever the default's atol is a fraction of
        relative = default.atol_relative and "atol" not in self.given
        # what the default is for, then how its atol scales: not said of a given atol
        rest = default.why + (f": {default.scale}" if default.scale and relative else "")
        given = f"{named} given{', an absolute atol' if default.atol_relative and not relative else ''}"
        return replace(default, **{k: getattr(self, k) for k in self.given}, given=(), atol_relative=relative,
                       why=f"{given}; the rest {rest}" if default.why else "", scale="", default=False)

    def to_dict(self) -> dict:
        d = {"metric": self.metric, "atol": self.atol, "rtol": self.rtol, "min_sqnr": self.min_sqnr,
             "min_cosine": self.min_cosine}
        if self.abs_floor is not None:
            d["abs_floor"] = self.abs_floor
        if self.atol_relative:
            d["atol_relative"] = True  # atol times each pair's max|b| (at least atol_floor)
            d["atol_floor"] = self.atol_floor
        return d

    @classmethod
    def from_dict(cls, d) -> "Tolerance":
        """The inverse of ``to_dict``; ValueError when malformed."""
        if not isinstance(d, dict) or d.get("metric") not in METRICS:
            raise ValueError("not a criterion (metric, atol, rtol, min_sqnr, min_cosine)")
        vals = [d.get(k) for k in ("atol", "rtol", "min_sqnr", "min_cosine")]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in vals):
            raise ValueError("a threshold of the criterion is not a finite number")
        floor = d.get("abs_floor")
        if floor is not None and not (isinstance(floor, (int, float)) and not isinstance(floor, bool) and math.isfinite(floor)):
            raise ValueError("the criterion's abs_floor is not a finite number")
        relative, low = d.get("atol_relative", False), d.get("atol_floor", 0.0)
        if not isinstance(relative, bool):
            raise ValueError("the criterion's atol_relative is not true or false")
        if not (isinstance(low, (int, float)) and not isinstance(low, bool) and math.isfinite(low) and low >= 0):
            raise ValueError("the criterion's atol_floor is not a finite number >= 0")
        try:
            return cls(d["metric"], *(float(v) for v in vals), abs_floor=None if floor is None else float(floor),
                       atol_relative=relative, atol_floor=float(low))
        except UsageError as e:  # a negative threshold: malformed, as this method's callers expect it said
            raise ValueError(str(e)) from None

    def near_float32_threshold(self, max_abs: float, b_absmax: float, excess: float, max_rel: float) -> bool:
        """Whether an allclose excess max(|a-b| - rtol |b|) or a max relative error taken in float32 (in the
        one-run graph, on a device: rtol rounded, then the product or quotient and the difference, 2^-24
        each) is within that rounding of this criterion's threshold, so that float32 could decide the
        verdict: the caller then measures the pair in float64 on the host (allclose with --atol 0 --rtol
        0.0009765624999 passed a - b = 2^-10 at b = 1 in the graph, where the host failed it: QA)."""
        if not max_abs > 0:
            return False
        if self.metric == "allclose" and self.rtol:
            return abs(excess - self.atol_of(b_absmax)) <= FLOAT32_ROUNDING * (max_abs + self.rtol * b_absmax)
        if self.metric == "max_rel":
            return abs(max_rel - self.rtol) <= FLOAT32_ROUNDING * self.rtol
        return False

    def atol_of(self, b_absmax: float) -> float:
        """The atol that judges a pair whose reference's largest |value| is ``b_absmax``: ``atol`` itself, or
        that fraction of ``b_absmax`` (``atol_relative``), or of ``atol_floor`` where that is larger."""
        return self.atol * max(b_absmax, self.atol_floor) if self.atol_relative else self.atol

    def at_scale(self, b_absmaxes) -> "Tolerance":
        """This rule for pairs judged together whose references' largest |values| are ``b_absmaxes``: with
        ``atol_relative``, its floor 1e-2 of the largest of them (a run's gradients: float32 rounding of the
        largest is ~1e-7 of it, and a gradient that is 0 in exact arithmetic rounds to noise of that size,
        which its own max|b| would judge at cosine 0.25), an SQNR rule's max|a-b| floor NOISE_FLOOR of it; else
        itself."""
        finite = [v for v in b_absmaxes if math.isfinite(v)]
        if not (self.atol_relative and finite):
            return self
        sqnr = self.metric == "sqnr"  # scale-free, but for noise
        return replace(self, **({"abs_floor": max(self.abs_floor or 0.0, NOISE_FLOOR * max(finite))} if sqnr else
                                {"atol_floor": SCALE_FLOOR * max(finite)}))

    @property
    def measured_rtol(self) -> float:
        """The rtol a pair is measured with: the criterion's for allclose (its excess), else 0."""
        return self.rtol if self.metric == "allclose" else 0.0

    def judge(self, m: PairMetrics) -> bool | None:
        """``passes``, or None for a pair with nothing finite to measure and nothing against it (not
        compared: neither a pass nor a fail; NaN/Inf on one side only still fails)."""
        return None if m.empty and not m.nonfinite_mismatch else self.passes(m)

    def passes(self, m: PairMetrics) -> bool:
        if m.nonfinite_mismatch or m.empty:
            return False
        if m.exact:
            return True
        if self.metric == "allclose":
            return m.allclose_excess <= self.atol_of(m.b_absmax)
        if self.metric in ("max_abs", "mean_abs", "rmse"):
            return getattr(m, self.metric) <= self.atol_of(m.b_absmax) + self.rtol * m.b_absmax
        if self.metric == "max_rel":
            return m.max_rel <= self.rtol
        if self.metric == "cosine":
            return m.cosine >= self.min_cosine
        if self.metric == "sqnr":
            return m.sqnr_db >= self.min_sqnr or (self.abs_floor is not None and m.max_abs <= self.abs_floor)
        raise ValueError(self.metric)

    def describe(self) -> str:
        """The rule, and why it is this one (a default for what is compared, and which settings change it;
        the flags given): said in the API's words, carrying the command line's (``errors.said``)."""
        return said(lambda say: f"{self.rule} ({self.reason(say)})") if self.why else self.rule

    def reason(self, say) -> str:
        """Why this rule, in ``say``'s words (``errors.Voice``): what a default is for, how its atol scales, and
        which settings change it."""
        why = in_words(self.why, say) + (f": {self.scale}" if self.scale else "")
        if not self.default:
            return why
        keys = USES[self.metric]
        flags = (f"--metric/{FLAGS[keys[0]][1]}" if len(keys) == 1 else ", ".join(["--metric"] + [FLAGS[k][1] for k in keys]))
        return f"{why}; " + say.either(f"tolerance=Tolerance(metric=..., {', '.join(f'{k}=...' for k in keys)}) changes it",
                                       f"{flags} change it")

    @property
    def rule(self) -> str:
        rel = f" + {exact(self.rtol)}*max|b|" if self.rtol else ""  # the absolute metrics' rtol term, where it is one
        low = f"max(max|b|, {self.atol_floor:.3g})" if self.atol_floor else "max|b|"  # max|b|: the tensor's own
        atol = f"{exact(self.atol)}*{low}" if self.atol_relative else f"{exact(self.atol)}"
        return {
            "allclose": f"|a-b| <= {atol} + {exact(self.rtol)}*|b|",
            "max_abs": f"max|a-b| <= {atol}{rel}",
            "mean_abs": f"mean|a-b| <= {atol}{rel}",
            "rmse": f"rmse <= {atol}{rel}",
            "max_rel": f"max rel <= {exact(self.rtol)}",
            "cosine": f"cosine >= {exact(self.min_cosine)}",
            "sqnr": f"SQNR >= {exact(self.min_sqnr)} dB" + ("" if self.abs_floor is None else " or max|a-b| <= " + (
                f"{self.abs_floor:.3g}" if self.atol_relative else exact(self.abs_floor))),  # (at_scale's: 3 digits)
        }[self.metric]


# integer tensors (indices, token ids, counts, shape values; not quantized codes, which a diff compares
# dequantized) are equal or not: a float criterion's rtol passed token 30010 against 30000, and an ArgMax off by
# one (2001 against 2000) passed allclose and SQNR alike (QA). A default criterion judges them by this instead
# (``compare.measure.DiffPlan.tolerance_of``); a criterion the user gives judges them as it judges the rest.
EXACT_INTEGERS = Tolerance(metric="allclose", atol=0.0, rtol=0.0, why="an index or a count off by one is no rounding error", default=True)


def exact(v: float) -> str:
    """A threshold in the fewest significant digits that read back as the same number: ``0.3``, ``1e-05``, and
    ``0.9999999`` (six digits, ``:g``, said 'cosine >= 1', a threshold only an exact match meets)."""
    for digits in range(6, 18):
        text = f"{v:.{digits}g}"
        if float(text) == v:
            return text
    return repr(float(v))


def _items(items: list[str] | None, flag: str) -> tuple[float | None, dict[str, float]]:
    """``--atol``/``--rtol`` values: a number (the overall one, once) or NAME:NUMBER (one tensor's)."""
    glob, per = None, {}
    for item in items or []:
        name, sep, value = item.rpartition(":")
        try:
            v = float(value)
        except ValueError:
            raise UsageError(f"{flag} {item!r}: expected a number or NAME:NUMBER") from None
        if not v >= 0 or v == float("inf"):  # NaN or Inf would pass anything: no comparison at all
            raise UsageError(f"{flag} {item!r}: tolerances are finite and non-negative")
        if sep and not name:
            raise UsageError(f"{flag} {item!r}: no tensor name before ':' (give NAME:NUMBER, or the number alone)")
        if (name if sep else None) in per or (not sep and glob is not None):  # repeatable for other tensors only
            raise UsageError(f"{flag} {item!r}: {'this tensor' if sep else 'the overall tolerance'} is given twice")
        if sep:
            per[name] = v
        else:
            glob = v
    return glob, per


def tolerances_from_flags(metric: str | None = None, atol: list[str] | None = None, rtol: list[str] | None = None,
                          min_sqnr: float | str | None = None, min_cosine: float | str | None = None
                          ) -> tuple[Tolerance | None, dict[str, Tolerance], tuple[dict, dict]]:
    """The criterion of ``diff``'s flags, as the command line and the debugger's ``diff`` take them: the overall
    ``Tolerance`` (None: the comparison's default), the per-tensor ones of ``--atol``/``--rtol NAME:VALUE``, and
    those names as given ({name: value} of each flag). ``min_sqnr``/``min_cosine`` may be the flag's text."""
    def number(v, k):
        try:
            return None if v is None else float(v)
        except ValueError:
            raise setting_error(UsageError, FLAGS[k], f"{v!r}: expected a number") from None

    min_sqnr, min_cosine = number(min_sqnr, "min_sqnr"), number(min_cosine, "min_cosine")
    glob_atol, per_atol = _items(atol, "--atol")
    glob_rtol, per_rtol = _items(rtol, "--rtol")
    base = Tolerance.from_flags(metric, atol=glob_atol, rtol=glob_rtol, min_sqnr=min_sqnr, min_cosine=min_cosine)
    per = {n: Tolerance.from_flags(metric or (base.metric if base else None), atol=per_atol.get(n, glob_atol),
                                   rtol=per_rtol.get(n, glob_rtol), min_sqnr=min_sqnr, min_cosine=min_cosine)
           for n in set(per_atol) | set(per_rtol)}
    return base, per, (per_atol, per_rtol)
