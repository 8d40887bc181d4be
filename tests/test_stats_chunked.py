"""A tensor of more than CHUNK_ELEMENTS is summarised in the graph a slice of its rows at a time: its x - m and square
were two temporaries of its own size (a [1, 64, 1024, 1024] activation's statistics took 512 MB beside the model,
`layers` 2x plain inference's peak memory). The statistics are the whole tensor's: checked against numpy float64 on
hostile distributions, with a slice size that leaves a short last slice, the table's light form and JSON's full one."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnxprobe import api
from onnxprobe.graph import stats_nodes

SHAPE = (3, 5, 64, 96)  # 92,160 elements: rows of 1024 (block_size), 90 of them


def _values(kind: str) -> np.ndarray:
    rng = np.random.default_rng(4)
    x = rng.standard_normal(SHAPE)
    if kind == "offset":
        x = 1e4 + 1e-3 * x
    elif kind == "zeros":
        x[x < 0.3] = 0
    elif kind == "huge":
        x = 3e37 * x
    return x.astype(np.float32)


@pytest.mark.parametrize("extras", [False, True])
@pytest.mark.parametrize("kind", ["normal", "offset", "zeros", "huge"])
def test_a_tensor_summarised_a_slice_at_a_time_has_the_whole_tensors_statistics(tmp_path, monkeypatch, kind, extras):
    monkeypatch.setattr(stats_nodes, "CHUNK_ELEMENTS", 7 * 1024)  # 13 slices of 7 rows, the last of 6 rows
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["t"], name="id"), helper.make_node("Neg", ["t"], ["y"], name="neg")],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(SHAPE))])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    x = _values(kind)
    res = api.layers(str(path), api.Selection(names=["t"]), api.RunConfig(cache=False), api.InputSpec(arrays={"x": x}), extras=extras)
    assert sum(n.op_type == "Slice" for n in res.plan.model.graph.node) == 13  # summarised in slices: the test can fail
    st, v = res.stats["t"], x.astype(np.float64)
    assert (st.count, st.min, st.max) == (v.size, v.min(), v.max())
    assert st.mean == pytest.approx(v.mean(), rel=1e-9, abs=2e-7 * np.abs(v).max())  # float32 block sums
    assert st.std == pytest.approx(v.std(), rel=1e-6)
    if extras:
        assert st.abs_mean == pytest.approx(np.abs(v).mean(), rel=1e-6)
        assert st.zero_fraction == pytest.approx((v == 0).mean(), abs=0)
