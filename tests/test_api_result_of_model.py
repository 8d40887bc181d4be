"""API functions that take a plan or a result with a model: one of another model gave an empty .npz
(save_tensors), a runtime's error about the feed (profile_layers), another model's verdict written into the result
(grad_check); run(plan, raw=True) of a plan that keeps no values returned none without a word, run(plan,
selection=...) ignored the selection, profile_layers(runs=0) timed nothing and runs='3' raised a bare TypeError."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import sample_path
from onnxprobe import api
from onnxprobe.errors import UsageError


@pytest.fixture(scope="module")
def two():
    cnn, mlp = api.load(sample_path("cnn")), api.load(sample_path("mlp"))
    return cnn, mlp, {"x": np.ones((4, 16), np.float32)}


def test_a_result_of_another_model_is_refused(two, tmp_path):
    cnn, mlp, feed = two
    of_cnn = api.layers(cnn)
    with pytest.raises(UsageError, match="result: its tensor .* is not in the model given .*a result of another model"):
        api.save_tensors(mlp, of_cnn, feed, tmp_path / "t.npz")
    assert not (tmp_path / "t.npz").exists()
    with pytest.raises(UsageError, match="a result of another model"):
        api.profile_layers(mlp, of_cnn, feed)
    g = api.grad(cnn)
    before = [r.check for r in g.rows]
    with pytest.raises(UsageError, match="a result of another model"):
        api.grad_check(mlp, api.grad_plan(mlp), feed, g)
    assert [r.check for r in g.rows] == before and g.check_mode is None  # the result left as it was
    # its own model's are taken
    assert api.save_tensors(mlp, api.layers(mlp), feed, tmp_path / "own.npz") >= 1
    assert set(np.load(tmp_path / "own.npz").files)


@pytest.mark.parametrize("runs", [0, -1, "3", 1.5, True])
def test_profile_runs_must_be_a_count(two, runs):
    _, mlp, feed = two
    with pytest.raises(UsageError, match="runs: expected a count"):
        api.profile_layers(mlp, api.run(mlp, feed), feed, runs=runs)


def test_profile_runs_may_be_a_numpy_count(two):
    _, mlp, feed = two
    assert api.profile_layers(mlp, api.run(mlp, feed), feed, runs=np.int64(2)).rows


def test_run_of_a_plan_refuses_what_it_cannot_do(two):
    _, mlp, feed = two
    p = api.plan(mlp, api.Selection(ops=("Gemm",)))
    with pytest.raises(UsageError, match="selection: a plan's tensors are chosen when it is made"):
        api.run(p, feed, selection=api.Selection(ops=("Relu",)))
    with pytest.raises(UsageError, match="raw=True: the plan keeps no values"):
        api.run(p, feed, raw=True)
    kept = api.plan(mlp, api.Selection(ops=("Gemm",)), raw=True)
    got = api.run(kept, feed, raw=True)
    assert got.arrays and set(got.arrays) == {pr.ref.name for pr in kept.probes}
