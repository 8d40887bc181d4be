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
