"""`goto #-1` and `goto -1` went to the last node (Python's negative indexing), where the README calls #N an index
and the out-of-range message says 0..N-1: a negative index is out of range, in the same words."""

from __future__ import annotations

import pytest

from conftest import sample_path
from onnxprobe import api
from onnxprobe.errors import UsageError
from onnxprobe.graph.index import index


@pytest.mark.parametrize("key", ["#-1", "-1", "#-7", "#7", "7"])
def test_an_index_outside_0_to_n_minus_1_is_no_node(key):
    idx = index(api.load(sample_path("mlp")))  # 7 nodes
    with pytest.raises(UsageError, match=r"node index -?\d+ out of range \(the model has 7 nodes, 0\.\.6\)"):
        idx.node(key)
    assert idx.node("#6").index == 6 and idx.node("0").index == 0
