"""`--ray`: a dataset's batches on Ray actors of a local cluster give the single-process numbers; a killed
worker is survived; a bad batch is named; nothing of Ray is left running afterwards. Each test starts a
cluster of its own (several seconds each); skipped when ray is not installed."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import numpy as np
import onnx
import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app
from quantize_fixtures import quantize

pytest.importorskip("ray", reason="ray is not installed: pip install 'onnxprobe[ray]' to run the --ray tests")
pytestmark = pytest.mark.ray
runner = CliRunner()


def _run(*args, code=(0,)):
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code in code, r.output
    return r


def _under(pid: int) -> dict[int, str]:
    """pid -> command line of every process below ``pid`` (read from /proc here, not by onnxprobe)."""
    parent = {}
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                stat = Path(f"/proc/{e}/stat").read_text()
                parent[int(e)] = int(stat[stat.rindex(")") + 2:].split()[1])
            except (OSError, ValueError):
                pass
    out, todo = {}, [pid]
    while todo:
        p = todo.pop()
        for c, pp in parent.items():
            if pp == p and c not in out:
                try:
                    out[c] = Path(f"/proc/{c}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    out[c] = ""
                todo.append(c)
    return out


def _no_ray_left():
    left = {p: c for p, c in _under(os.getpid()).items() if "ray" in c.lower()}
    assert not left, left


def _folder(path: Path, n: int, name="image", shape=(1, 3, 32, 32)) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    for i in range(n):
        np.savez(path / f"b{i:02d}.npz", **{name: rng.random(shape, dtype=np.float32)})
    return path


def _without_executor(d: dict) -> dict:
    assert d.pop("executor") in ({"engine": "local"}, {"engine": "ray", "workers": 2})
    return d


def test_two_workers_give_the_single_process_numbers(tmp_path):
    a = quantize("cnn", "qdq", tmp_path)
    ds = _folder(tmp_path / "ds", 6)
    for cmd in (["layers", sample_path("cnn"), "--all"], ["diff", a, sample_path("cnn"), "--all"]):
        here = json.loads(_run(*cmd, "--inputs-dir", ds, "--json", "-", code=(0, 1)).stdout)
        there = json.loads(_run(*cmd, "--inputs-dir", ds, "--ray", "--ray-workers", 2, "--json", "-", code=(0, 1)).stdout)
        assert there["executor"] == {"engine": "ray", "workers": 2}
        assert _without_executor(there) == _without_executor(here)  # identical: the merges are exact
        _no_ray_left()
    gds = _folder(tmp_path / "g", 4, "x", (1, 3, 8, 8))
    here = json.loads(_run("grad", sample_path("dynamic_batch"), "--inputs-dir", gds, "--json", "-").stdout)
    there = json.loads(_run("grad", sample_path("dynamic_batch"), "--inputs-dir", gds, "--ray", "--ray-workers", 2,
                            "--json", "-").stdout)
    _no_ray_left()
    assert there["loss"] == here["loss"] and there["samples"] == 4
    for g, h in zip(there["gradients"], here["gradients"]):
        assert g["tensor"] == h["tensor"]
        for k in ("norm", "min", "max", "mean", "std"):  # onnxruntime's gradient kernels sum in an order that
            assert g[k] == pytest.approx(h[k], rel=1e-6, abs=1e-9)  # depends on its thread count


def test_batches_of_several_sizes_give_the_single_process_numbers(tmp_path):
    """Batches of 1, 5, 3, 17, 2 samples: each process made its plan for the first batch it saw, so a small
    tensor of another size was summarised on the host in one process and in the graph in another (means
    1e-9 apart). Every worker now plans for the dataset's first sample: the numbers are identical."""
    from onnx import TensorProto, helper

    from conftest import make_model

    m = make_model([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Tanh", ["h"], ["y"], name="t")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8])],
                   [onnx.numpy_helper.from_array(np.random.default_rng(0).normal(size=(4, 8)).astype(np.float32), "w")])
    onnx.save(m, tmp_path / "m.onnx")
    ds = tmp_path / "ds"
    ds.mkdir()
    rng = np.random.default_rng(1)
    for i, n in enumerate((1, 5, 3, 17, 2)):
        np.savez(ds / f"b{i:02d}.npz", x=(rng.normal(size=(n, 4)) * 3 - 1).astype(np.float32))
    for cmd in (["layers", tmp_path / "m.onnx", "--all"], ["diff", tmp_path / "m.onnx", "--vs-reference", "--all"]):
        here = json.loads(_run(*cmd, "--inputs-dir", ds, "--json", "-", code=(0, 1)).stdout)
        there = json.loads(_run(*cmd, "--inputs-dir", ds, "--ray", "--ray-workers", 2, "--json", "-", code=(0, 1)).stdout)
        assert _without_executor(there) == _without_executor(here)
        _no_ray_left()


def test_a_killed_worker_is_survived(tmp_path):
    from onnxprobe import api

    a = quantize("cnn", "qdq", tmp_path)
    ds = _folder(tmp_path / "ds", 12)
    killed = []

    def progress(done, total):
        if done == 2 and not killed:
            worker = next(p for p, c in sorted(_under(os.getpid()).items()) if c.startswith("ray::OnnxprobeWorker"))
            os.kill(worker, signal.SIGKILL)
            killed.append(worker)

    there = api.diff_dataset(a, sample_path("cnn"), ds, selection=api.Selection(all=True),
                             ray=api.RayOptions(workers=2), progress=progress)
    _no_ray_left()
    here = api.diff_dataset(a, sample_path("cnn"), ds, selection=api.Selection(all=True))
    assert killed and there.samples == here.samples == 12
    assert [r.metrics for r in there.results] == [r.metrics for r in here.results]
    assert [r.introduced for r in there.results] == [r.introduced for r in here.results]
    assert any("worker died" in n for n in there.notes)


def test_a_bad_batch_is_named_and_the_run_fails(tmp_path):
    ds = _folder(tmp_path / "ds", 4)
    np.savez(ds / "b02.npz", image=np.zeros((1, 3, 16, 16), np.float32))
    r = _run("layers", sample_path("cnn"), "--inputs-dir", ds, "--ray", "--ray-workers", 2, code=(2,))
    assert "1 of 4 batches failed" in r.stderr and "b02.npz" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    _no_ray_left()


def test_an_address_where_nothing_answers(tmp_path):
    ds = _folder(tmp_path / "ds", 1)
    r = _run("layers", sample_path("cnn"), "--inputs-dir", ds, "--ray-address", "127.0.0.1:1", code=(1,))
    assert "nothing answers" in r.stderr


def test_auto_where_the_found_cluster_is_gone(tmp_path, monkeypatch):
    """`--ray-address auto` is checked as a given address is: Ray resolves `auto` (RAY_ADDRESS here, else the
    last cluster's file or a running GCS it finds) and, where nothing answers there, retried for minutes."""
    ds = _folder(tmp_path / "ds", 1)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    r = _run("layers", sample_path("cnn"), "--inputs-dir", ds, "--ray-address", "auto", code=(1,))
    assert "--ray-address auto (" in r.stderr and ":1): nothing answers" in r.stderr  # the address auto stood for
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
