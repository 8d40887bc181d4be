"""Files that are not regular files (/dev/null, a FIFO, /dev/fd/N) and paths that are no path (''):
written or read where that can work, one clear line where it cannot."""

from __future__ import annotations

import os
import threading

import numpy as np
from onnx.reference import ReferenceEvaluator
from typer.testing import CliRunner

from conftest import sample_feeds, sample_path
from onnxprobe.cli.main import app

runner = CliRunner()


def invoke(*args, env=None):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200", **(env or {})})


def _read_fifo(fifo, got):
    t = threading.Thread(target=lambda: got.setdefault("data", fifo.read_bytes()))
    t.start()
    return t


def test_save_to_dev_null_and_a_fifo_writes_a_readable_npz(tmp_path):
    """zipfile seeks back on a file whose tell works; /dev/null's tell is always 0 (struct.error)."""
    np.savez(tmp_path / "in.npz", **sample_feeds("mlp"))
    for flag, cmd in (("--save", "layers"), ("--save-grads", "grad")):
        r = invoke(cmd, sample_path("mlp"), "--inputs", tmp_path / "in.npz", flag, "/dev/null")
        assert r.exit_code == 0, r.output
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = {}
    t = _read_fifo(fifo, got)
    r = invoke("layers", sample_path("mlp"), "--inputs", tmp_path / "in.npz", "--save", fifo)
    t.join(timeout=30)
    assert r.exit_code == 0, r.output
    (tmp_path / "got.npz").write_bytes(got["data"])
    r = invoke("layers", sample_path("mlp"), "--inputs", tmp_path / "in.npz", "--save", tmp_path / "plain.npz")
    assert r.exit_code == 0, r.output
    a, b = np.load(tmp_path / "got.npz"), np.load(tmp_path / "plain.npz")
    assert sorted(a.files) == sorted(b.files) and "y" in a.files
    for k in a.files:
        np.testing.assert_array_equal(a[k], b[k])
    want = ReferenceEvaluator(str(sample_path("mlp"))).run(["y"], sample_feeds("mlp"))[0]
    np.testing.assert_allclose(a["y"], want, rtol=1e-5, atol=1e-6)
