"""The probe pass: the rewritten model's own outputs are bitwise equal to the original's (ORT CPU,
optimisations off); the input model is not modified; every kind of selected tensor gets a probe."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from conftest import SAMPLE_NAMES, sample_feeds, sample_path
from onnxprobe import api
from onnxprobe.graph.expose import expose
from onnxprobe.graph.select import Selection, select


def _run_plain(model: onnx.ModelProto, feeds, names):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip(names, s.run(names, feeds)))


@pytest.mark.parametrize("name", SAMPLE_NAMES)
@pytest.mark.parametrize("raw", [False, True])
def test_model_outputs_are_bitwise_equal(name, raw):
    model = api.load(sample_path(name))
    feeds = sample_feeds(name)
    outputs = [o.name for o in model.proto.graph.output]
    before = _run_plain(model.proto, feeds, outputs)
    plan = api.plan(model, Selection(all=True), raw=raw)
    after = _run_plain(plan.model, feeds, outputs)
    for o in outputs:
        assert before[o].dtype == after[o].dtype
        assert before[o].tobytes() == after[o].tobytes(), o


def test_input_model_is_not_modified():
    model = api.load(sample_path("control_flow"))
    before = model.inferred.SerializeToString()
    api.plan(model, Selection(all=True), raw=True)
    assert model.inferred.SerializeToString() == before


def test_rewritten_model_passes_checker():
    model = api.load(sample_path("control_flow"))
    plan = api.plan(model, Selection(all=True), raw=True)
    onnx.checker.check_model(plan.model)


def test_every_selected_tensor_gets_stats_and_main_graph_ones_a_shape():
    """Main-graph tensors and those of If branches (one value a run) get their runtime shape; those of loop
    bodies (one a iteration) do not."""
    model = api.load(sample_path("control_flow"))
    refs = select(model.inferred, Selection(all=True))
    _, probes = expose(model.inferred, refs)
    assert [p.ref.name for p in probes] == [r.name for r in refs]
    for p in probes:
        assert p.stats_output
        in_loop = any(s.endswith("/body") for s in p.ref.scope)
        assert (p.shape_output is not None) == (not in_loop), p.ref


def test_old_opset_falls_back_to_host_statistics(tmp_path):
    from conftest import make_model
    from onnx import TensorProto, helper

    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])], opset=7, ir=3)
    p = tmp_path / "old.onnx"
    onnx.save(m, p)
    x = np.array([-1, 2, 4], np.float32)
    res = api.layers(p, Selection(all=True), api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays={"x": x}))
    st = res.stats["y"]
    assert st.mean == pytest.approx(2.0) and st.zeros == 1
    assert any("host" in w for w in res.plan.warnings)


@pytest.mark.parametrize("nonfinite", ["in-graph", "masked"])
def test_self_contained_statistics_count_nan_and_inf(nonfinite, tmp_path):
    """The rows of a written model (mark --stats) are right on their own: NaN/Inf need no rerun."""
    from conftest import nan_model
    from onnxprobe.stats.tensor_stats import TensorStats

    m = onnx.shape_inference.infer_shapes(nan_model())
    refs = select(m, Selection(all=True))
    out, probes = expose(m, refs, nonfinite=nonfinite)
    x = np.array([-1.0, 0.0, 1.0, np.e], np.float32)  # log: nan, -inf, 0, 1
    got = _run_plain(out, {"x": x}, [p.stats_output for p in probes])
    st = {p.ref.name: TensorStats.from_rows(got[p.stats_output]) for p in probes}
    assert (st["logx"].nan, st["logx"].inf, st["logx"].count) == (1, 1, 4)
    assert st["logx"].mean == pytest.approx(0.5, rel=1e-6) and st["logx"].max == pytest.approx(1.0, rel=1e-6)


def test_deferred_rows_flag_the_tensors_to_rerun():
    from conftest import nan_model
    from onnxprobe.stats.tensor_stats import TensorStats, needs_rerun

    m = onnx.shape_inference.infer_shapes(nan_model())
    out, probes = expose(m, select(m, Selection(all=True)), nonfinite="deferred")
    got = _run_plain(out, {"x": np.array([1.0, 2.0, 3.0, -1.0], np.float32)}, [p.stats_output for p in probes])
    flagged = {p.ref.name for p in probes if needs_rerun(TensorStats.from_rows(got[p.stats_output]))}
    assert flagged == {"logx", "scaled", "y"}  # log(-1) = nan, and the NaN flows through Mul and Relu


def test_tensors_of_if_branches_get_their_runtime_shape(tmp_path):
    """A tensor of symbolic shape inside the If branch that ran reports the shape it had (the table showed
    the declared ?x4 where --save held 3x4); the branch that did not run has none. Oracle: the input's
    shape, which Relu and Neg keep."""
    from onnx import TensorProto, helper

    f = (lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 4]))
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="relu")], "then", [], [f("t")])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="neg")], "else", [], [f("e")])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=other)], "g",
                          [f("x"), helper.make_tensor_value_info("c", TensorProto.BOOL, [])], [f("y")])
    p = tmp_path / "if.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), p)
    x = np.ones((3, 4), np.float32)
    res = api.layers(p, Selection(all=True), api.RunConfig(device="cpu", cache=False),
                     api.InputSpec(arrays={"x": x, "c": np.array(True)}))
    assert res.shapes.get("t") == (3, 4) and "e" not in res.shapes, res.shapes
