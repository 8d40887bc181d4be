"""`grad --inputs-dir` over batches of several sizes: a dimension the batches disagree on reads unknown
(null / '?'), as `layers --inputs-dir` shows it; the rest are the run's. The shapes expected are worked out
from the batches and the model's own weights, not from onnxprobe."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import numpy_helper
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()


def _grad(*args, code=(0,)):
    r = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "160"})
    assert r.exit_code in code, r.output
    return r


def _dataset(path, sizes):
    rng = np.random.default_rng(1)
    path.mkdir()
    for i, n in enumerate(sizes):
        np.savez(path / f"b{i}.npz", x=rng.normal(size=(n, 3, 8, 8)).astype(np.float32))
    return path


def _expected(batch):
    """dynamic_batch: Conv (same padding) -> Relu -> ReduceMean over H, W -> MatMul."""
    m = onnx.load(str(sample_path("dynamic_batch")))
    w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    ch, out = w["conv.weight"].shape[0], w["head.weight"].shape[1]
    return {"conv.weight": list(w["conv.weight"].shape), "conv.bias": [ch], "head.weight": list(w["head.weight"].shape),
            "conv_out": [batch, ch, 8, 8], "relu_out": [batch, ch, 8, 8], "pooled": [batch, ch], "y": [batch, out]}


def test_a_dimension_the_batches_disagree_on_is_unknown(tmp_path):
    ds = _dataset(tmp_path / "ds", (1, 3, 2))
    got = json.loads(_grad("grad", sample_path("dynamic_batch"), "--all", "--inputs-dir", ds, "--json", "-").stdout)
    assert {g["tensor"]: g["shape"] for g in got["gradients"]} == _expected(None)
    table = _grad("grad", sample_path("dynamic_batch"), "--all", "--inputs-dir", ds).stdout
    assert "?x4x8x8" in table and "1x4x8x8" not in table


def test_batches_of_one_size_keep_it(tmp_path):
    ds = _dataset(tmp_path / "ds", (2, 2))
    got = json.loads(_grad("grad", sample_path("dynamic_batch"), "--all", "--inputs-dir", ds, "--json", "-").stdout)
    assert {g["tensor"]: g["shape"] for g in got["gradients"]} == _expected(2)
