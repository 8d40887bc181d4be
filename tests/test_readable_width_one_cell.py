"""``report.widths.readable_width``: the narrowest width at which a name column stays readable. It no longer
shortens a column to one cell where that cannot be readable (ASCII names, one longer than a cell and none a
path ending in '/': 2 ms a column of 180 names); its answers are those of the search that tries one cell
first for every column, for sets of names of each kind, and where the narrowest width that reads is the
least of the search's range, the brute force's (a linear scan of ``readable`` over every width)."""

from __future__ import annotations

import pytest

from onnxprobe.report.cells import cells
from onnxprobe.report.names import shorten_names
from onnxprobe.report import widths
from onnxprobe.report.widths import readable, readable_width

SETS = {
    "paths": [f"/encoder/layer.{i}/attention/self/query/MatMul_output_0" for i in range(12)] + ["logits"],
    "one cell": ["a", "b", "c"],
    "one cell and long": ["a", "b", "last_hidden_state"],
    "ending in slash": ["x/y/", "x/z/", "q/r/"],
    "slash and one cell": ["a/b/", "c", "d/e/"],
    "mixed slash": ["a/b/", "a/b/c", "long/path/name"],
    "wide chars": ["模型/层/输出", "模型/层/权重", "x"],
    "empty and short": ["", "a", "ab"],
    "same names": ["dup/x/y", "dup/x/y", "dup/x/z"],
}


def _brute(names: list[str], need: int) -> int:
    for w in range(1, need + 1):
        if readable(names, shorten_names(names, w)):
            return w
    return need


@pytest.mark.parametrize("key", sorted(SETS))
def test_readable_width_is_the_search_that_tries_one_cell_first(key, monkeypatch):
    names = SETS[key]
    need = max(cells(n) for n in names)
    got = readable_width(names, need)
    monkeypatch.setattr(widths, "_may_read_at_one", lambda names: True)  # one cell tried for every column
    assert got == readable_width(names, need)


@pytest.mark.parametrize("key", ["paths", "one cell", "one cell and long", "ending in slash", "wide chars", "same names"])
def test_readable_width_is_the_narrowest_that_reads(key):
    names = SETS[key]
    need = max(cells(n) for n in names)
    assert readable_width(names, need) == _brute(names, need)
