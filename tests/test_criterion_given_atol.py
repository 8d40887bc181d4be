"""`diff --vs-torch` of a float16 export (and `diff --grad`) with --atol: the given atol is absolute (Tolerance.over
drops atol_relative), but the criterion line still said "--atol given; the rest the default for a float16 export
against its module: atol relative to each tensor's largest |b|", describing an atol that was not applied. QA."""

from __future__ import annotations

import pytest

from onnxprobe.compare.criteria import GRAD_TOLERANCE, HALF_GRAD_TOLERANCE, HALF_TOLERANCE
from onnxprobe.stats.metrics import Tolerance


@pytest.mark.parametrize("default", [HALF_TOLERANCE, GRAD_TOLERANCE, HALF_GRAD_TOLERANCE])
def test_a_given_atol_is_described_as_applied(default):
    t = Tolerance.from_flags(atol=0.5).over(default)
    assert not t.atol_relative and t.atol_of(100.0) == 0.5  # applied: absolute
    line = t.describe()
    assert "relative" not in line, line
    assert line.startswith(f"|a-b| <= 0.5 + {default.rtol:g}*|b|"), line
    assert "--atol given" in line and "absolute" in line, line


def test_a_given_rtol_keeps_the_relative_atol_and_says_so():
    t = Tolerance.from_flags(rtol=0.1).over(HALF_TOLERANCE)
    assert t.atol_relative and "atol relative to each tensor's largest |b|" in t.describe()


@pytest.mark.parametrize("flags, shown", [
    (dict(min_cosine=0.9999999), "cosine >= 0.9999999"),  # read 'cosine >= 1': a threshold no cosine but 1 meets
    (dict(min_sqnr=40.1234567), "SQNR >= 40.1234567 dB"),
    (dict(atol=1.0000001e-5, rtol=0.3), "|a-b| <= 1.0000001e-05 + 0.3*|b|"),
    (dict(atol=0.5), "|a-b| <= 0.5 + 0.001*|b|"),
])
def test_a_threshold_is_shown_as_given(flags, shown):
    """The criterion line shows each threshold so that it reads back as the same number (6 significant digits
    rounded 0.9999999 to 1), in the line and in the flags it was given by; no more digits than that takes."""
    line = Tolerance.from_flags(**flags).describe()
    assert line.startswith(shown), line
    for v in flags.values():
        assert any(float(w.rstrip(";),")) == v for w in line.split("given:")[1].split() if w[0].isdigit()), line
