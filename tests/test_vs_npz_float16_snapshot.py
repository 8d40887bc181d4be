"""A float16 model against the snapshot `layers --all --save` took of it, on the same inputs: the output's row was
measured again on a plain run of A (onnxruntime's CPU keeps float32 between ops there, and rounds to float16 at
each probed tensor), against a snapshot taken with the probes: it FAILed (exit 1) where every value is A's own.
Saved values get no plain rerun. The oracle: the snapshot is A's own run, so every pair is exact."""

from __future__ import annotations

import onnx
import pytest

from conftest import sample_path
from onnxprobe import api

float16 = pytest.importorskip("onnxruntime.transformers.float16")


def test_a_float16_model_against_its_own_snapshot_is_exact(tmp_path):
    m = float16.convert_float_to_float16(onnx.load(str(sample_path("transformer_block"))), keep_io_types=False)
    onnx.save(m, tmp_path / "tb16.onnx")
    for k, sel in enumerate((api.Selection(all=True), api.Selection())):
        api.layers(tmp_path / "tb16.onnx", sel, save=True, save_to=tmp_path / f"snap{k}.npz")
        res = api.diff(tmp_path / "tb16.onnx", vs_npz=tmp_path / f"snap{k}.npz", selection=sel)
        assert res.verdict()[0] == "pass", res.verdict()
        assert res.results and all(r.metrics is not None and r.metrics.max_abs == 0 for r in res.results), \
            [(r.pair.a.name, r.metrics and r.metrics.max_abs) for r in res.results]
