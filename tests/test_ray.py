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


def _serve(reply):
    """A TCP server on an ephemeral port of 127.0.0.1 that answers each connection with ``reply(data)`` (None: says
    nothing and keeps it open); its address."""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held = []

    def loop():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            c.settimeout(2)
            try:
                data = c.recv(64)
            except OSError:
                data = b""
            out = reply(data)
            if out is None:
                held.append(c)
                continue
            c.sendall(out)
            c.close()

    threading.Thread(target=loop, daemon=True).start()
    return f"127.0.0.1:{srv.getsockname()[1]}"


def test_an_address_where_another_service_answers(tmp_path):
    """A TCP connect alone let a web server's port through (the dashboard's 8265 given for the cluster's), and Ray
    then retried it for minutes with its C++ log on stderr: what answers must answer HTTP/2 as Ray's gRPC does."""
    ds = _folder(tmp_path / "ds", 1)
    web = _serve(lambda data: b"HTTP/1.0 400 Bad request\r\n\r\n")
    r = _run("layers", sample_path("cnn"), "--inputs-dir", ds, "--ray-address", web, code=(1,))
    assert "is no Ray cluster" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    silent = _serve(lambda data: None)
    r = _run("layers", sample_path("cnn"), "--inputs-dir", ds, "--ray-address", silent, code=(1,))
    assert "does not answer as a Ray cluster would" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = _run("layers", sample_path("cnn"), "--inputs-dir", ds, "--ray-address", "http://x:1", code=(2,))
    assert "expected auto, HOST:PORT or ray://HOST:PORT" in r.stderr


def test_a_grpc_answer_is_taken_for_ray():
    """The check lets through what answers HTTP/2's client preface with a SETTINGS frame (Ray's GCS and Ray Client
    are gRPC servers), having read the preface."""
    from onnxprobe.runtime.ray_pool import HTTP2_PREFACE, _reachable

    seen = []
    grpc = _serve(lambda data: (seen.append(data), bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))[1])
    _reachable(grpc)
    assert seen and HTTP2_PREFACE.startswith(seen[0][:24])


def test_auto_is_given_to_ray_as_auto(monkeypatch):
    """Ray reads a cluster's token (token authentication) for `auto` alone: the address `auto` stands for is checked,
    and `auto` itself is what ray.init gets (the address given instead failed on such a cluster)."""
    import ray

    from onnxprobe.runtime import ray_pool

    got = []
    monkeypatch.setattr(ray_pool, "_resolved", lambda a: "127.0.0.1:6379")
    monkeypatch.setattr(ray_pool, "_reachable", lambda a, given=None: None)
    monkeypatch.setattr(ray, "init", lambda address=None, **kw: (got.append(address), (_ for _ in ()).throw(ConnectionError("no")))[0])
    with pytest.raises(ray_pool.ExecutionError, match="Ray did not start"):
        ray_pool._init(ray, ray_pool.RayOptions(address="auto"), None)
    assert got == ["auto"]


# a SIGTERM after a Ray run, in the same process: Ray's C++ crash handler, removed at its shutdown, left SIGTERM's default
# action (killed, -15) where ours stood, while Python's view of it still read ours
AFTER_A_RUN = """
import os, signal, sys, time
{before}
from onnxprobe.cli import main
from onnxprobe.runtime import ray_pool

from onnxprobe.cli.termination import exit_on_termination
exit_on_termination()
got = []
ray_pool.ray_map(lambda: (lambda b: b * 2), [1, 2, 3], ray_pool.RayOptions(workers=1), ray_pool.Executor(),
                 lambda b, g: got.append(g))
assert sorted(got) == [2, 4, 6], got
try:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(10)
except SystemExit as e:
    print("ended", e.code)
"""


@pytest.mark.parametrize("before", ["", "import ray"], ids=["ray-imported-by-the-run", "ray-imported-before"])
def test_sigterm_after_a_ray_run_meets_our_handler(before):
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root}
    env.pop("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", None)
    r = subprocess.run([sys.executable, "-c", AFTER_A_RUN.format(before=before)], capture_output=True, text=True,
                       env=env, timeout=300)
    assert (r.returncode, r.stdout.strip()) == (0, "ended 143"), (r.returncode, r.stdout, r.stderr[-2000:])


def test_a_local_run_writes_nothing_in_home_and_ends_on_sigterm_as_any_run(tmp_path):
    """A private local cluster made a token and wrote it to ~/.ray/auth_token (Ray's default: token authentication);
    its token is the run's own, in its temporary folder. SIGTERM during a Ray run printed Ray's crash report and exited
    15 (its core worker's handler): the run ends as any run does, exit 143, nothing on stderr, nothing left running."""
    import subprocess
    import sys
    import time

    ds = _folder(tmp_path / "ds", 3)
    home = tmp_path / "home"
    home.mkdir()
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": root, "NO_COLOR": "1"}
    for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS"):
        env.pop(k, None)
    cmd = [sys.executable, "-m", "onnxprobe", "layers", str(sample_path("cnn")), "--inputs-dir", str(ds), "--ray",
           "--ray-workers", "1"]
    p = subprocess.run(cmd + ["--json", str(tmp_path / "r.json")], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "r.json").read_text())["executor"]["engine"] == "ray"
    assert not (home / ".ray").exists(), sorted(os.listdir(home / ".ray"))
    big = _folder(tmp_path / "big", 1500)  # more than the run gets through before the signal, on any machine
    for moment in (0.5, 3.0):  # while the actors start; while they are at work
        proc = subprocess.Popen([*cmd[:-5], "--inputs-dir", str(big), "--ray", "--ray-workers", "1"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        deadline = time.time() + 120
        while time.time() < deadline and not any("raylet" in c for c in _under(proc.pid).values()):
            time.sleep(0.1)
        time.sleep(moment)
        assert proc.poll() is None, "the run ended before the signal: nothing was tested"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert (proc.returncode, err) == (143, ""), (moment, proc.returncode, err[-3000:])
        assert not any("ray" in c.lower() for c in _under(proc.pid).values())


def test_a_worker_whose_set_up_failed_says_why():
    """An actor whose creation raised (the model not at its path on that node, onnxprobe not installed there) was 'the
    worker process died (ActorDiedError)': Ray keeps the error's text alone, whose last line names it."""
    from ray.exceptions import RayActorError

    from onnxprobe.runtime.ray_pool import _one_line

    failed = RayActorError(None, "The actor died because of an error raised in its creation task, ray::OnnxprobeWorker."
                                 "__init__() (pid=1, ip=10.0.0.1)\n  File \"x.py\", line 1\nonnxprobe.errors.ModelError: "
                                 "/data/m.onnx: no such file", True)
    assert str(_one_line(failed)) == "its set-up failed: onnxprobe.errors.ModelError: /data/m.onnx: no such file"
    assert str(_one_line(RayActorError(None, "The actor died unexpectedly", False))) == "the worker process died (RayActorError)"


def test_more_workers_than_a_clusters_cpus_are_refused(monkeypatch):
    """`--ray-address` to a cluster of 1 CPU with `--ray-workers 2`: each worker takes a CPU, so the second waited for
    ever, the command saying nothing. One line now, naming the cluster's CPUs; as many as it has are taken."""
    import ray

    from onnxprobe.runtime import ray_pool

    monkeypatch.setattr(ray_pool, "_resolved", lambda a: "127.0.0.1:6379")
    monkeypatch.setattr(ray_pool, "_reachable", lambda a, given=None: None)
    monkeypatch.setattr(ray, "init", lambda address=None, **kw: None)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 1.0})
    with pytest.raises(ray_pool.UsageError, match=r"the Ray cluster at 10\.0\.0\.1:6379 has 1 CPU, and each worker takes one: give at most 1"):
        ray_pool._init(ray, ray_pool.RayOptions(address="10.0.0.1:6379", workers=2), None)
    assert ray_pool._init(ray, ray_pool.RayOptions(address="10.0.0.1:6379", workers=1), None) == 1
    assert ray_pool._init(ray, ray_pool.RayOptions(address="10.0.0.1:6379"), None) == 1


def test_a_local_run_sweeps_the_folder_an_interrupted_one_left_and_takes_a_long_tmpdir(tmp_path, monkeypatch):
    """A signal landing while a local run's Ray session folder was removed (its processes still writing) left it, 45
    log files and an auth token, for good: a later run removes the folders of runs whose process has ended. A $TMPDIR
    of a long path was an internal error (Ray's session sockets past a Unix socket's 107 bytes): /tmp is taken."""
    import shutil
    import tempfile

    pid = 999_999
    while True:  # a process id no process has
        try:
            os.kill(pid, 0)
            pid -= 1
        except ProcessLookupError:
            break
        except OSError:
            pid -= 1
    ds = _folder(tmp_path / "ds", 2)
    short = Path(tempfile.mkdtemp(prefix="o", dir="/tmp"))  # (short enough for Ray's sockets below it)
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(short))
        left = short / f"onnxprobe-ray-{pid}-abcd"
        (left / "session_latest" / "logs").mkdir(parents=True)
        (left / "auth_token").write_text("secret")
        _run("layers", sample_path("cnn"), "--inputs-dir", ds, "--ray", "--ray-workers", 1)
        assert not left.exists() and not [p for p in short.iterdir() if p.name.startswith("onnxprobe-ray-")]
    finally:
        shutil.rmtree(short, ignore_errors=True)
    long = tmp_path / ("t" * 60)
    long.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long))
    _run("layers", sample_path("cnn"), "--inputs-dir", ds, "--ray", "--ray-workers", 1)
    assert not list(long.iterdir())
    _no_ray_left()
