"""QA: `diff --json` wrote a max_abs, rmse or cosine that is not finite as null, which also means "not
measured", while sqnr_db and max_rel said theirs as "inf" / "-inf" / "nan". Every float metric of every JSON
report says a non-finite value in those words (``text.json_word``), the readers take the words back, and the
JSON stays strict (no bare Infinity or NaN: jq refuses them). Oracle: numpy float64 on the same values."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnxprobe import api


def _strict(text: str):
    def refuse(word):
        raise AssertionError(f"bare {word} in JSON")

    return json.loads(text, parse_constant=refuse)


def _model(op: str) -> onnx.ModelProto:
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], name="n")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


X = np.array([1.7e308, 1.0])


@pytest.fixture(scope="module")
def overflowing():
    """A = x, B = -x: a - b overflows float64 at the first element (|a-b| = 3.4e308), both pairs finite."""
    res = api.diff(_model("Identity"), _model("Neg"), inputs=api.InputSpec(arrays={"x": X}), config=api.RunConfig(device="cpu"))
    a, b = X, -X
    with np.errstate(over="ignore"):
        oracle = {"max_abs": float(np.max(np.abs(a - b))), "rmse": float(np.sqrt(np.mean((a - b) ** 2)))}
    assert oracle["max_abs"] == math.inf and oracle["rmse"] == math.inf  # the oracle's own word
    return res, oracle


def test_diff_json_says_infinite_metrics_as_words(overflowing):
    res, oracle = overflowing
    d = _strict(json.dumps(api.report(res), allow_nan=False))
    [p] = [p for p in d["pairs"] if p["a"] == "y"]
    assert p["count"] == 2
    assert p["max_abs"] == "inf" and p["rmse"] == "inf", p
    assert p["introduced_max_abs"] == "inf", p
    assert math.isfinite(p["mean_abs"]) or p["mean_abs"] in ("inf", "nan")


def test_the_table_and_its_rows_read_the_words_back(overflowing):
    res, _ = overflowing
    rows = _strict(api.text(res, format="json"))
    [row] = [r for r in rows if r["tensor"] == "y"]
    assert row["max_abs"] == "inf", row
    [line] = [r for r in csv.DictReader(io.StringIO(api.text(res, format="csv"))) if r["tensor"] == "y"]
    assert float(line["max_abs"]) == math.inf, line
    table = api.text(res, width=200)
    [y] = [ln for ln in table.splitlines() if ln.startswith("▶0 ")]
    assert " inf " in y, table
    page = api.html(res)
    assert 'data-v="inf"' in page, "the page sorts the pair's max |a-b| as infinite"


def test_pooled_sums_write_their_words_through_the_one_helper():
    from onnxprobe.stats.pooled import PairSums

    s = PairSums.one(0, (2,), count=2, max_abs=math.inf, argmax=0, b_absmax=1.7e308, excess=math.inf, max_rel=2.0,
                     sum_abs=math.inf, dd=math.inf, aa=math.inf, bb=math.inf, ab=-math.inf)
    d = _strict(json.dumps(s.to_dict(), allow_nan=False))
    assert d["max_abs"] == "inf" and d["excess"] == "inf"
    back = PairSums.from_dict(d)
    assert back.max_abs == math.inf
    with pytest.raises(ValueError):
        PairSums.from_dict({**d, "max_abs": "Infinity"})


def test_every_json_writer_says_a_stray_non_finite_float_as_a_word():
    """A field whose own writer missed a non-finite value (as diff --fp32-sensitivity's gain did) is a word in the
    report, never an 'Out of range float values' internal error: the CLI's JSON, the API's report dict, the HTML
    page's data and --format json all end in text.json_words; None (a chosen null) stays null."""
    import numpy as np

    from onnxprobe.report.io import json_text
    from onnxprobe.report.table import Column, Table
    from onnxprobe.text import json_words

    data = {"a": float("inf"), "b": [np.float32("nan"), 1.5], "c": np.array([1.0, -np.inf]), "d": None,
            "e": (np.float64("-inf"), 2), "f": np.int64(3), "g": "inf"}
    want = {"a": "inf", "b": ["nan", 1.5], "c": [1.0, "-inf"], "d": None, "e": ["-inf", 2], "f": 3, "g": "inf"}
    strict = (lambda t: json.loads(t, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c))))
    assert strict(json_text(data)) == want
    assert json_words(data)["e"] == ("-inf", 2)  # a tuple stays one until it is written
    t = Table([Column("x", "x", "x", 8)])
    t.add_row(["inf"], [float("inf")])
    assert strict(t.text("json")) == [{"x": "inf"}]
