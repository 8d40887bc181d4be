"""api.Condition is checked when made, as every settings object is: one built directly (not by parse_condition)
reached api.where unchecked, and failed there with AttributeError, KeyError or TypeError; api.where's rows that are
no (TensorRef, TensorStats) pairs, too. Each is one UsageError naming what is wrong."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import sample_path
from onnxprobe import api
from onnxprobe.errors import UsageError


@pytest.mark.parametrize("kw, named", [(dict(stat="foo"), "stat=foo"), (dict(stat="mean", op="~", value=1), "op=~"),
                                       (dict(stat="mean", value="a"), "value="), (dict(stat="max", value=float("nan")), "value=")])
def test_a_condition_is_checked_when_made(kw, named):
    with pytest.raises(UsageError, match=f"Condition {named}"):
        api.Condition("x", **kw)


def test_a_condition_made_directly_finds_what_its_text_finds():
    res = api.layers(sample_path("cnn"), inputs=api.InputSpec(seed=3))
    top = max(st.max for _, st in res.rows())
    made = api.where(res, api.Condition("max>x", "max", ">", float(np.nextafter(top, -np.inf))))
    parsed = api.where(res, f"max>{float(np.nextafter(top, -np.inf))!r}")
    assert made is not None and parsed is not None and made[0].name == parsed[0].name


def test_rows_that_are_no_pairs_are_one_usage_error():
    with pytest.raises(UsageError, match="rows:"):
        api.where([1, 2, 3], "nan")
