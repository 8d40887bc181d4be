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


@pytest.mark.parametrize("extras", [False, True])
def test_a_pair_measured_a_slice_at_a_time_has_the_whole_pairs_metrics(tmp_path, monkeypatch, extras):
    """diff's in-graph row of a pair of more than CHUNK_ELEMENTS: a slice of rows at a time (its a - b, |a - b| and
    squares were temporaries of the tensors' size: a diff of 128-256 MB activations peaked at 3x plain inference).
    Every metric, the argmax (in a later slice than the first) and the introduced error against numpy float64."""
    from onnxprobe.graph import pair_nodes
    from onnxprobe.runtime.runners import base as base_runner

    monkeypatch.setattr(pair_nodes, "CHUNK_ELEMENTS", 7 * 96)  # slices of 7 rows of 96, the last one short
    monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (0, 0))
    shape = (3, 5, 64, 96)
    rng = np.random.default_rng(9)
    x = rng.standard_normal(shape).astype(np.float32)
    paths = []
    for name, k in (("a", 1.01), ("b", 1.0)):
        g = helper.make_graph([helper.make_node("Mul", ["x", "k"], ["t"], name="mul"), helper.make_node("Tanh", ["t"], ["y"], name="tanh")],
                              "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
                              [onnx.numpy_helper.from_array(np.full(shape[-1], k, np.float32), "k")])
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / f"{name}.onnx")
        paths.append(str(tmp_path / f"{name}.onnx"))
    x[2, 4, 60, 7] = 40.0  # the largest |a - b| of t, in the last slices
    res = api.diff(*paths, selection=api.Selection(all=True), inputs=api.InputSpec(arrays={"x": x}), extras=extras,
                   config=api.RunConfig(cache=False))
    assert res.in_graph == 2, res.in_graph  # measured by the rows, not on the host
    assert sum(n.op_type == "Slice" for n in res.plan.fused.model.graph.node) >= 2 * 5  # in slices: the test can fail
    xa = (x * np.float32(1.01)).astype(np.float32)  # A's t, as float32 computes it
    oracle = {"t": (xa.astype(np.float64), x.astype(np.float64)), "y": (np.tanh(xa).astype(np.float64), np.tanh(x).astype(np.float64))}
    for name, (a, b) in oracle.items():  # (tanh: onnxruntime's float32 tanh against numpy's, a few 1e-8 apart)
        r = next(r for r in res.results if r.pair.b.name == name)
        a, b = a.ravel(), b.ravel()
        d = a - b
        m = r.metrics
        assert m.max_abs == pytest.approx(np.abs(d).max(), rel=1e-6, abs=1e-7)
        assert m.sqnr_db == pytest.approx(10 * np.log10((b @ b) / (d @ d)), abs=1e-3)
        assert m.cosine == pytest.approx((a @ b) / np.sqrt((a @ a) * (b @ b)), abs=1e-6)
        if extras:
            assert m.mean_abs == pytest.approx(np.abs(d).mean(), rel=1e-4)
            if name == "t":
                assert m.worst == np.unravel_index(int(np.argmax(np.abs(d))), shape) == (2, 4, 60, 7)
