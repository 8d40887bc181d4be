"""Files that are not regular files (/dev/null, a FIFO, /dev/fd/N) and paths that are no path (''):
written or read where that can work, one clear line where it cannot."""

from __future__ import annotations

import json
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


def _fifo_with(tmp_path, name, data: bytes):
    """A FIFO that a thread fills with ``data`` (what a shell's ``<(...)`` gives: a pipe)."""
    fifo = tmp_path / name
    os.mkfifo(fifo)
    t = threading.Thread(target=lambda: fifo.write_bytes(data), daemon=True)
    t.start()
    return fifo


def test_files_read_once_may_be_pipes(tmp_path):
    r = invoke("debug", sample_path("mlp"), "--script", _fifo_with(tmp_path, "script", b"nodes\n"))
    assert r.exit_code == 0, r.output
    assert "7 of 7 nodes" in r.stdout
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 16)).astype(np.float32) for _ in range(2)]
    reports = []
    for i, x in enumerate(xs):  # one shard each
        (tmp_path / f"d{i}").mkdir()
        np.savez(tmp_path / f"d{i}" / "b.npz", x=x)
        r = invoke("layers", sample_path("mlp"), "--inputs-dir", tmp_path / f"d{i}", "--json", tmp_path / f"r{i}.json")
        assert r.exit_code == 0, r.output
        reports.append(_fifo_with(tmp_path, f"p{i}", (tmp_path / f"r{i}.json").read_bytes()))
    r = invoke("merge-stats", *reports, "--json", "-")
    assert r.exit_code == 0, r.output
    merged = json.loads(r.stdout)
    assert merged["batches"] == 2
    y = np.concatenate([ReferenceEvaluator(str(sample_path("mlp"))).run(["y"], {"x": x})[0] for x in xs]).astype(np.float64)
    row = next(t for t in merged["tensors"] if t["name"] == "y")
    assert row["count"] == y.size
    np.testing.assert_allclose([row["min"], row["max"], row["mean"]], [y.min(), y.max(), y.mean()], rtol=1e-5)
    r = invoke("diff", sample_path("mlp"), sample_path("mlp"), "--map", _fifo_with(tmp_path, "map", b'{"y": "y"}'))
    assert r.exit_code == 0, r.output


def test_a_device_is_still_refused_as_a_script(tmp_path):
    r = invoke("debug", sample_path("mlp"), "--script", "/dev/zero")
    assert r.exit_code == 2 and "not a regular file" in r.output


def test_an_empty_path_is_said_to_be_one(tmp_path):
    np.savez(tmp_path / "in.npz", **sample_feeds("mlp"))
    for argv in (["layers", ""], ["layers", sample_path("mlp"), "--json", ""], ["layers", sample_path("mlp"), "--save", ""],
                 ["extract", sample_path("mlp"), "--to", "fc1_out", "-o", ""], ["debug", sample_path("mlp"), "--script", ""],
                 ["merge-stats", ""], ["layers", sample_path("mlp"), "--inputs", ""]):
        r = invoke(*argv)
        assert r.exit_code == 2, (argv, r.output)
        assert "an empty path" in r.output and ".:" not in r.output, (argv, r.output)
    from onnxprobe import api
    from onnxprobe.errors import UsageError

    for call in (lambda: api.layers(""), lambda: api.save_npz({"a": np.zeros(1)}, "")):
        try:
            call()
        except UsageError as e:
            assert "an empty path" in str(e)
        else:
            raise AssertionError("an empty path was taken")
