"""A NaN in a tensor summarised block by block in the graph (graph.stats_nodes.block_parts) whose other values
are all one value: onnxruntime's ReduceMin and ReduceMax skip NaN, so every block's extremes agree, and the
NaN shows only in the block's mean and sums. It must still be counted (the tensor rerun in the careful
form), never read as a constant tensor with no NaN."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxprobe import api
from onnxprobe.runtime.runners import base as base_runner


def _model(shape: list) -> bytes:
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


@pytest.mark.parametrize("value", [0.0, 7.25])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_nonfinite_value_among_equal_ones_is_counted_in_block_form(tmp_path, monkeypatch, value, bad):
    monkeypatch.setattr(base_runner, "SMALL_ON_HOST", (0, 0))  # every probe in the graph
    shape = [4, 512]
    x = np.full(shape, value, np.float32)
    x[1, 3] = bad
    path = tmp_path / "m.onnx"
    path.write_bytes(_model(shape))
    res = api.layers(path, api.Selection(all=True), api.RunConfig(device="cpu", cache=False),
                     inputs=api.InputSpec(arrays={"x": x}))
    assert {p.ref.name: p.stats_block for p in res.plan.probes}["y"] > 0  # the block form was planned
    st = res.stats["y"]
    assert (st.count, st.nan, st.inf) == (x.size, int(np.isnan(bad)), int(np.isinf(bad)))
    assert (st.min, st.max, st.mean, st.std) == (value, value, value, 0.0)
    assert st.zeros == (x.size - 1 if value == 0 else 0)
