"""api.Tolerance and the CLI's flags mean the same criterion: an absolute metric with only atol given is
judged against atol alone (rtol 0), whichever door it came in by."""

from __future__ import annotations

import numpy as np
import pytest

from onnxprobe import api
from onnxprobe.stats.metrics import Tolerance
from onnxprobe.stats.host_sums import pair_sums


@pytest.mark.parametrize("metric", ["max_abs", "mean_abs", "rmse"])
def test_api_absolute_metric_with_atol_only_matches_the_flags(metric):
    made = api.Tolerance(metric, atol=0.5)
    flags = Tolerance.from_flags(metric, atol=0.5)
    assert (made.metric, made.atol, made.rtol) == (flags.metric, flags.atol, flags.rtol) == (metric, 0.5, 0.0)
    # |b| ~ 1e4 and an error of 5: rtol 1e-3 would have allowed 10.5
    b = np.full(16, 1e4, np.float64)
    assert not made.passes(pair_sums(b + 5.0, b).metrics(made.rtol))
    assert made.passes(pair_sums(b + 0.25, b).metrics(made.rtol))


def test_api_defaults_are_unchanged_elsewhere():
    assert (api.Tolerance().atol, api.Tolerance().rtol) == (1e-4, 1e-3)
    assert api.Tolerance("max_abs").rtol == 1e-3  # nothing given: the default criterion's thresholds
    assert api.Tolerance("max_abs", atol=0.5, rtol=0.01).rtol == 0.01
    assert api.Tolerance("allclose", atol=0.5).rtol == 1e-3  # allclose's rtol is part of its rule
    assert api.Tolerance("sqnr", min_sqnr=20).rtol == 1e-3
