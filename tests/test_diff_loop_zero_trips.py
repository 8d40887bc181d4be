"""A Loop that runs zero times (trip count 0, or a condition false at the start) has an empty scan output.
diff's one run measured that pair with an ArgMax, which onnxruntime refuses on 0 elements: the whole run
failed, and a note blamed 'onnxprobe/ArgMax/onnxprobe.pair2.argmax, which onnxprobe adds for this model
(its backward graph, loss or statistics)' before measuring everything again in separate runs. Now the one
run measures the other pairs, and the empty one is 'not compared' (nothing to compare), as before; the
body tensors, which never ran, are 'not run' in layers and never compared. Oracle for the loop that runs:
numpy float64 over the iterations."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api

V = helper.make_tensor_value_info
F = TensorProto.FLOAT
W = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)


def _loop(path, trips: int, cond: bool = True) -> str:
    """v <- tanh(v * w) + x, `trips` times (or none: cond false), scan output s = tanh(v * w)."""
    body = helper.make_graph([helper.make_node("Mul", ["v", "w"], ["t"], name="b_mul"),
                              helper.make_node("Tanh", ["t"], ["u"], name="b_tanh"),
                              helper.make_node("Add", ["u", "x"], ["vn"], name="b_add"),
                              helper.make_node("Identity", ["u"], ["s"], name="b_id"),
                              helper.make_node("Identity", ["c"], ["cn"], name="b_keep")], "body",
                             [V("i", TensorProto.INT64, []), V("c", TensorProto.BOOL, []), V("v", F, [2, 3])],
                             [V("cn", TensorProto.BOOL, []), V("vn", F, [2, 3]), V("s", F, [2, 3])])
    nodes = [helper.make_node("Relu", ["x"], ["x0"], name="pre"),
             helper.make_node("Loop", ["M", "cond", "x0"], ["y", "ss"], body=body, name="loop"),
             helper.make_node("Neg", ["y"], ["out"], name="post")]
    inits = [numpy_helper.from_array(W, "w"), numpy_helper.from_array(np.array(trips, np.int64), "M"),
             numpy_helper.from_array(np.array(cond), "cond")]
    onnx.save(make_model(nodes, [V("x", F, [2, 3])], [V("out", F, [2, 3]), V("ss", F, [None, 2, 3])], inits), path)
    return str(path)


@pytest.mark.parametrize("trips,cond", [(0, True), (5, False)])
def test_diff_of_a_loop_that_never_runs_measures_in_one_run(tmp_path, trips, cond):
    m = _loop(tmp_path / "m.onnx", trips, cond)
    res = api.diff(m, m, selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))
    assert not [n for n in res.notes if "one-run diff failed" in n], res.notes
    assert res.in_graph >= 2, res.in_graph
    by = {r.pair.a.name: r for r in res.results}
    assert by["ss"].problem and "empty" in by["ss"].problem and by["out"].metrics.exact
    assert "t" not in by and "u" not in by  # body tensors: not compared by diff
    lay = api.layers(m, api.Selection(all=True), api.RunConfig(device="cpu"))
    st = {ref.name: s for ref, s in lay.rows()}
    assert all(st[n].count == 0 for n in ("t", "u", "vn", "s")), st


def test_body_statistics_pool_the_iterations(tmp_path):
    m = _loop(tmp_path / "m.onnx", 3)
    x = (np.random.default_rng(2).standard_normal((2, 3)) * 1e3 + 5e4).astype(np.float32)
    lay = api.layers(m, api.Selection(all=True), api.RunConfig(device="cpu"), api.InputSpec(arrays={"x": x}))
    st = {ref.name: s for ref, s in lay.rows()}
    v, w, ts = np.maximum(x.astype(np.float64), 0), W.astype(np.float64), []
    for _ in range(3):
        t = (v * w).astype(np.float32).astype(np.float64)
        ts.append(t)
        v = np.tanh(t) + x
    t = np.concatenate([a.ravel() for a in ts])
    assert st["t"].count == 18
    np.testing.assert_allclose([st["t"].mean, st["t"].std, st["t"].min, st["t"].max], [t.mean(), t.std(), t.min(), t.max()], rtol=1e-6)
