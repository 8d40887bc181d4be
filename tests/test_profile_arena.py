"""--profile times each kernel as a plain onnxruntime session runs it: with its memory arena, kept from one run to
the next. Profiled without it (a one-run session's settings, which hand memory back), every timed run paid fresh
page faults on each large output: a Relu writing 4 MB read about ten times onnxruntime's own profile of the model,
and in diff side A's kernels several times B's for byte-identical models. (No timing is asserted: the settings
the profiled session is made and run with are.)"""

from __future__ import annotations

from conftest import sample_path
from onnxprobe import api
from onnxprobe.runtime import profile as P


def test_the_profiled_session_keeps_its_arena_over_the_runs(monkeypatch):
    made, ran = [], []
    create, run = P.create_session, P.run_bound

    def create_spy(*a, **k):
        made.append(k.get("arena", False))
        return create(*a, **k)

    def run_spy(*a, **k):
        ran.append(k.get("shrink", True))
        return run(*a, **k)

    monkeypatch.setattr(P, "create_session", create_spy)
    monkeypatch.setattr(P, "run_bound", run_spy)
    m = api.load(sample_path("cnn"))
    res = api.layers(m, api.Selection(all=True))
    prof = api.profile_layers(m, res, res.feed)
    assert prof is not None and made and ran
    assert all(made), made  # the arena on: a plain session's
    assert not any(ran), ran  # and its blocks kept between the timed runs


def test_a_body_node_the_model_named_like_a_probe_keeps_its_time(tmp_path):
    """A Loop body's MatMul named 'onnxprobe/body_matmul' by the model was taken for a probe (only the main graph's
    node names counted as the model's own): its row read no time."""
    import onnx

    from onnxprobe.graph.walk import all_graphs

    m = onnx.load(str(sample_path("control_flow")))
    body = next(n for g in list(all_graphs(m.graph))[1:] for n in g.node if n.op_type == "MatMul" and "body" in n.name)
    body.name = "onnxprobe/body_matmul"
    onnx.save(m, tmp_path / "m.onnx")
    model = api.load(tmp_path / "m.onnx")
    res = api.layers(model, api.Selection(all=True))
    prof = api.profile_layers(model, res, res.feed)
    row = prof.rows.get(body.output[0])
    assert row is not None and row.kernel_ms is not None and row.plain_ms is not None, prof.rows
