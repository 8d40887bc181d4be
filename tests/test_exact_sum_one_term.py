"""stats.moments.exact_sum of one term (what PairSums.one makes five of per pair) is the canonical form the
general accumulation gives: the term itself as a float, none for a zero, [nan] for a non-finite one; checked
against math.fsum of the term and against the sum reached through two terms (the general path)."""

import math
import sys

import pytest

from onnxprobe.stats.moments import exact_sum

TERMS = [1.0, -2.5, 0.1, 1e300, -1e-310, 5e-324, sys.float_info.max, 3, 2**60 + 1, True]


@pytest.mark.parametrize("x", TERMS)
def test_one_term_is_the_general_canonical_form(x):
    got = exact_sum([x])
    assert got == [math.fsum([x])]
    assert all(type(v) is float for v in got)
    # the general path: x + 0.0 through Shewchuk's partials and the canonical rounding
    assert got == exact_sum([x, 0.0]) == exact_sum([0.0, x])


@pytest.mark.parametrize("x", [0.0, -0.0, 0])
def test_zero_is_no_partial(x):
    assert exact_sum([x]) == [] == exact_sum([x, 0.0])


@pytest.mark.parametrize("x", [math.inf, -math.inf, math.nan])
def test_non_finite_is_unknown(x):
    got = exact_sum([x])
    assert len(got) == 1 and math.isnan(got[0])
