"""Conditions on tensor statistics, as ``where`` takes them: ``nan``, ``inf``, ``nonfinite``,
``absmax>1e4``, ``std<1e-6``, ``mean!=0``...

Grammar: a keyword (``nan``: some NaN; ``inf``: some ±Inf; ``nonfinite``: either), or
``STAT OP NUMBER`` with STAT one of ``STATS`` and OP one of ``< <= > >= == !=``. Statistics are over
the finite values (see ``TensorStats``); a tensor with no finite value has NaN for them, and no
comparison holds on NaN. Pure functions: no graphs, no I/O.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass

from onnxprobe.errors import UsageError
from onnxprobe.stats.tensor_stats import TensorStats
from onnxprobe.text import as_word

KEYWORDS = ("nan", "inf", "nonfinite")
STATS = ("absmax", "min", "max", "mean", "std", "abs_mean", "zero_fraction", "nan", "inf", "count")
OPS = {"<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt}
_RE = re.compile(r"^\s*([a-z_]+)\s*(<=|>=|==|!=|<|>|=)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|[-+]?inf)\s*$", re.I)
EXAMPLES = "nan, inf, nonfinite, absmax>1e4, std<1e-6, mean!=0"


def stat_value(s: TensorStats, stat: str) -> float:
    """The statistic ``stat`` of ``s`` a condition compares. min, max, mean... are of the finite values (NaN
    where there are none); absmax is the largest magnitude of all of them: inf where an Inf is among them
    (`where absmax>1e30` found nothing in a tensor of +-Inf, nor in a float16 overflow)."""
    if stat == "absmax":
        return math.inf if s.inf else max(abs(s.min), abs(s.max)) if s.finite else math.nan
    if stat in ("min", "max") and not s.finite:
        return math.nan
    if stat == "abs_mean":
        return s.abs_mean
    v = getattr(s, stat)  # an int64 tensor's exact extremes (Python ints) stay exact: float64 rounds past 2^53
    return v if isinstance(v, int) and not isinstance(v, bool) else float(v)


@dataclass(frozen=True)
class Condition:
    """A condition on a tensor's statistics, as the debugger's ``where`` takes it ("nan > 0",
    "max > 1e4"): the statistic, a comparison and a value (``holds(stats)``)."""

    text: str
    stat: str  # "nan" | "inf" | "nonfinite" | one of STATS
    op: str = ">"
    value: float = 0.0  # an int where given as one: compared exactly with int64 extremes

    def __post_init__(self) -> None:
        # checked when made, as every settings object is (one built directly, not by parse_condition, reached
        # api.where unchecked: AttributeError, KeyError, TypeError from deep inside)
        if not isinstance(self.stat, str) or self.stat not in STATS + ("nonfinite",):
            raise UsageError(f"Condition stat={as_word(str(self.stat))}: choose one of {', '.join(STATS)}, nonfinite")
        if self.op not in OPS:
            raise UsageError(f"Condition op={as_word(str(self.op))}: choose one of {', '.join(OPS)}")
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)) or math.isnan(self.value):
            raise UsageError(f"Condition value={as_word(repr(self.value))[:40]}: expected a number")
        object.__setattr__(self, "value", self.value if isinstance(self.value, int) else float(self.value))

    def holds(self, s: TensorStats | None) -> bool:
        if s is None:
            return False
        if self.stat == "nonfinite":
            return s.has_nonfinite
        v = stat_value(s, self.stat)
        return not math.isnan(v) and OPS[self.op](v, self.value)

    def describe(self, s: TensorStats) -> str:
        """What made it hold, in words: '3 NaN, 1 Inf in 4 values', 'absmax 1.2e+04 > 1000'."""
        if self.stat in ("nan", "inf", "nonfinite") and self.op == ">" and self.value == 0:
            return f"{s.nan} NaN, {s.inf} Inf in {s.count} values"
        return f"{self.stat} {self._stat_said(stat_value(s, self.stat))} {self.op} {_said(self.value, 'g')}"

    def _stat_said(self, v) -> str:
        """The statistic in as few digits as keep the comparison true as written: 'min -6.55e+04 < -65503' read
        false of -65504; an integral value below 10^15 as its plain digits."""
        if isinstance(v, int) or not math.isfinite(v):
            return _said(v, "g")
        if v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        for digits in range(4, 18):
            text = format(v, f".{digits}g")
            if OPS[self.op](float(text), self.value) == OPS[self.op](v, self.value):
                return text
        return repr(v)


def _said(v, spec: str) -> str:
    """A statistic or a condition's value in words: an int as the integer it is (int64 extremes), a float by ``spec``
    where that keeps its value (else its shortest exact digits: 0.4999901 read '0.49999')."""
    if isinstance(v, int):
        return str(v)
    text = format(v, spec)
    return text if not math.isfinite(v) or float(text) == v else repr(v)


def parse_condition(text: str) -> Condition:
    """A Condition from text: "nan", "inf", "nonfinite" or STAT<NUMBER such as "absmax>1e4" (``EXAMPLES``;
    ``STATS`` lists the statistics)."""
    if not isinstance(text, str):
        raise UsageError(f"condition: expected a string such as 'nan' or 'absmax>1e4', got {type(text).__name__}")
    t = text.strip().lower().replace(" ", "")
    if t in KEYWORDS:
        return Condition(text.strip(), t)
    if t in ("nan|inf", "inf|nan"):
        return Condition(text.strip(), "nonfinite")
    m = _RE.match(t)
    if not m:
        raise UsageError(f"condition {text.strip()!r}: expected nan, inf, nonfinite or STAT<NUMBER (e.g. {EXAMPLES})")
    stat, op, value = m.group(1), m.group(2), m.group(3)
    stat = {"absmean": "abs_mean", "zeros": "zero_fraction"}.get(stat, stat)
    if stat not in STATS:
        raise UsageError(f"condition {text.strip()!r}: unknown statistic {as_word(stat)}; choose one of {', '.join(STATS)}")
    # an integer as written stays exact (max==4611686018427387905 is not 2^62 in float64)
    return Condition(text.strip(), stat, "==" if op == "=" else op, int(value) if re.fullmatch(r"[-+]?\d+", value) else float(value))
