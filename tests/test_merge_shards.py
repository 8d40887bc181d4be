"""merge-stats and shards that hold the same samples: refused on the samples' digests (a rerun with the
model at another path or on another executor, a shard beside a merge of merges that holds it), never on
file names (shards of one name from different folders, pipes, merged in stages); damaged counts refused.
Counts are checked against onnx.reference's tensors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]


def _batch(i: int) -> dict:
    return {"image": np.random.default_rng(300 + i).normal(0.5, 0.3, (1, 3, 32, 32)).astype(np.float32)}


def _folder(path: Path, indices) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for i in indices:
        np.savez(path / f"b{i:03d}.npz", **_batch(i))
    return path


def _run(*args, code=(0,)):
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code in code, r.output
    return r


def _refused(*args) -> str:
    r = runner.invoke(app, ["merge-stats", *map(str, args)])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.output, r.output
    return r.stderr


def _counts(indices) -> dict[str, int]:
    """Elements per tensor over these batches, from the reference evaluator."""
    ref = ReferenceEvaluator(onnx.load(str(sample_path("cnn"))))
    out: dict[str, int] = {}
    for i in indices:
        for name, v in ref.run(None, _batch(i), intermediate=True).items():
            out[name] = out.get(name, 0) + int(np.asarray(v).size)
    return out


@pytest.mark.parametrize("field, value", [("nan", 10**9), ("inf", "count+1"), ("zeros", "count+1"), ("nan", "count-1")])
def test_counts_that_do_not_add_up_are_a_damaged_report(tmp_path, field, value):
    """nan = 10**9 in a tensor of 24576 values merged: nan 1000000000, mean 0.0, std -0.0. Every count
    is within the count, and zeros within the finite values."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _run("layers", sample_path("cnn"), "--inputs-dir", _folder(tmp_path / "a", range(1)), "--json", a)
    _run("layers", sample_path("cnn"), "--inputs-dir", _folder(tmp_path / "b", range(1, 2)), "--json", b)
    d = json.loads(b.read_text())
    m = d["tensors"][0]["moments"]
    n = m["count"]
    m[field] = value if isinstance(value, int) else {"count+1": n + 1, "count-1": n - 1}[value]
    if field == "nan" and value == "count-1":
        m["zeros"] = 2  # n - 1 NaN leave one finite value: two zeros is one too many
    b.write_text(json.dumps(d))
    assert "malformed moments" in _refused(a, b)
