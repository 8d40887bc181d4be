"""`where absmax>1e30` found nothing in a tensor of [inf, -inf] (and read absmax 1 for [inf, 1], a float16 overflow
missed by `where absmax>65000`): absmax is the largest magnitude of all the values, inf where an Inf is among them.
Oracle: numpy's max(abs(x))."""

from __future__ import annotations

import numpy as np
import pytest

from onnxprobe.stats.conditions import parse_condition
from onnxprobe.stats.tensor_stats import TensorStats


@pytest.mark.parametrize("values", [[np.inf, -np.inf], [np.inf, 1.0], [-np.inf, np.nan, 2.0], [1.0, -3.0], [np.float16(70000)]])
def test_absmax_is_the_largest_magnitude_infinities_included(values):
    with np.errstate(over="ignore"):
        x = np.asarray(values, dtype=np.float16 if isinstance(values[0], np.float16) else np.float64)
    st = TensorStats.from_array(x)
    want = float(np.nanmax(np.abs(x.astype(np.float64))))
    for threshold in (0.5, 2.5, 1e30, 6.5e4):
        assert parse_condition(f"absmax>{threshold}").holds(st) == (want > threshold), (values, threshold)
