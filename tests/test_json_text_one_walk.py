"""report.io.json_text makes a report JSON-ready in one walk (for_json), where it walked it twice
(in_cli_words, then json_words): the same values, checked against the two walks composed, on data of every
kind a report holds (said texts, non-finite floats, numpy values and arrays, named tuples, subclasses)."""

from __future__ import annotations

import json
import math
from collections import OrderedDict, namedtuple

import numpy as np

from onnxprobe.errors import said
from onnxprobe.report.io import for_json, in_cli_words, json_default, json_text
from onnxprobe.text import json_words

Point = namedtuple("Point", "x y")


class MyList(list):
    pass


def _data():
    note = said(lambda say: say.either("api words", "--cli words"))
    return {
        "note": note, "notes": [note, "plain", "nan"], "inf": math.inf, "nan": math.nan, "neg": -math.inf, "ok": 1.5,
        "int": 3, "bool": True, "none": None, "np_f32": np.float32(2.5), "np_nan": np.float64("nan"),
        "arr": np.array([1.0, np.inf, np.nan], np.float32), "ints": np.array([1, 2], np.int64), "tup": (note, math.inf),
        "named": Point(note, math.nan), "mine": MyList([note, math.inf]), "od": OrderedDict(a=note, b=-math.inf),
        "nested": [{"k": [note, (1.0, math.nan)], "deep": {"x": [[math.inf]]}}],
    }


def _same(x, y) -> bool:
    if type(x) is not type(y):
        return False
    if isinstance(x, dict):
        return list(x) == list(y) and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, (list, tuple)):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    if isinstance(x, np.ndarray):
        return x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f")
    if isinstance(x, float) and math.isnan(x):
        return math.isnan(y)
    return x == y


def test_one_walk_is_the_two_composed():
    d = _data()
    assert _same(for_json(d), json_words(in_cli_words(d)))
    assert for_json(d)["note"] == "--cli words"
    assert for_json(d)["named"] == ["api words", "nan"]  # a named tuple: as json_words made it, as before


def test_json_text_is_the_two_walks_written():
    d = _data()
    assert json_text(d) == json.dumps(json_words(in_cli_words(d)), indent=2, allow_nan=False,
                                      default=json_default)
