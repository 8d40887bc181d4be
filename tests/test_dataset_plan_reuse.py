"""A dataset's batches reuse one probed copy and its session: the histogram pass (the raw values of the
tensors that ran) must not rewrite the model and build a new onnxruntime session for every batch, which
made `layers --inputs-dir` over thousands of tiny batches cost a model rewrite each (0.3 s a batch for
a model that runs in a millisecond)."""

from __future__ import annotations

import numpy as np

from conftest import sample_path
from onnxprobe import api
from onnxprobe.runtime.runners import base


def _folder(tmp_path, n, shape=(1, 3, 32, 32)):
    for i in range(n):
        x = np.random.default_rng(i).normal(0.5, 0.3, shape).astype(np.float32)
        np.savez(tmp_path / f"b{i:03d}.npz", image=x)
    return tmp_path


def test_batches_of_one_shape_plan_once(tmp_path, monkeypatch):
    made = []
    real = base.make_plan

    def counting(*a, **kw):
        made.append(kw.get("raw"))
        return real(*a, **kw)

    monkeypatch.setattr(base, "make_plan", counting)
    res = api.layers_dataset(sample_path("cnn"), _folder(tmp_path, 6))
    assert res.batches == 6
    # the statistics plan and the raw values' plan, each made once, not once per batch
    assert len(made) <= 2, made

