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
