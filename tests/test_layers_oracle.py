"""Probed statistics and raw values agree with independent oracles: onnx.reference.ReferenceEvaluator
for main-graph tensors, numpy by hand for tensors inside If/Loop bodies."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

from conftest import SAMPLE_NAMES, nan_model, sample_feeds, sample_path
from onnxprobe import api
from onnxprobe.runtime.runners import base as base_runner
from onnxprobe.stats.tensor_stats import TensorStats


def _assert_stats_match(st: TensorStats, ref: np.ndarray, name: str) -> None:
    x = np.asarray(ref, dtype=np.float64).reshape(-1)
    assert st.count == x.size, name
    assert st.nan == 0 and st.inf == 0, name
    # the oracle computes in float32 and ORT may order sums differently: relative tolerances
    scale = max(float(np.abs(x).max()), 1e-6)
    np.testing.assert_allclose(st.min, x.min(), atol=1e-5 * scale, err_msg=name)
    np.testing.assert_allclose(st.max, x.max(), atol=1e-5 * scale, err_msg=name)
    np.testing.assert_allclose(st.mean, x.mean(), atol=1e-5 * scale, err_msg=name)
    np.testing.assert_allclose(st.std, x.std(), atol=1e-5 * scale, err_msg=name)
    np.testing.assert_allclose(st.abs_mean, np.abs(x).mean(), atol=1e-5 * scale, err_msg=name)
    assert st.zero_fraction == pytest.approx(float((x == 0).mean()), abs=1.0 / x.size), name


@pytest.mark.parametrize("on_host", [True, False], ids=["small-on-host", "all-in-graph"])
@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_main_graph_tensors_agree_with_reference_evaluator(name, on_host, monkeypatch):
    """Both ways a tensor's statistics are taken: from its values on the host (the samples' tensors are
    small) and from the statistics nodes in the graph."""
    if not on_host:
        monkeypatch.setattr(base_runner, "SMALL_ON_HOST", (0, 0))
    feeds = sample_feeds(name)
    result = api.layers(sample_path(name), api.Selection(all=True), api.RunConfig(device="cpu"), save=True, inputs=api.InputSpec(arrays=feeds))
    ref = ReferenceEvaluator(onnx.load(str(sample_path(name))))
    expected = ref.run(None, feeds, intermediate=True)
    checked = 0
    for probe in result.plan.probes:
        if probe.ref.scope:
            continue
        t = probe.ref.name
        _assert_stats_match(result.stats[t], expected[t], t)
        np.testing.assert_allclose(result.arrays[t], expected[t], rtol=1e-4, atol=1e-5, err_msg=t)
        assert result.shapes[t] == tuple(np.shape(expected[t])), t
        checked += 1
    assert checked >= 3
    assert any(p.stats_on_host for p in result.plan.probes) == on_host


def _weights(name: str) -> dict[str, np.ndarray]:
    m = onnx.load(str(sample_path(name)))
    w = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    for n in m.graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                w.update({i.name: numpy_helper.to_array(i) for i in a.g.initializer})
    return w


@pytest.mark.parametrize("cond", [True, False])
def test_subgraph_tensors_agree_with_numpy(cond):
    feeds = sample_feeds("control_flow")
    feeds["cond"] = np.array(cond)
    w = _weights("control_flow")
    x = feeds["x"].astype(np.float64)
    h = x @ w["proj.weight"]
    then_mm = h @ w["branch.then.weight"]
    then_out = np.maximum(then_mm, 0)
    else_mul = h * w["branch.else.two"]
    else_out = np.tanh(else_mul)
    s = then_out if cond else else_out
    mms, adds, nexts = [], [], []
    for _ in range(int(feeds["n"])):
        mms.append(s @ w["loop.weight"])
        adds.append(mms[-1] + w["loop.bias"])
        s = np.tanh(adds[-1])
        nexts.append(s)
    expected = {"then_matmul": then_mm, "then_out": then_out, "else_mul": else_mul, "else_out": else_out,
                "body_matmul": np.stack(mms), "body_add": np.stack(adds), "s_next": np.stack(nexts), "y": s}
    result = api.layers(sample_path("control_flow"), api.Selection(all=True), api.RunConfig(device="cpu"), save=True, inputs=api.InputSpec(arrays=feeds))
    taken = {"then_matmul", "then_out"} if cond else {"else_mul", "else_out"}
    for t, v in expected.items():
        st = result.stats[t]
        if t in {"then_matmul", "then_out", "else_mul", "else_out"} and t not in taken:
            assert st.count == 0, f"{t}: branch not taken, must be reported as not run"
            continue
        _assert_stats_match(st, v, t)
        np.testing.assert_allclose(result.arrays[t], v, rtol=1e-4, atol=1e-5, err_msg=t)


def test_loop_with_zero_iterations_reports_not_run():
    feeds = sample_feeds("control_flow")
    feeds["n"] = np.array(0, np.int64)
    result = api.layers(sample_path("control_flow"), api.Selection(names=("s_next", "body_*")), api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays=feeds))
    assert {t: st.count for t, st in result.stats.items()} == {"body_matmul": 0, "body_add": 0, "s_next": 0}


def test_nan_and_inf_are_counted_in_graph(tmp_path):
    path = tmp_path / "nan.onnx"
    onnx.save(nan_model(), path)
    x = np.array([-1.0, 0.0, 1.0, np.e], np.float32)  # log: nan, -inf, 0, 1
    result = api.layers(path, api.Selection(all=True), api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays={"x": x}))
    log = result.stats["logx"]
    assert (log.nan, log.inf, log.count) == (1, 1, 4)
    assert log.min == pytest.approx(0.0) and log.max == pytest.approx(1.0, rel=1e-6)
    assert log.mean == pytest.approx(0.5, rel=1e-6)  # over finite values only
    scaled = result.stats["scaled"]
    assert (scaled.nan, scaled.inf) == (1, 1)
    y = result.stats["y"]  # Relu(nan) = nan, Relu(-inf) = 0
    assert y.nan == 1 and y.inf == 0
    assert y.zeros == 2  # relu(-inf) and relu(0)


def test_scalar_inputs_stay_scalars(tmp_path):
    """A 0-d input must reach onnxruntime as 0-d (np.ascontiguousarray would make it [1])."""
    from conftest import make_model
    from onnx import TensorProto, helper

    m = make_model([helper.make_node("Shape", ["s"], ["rank_dims"], name="shape"),
                    helper.make_node("Size", ["rank_dims"], ["rank"], name="size")],
                   [helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
                   [helper.make_tensor_value_info("rank", TensorProto.INT64, [])])
    p = tmp_path / "scalar.onnx"
    onnx.save(m, p)
    res = api.layers(p, api.Selection(all=True), api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays={"s": np.array(2.0, np.float32)}))
    assert res.stats["rank"].max == 0 and res.shapes["rank_dims"] == (0,)
