"""Big weights left inside the model file reach onnxruntime from a private copy it maps (runtime.weight_copy), not from
a buffer it runs on beside its packed copy (BERT-base, 438 MB inside the .onnx, `layers --all`: 946 -> 519 MB, plain
inference 654 MB). Oracles: onnx.load of the same file, the model read whole (api.load), plain onnxruntime; what the
copy holds read back byte for byte. These models are small: LAZY_FILE and MIN_BYTES are 0 here."""

from __future__ import annotations

import errno
import os
import tempfile

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from onnxprobe import api
from onnxprobe.errors import ModelError
from onnxprobe.graph import io as io_mod
from onnxprobe.graph.io import load_model
from onnxprobe.runtime import model_file, weight_copy
from test_inline_weights_left import W1, X, _model, _save

FILESYSTEM = weight_copy.filesystem


@pytest.fixture(autouse=True)
def small(monkeypatch, tmp_path):
    monkeypatch.setattr(io_mod, "LAZY_FILE", 0)
    monkeypatch.setattr(weight_copy, "MIN_BYTES", 0)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))  # where the copies go: empty again after every build
    monkeypatch.setattr(weight_copy, "filesystem", lambda path: "ext4")  # wherever the test's tmp_path lies
    return tmp


def _left(m: onnx.ModelProto) -> list:
    return [(t.name, t) for t in m.graph.initializer if t.name in ("W1", "W2", "W3")]


def test_the_copy_holds_each_weight_at_a_page_boundary_and_goes_with_its_folder(tmp_path, small):
    p = _save(_model(), tmp_path / "m.onnx")
    made, places = weight_copy.copy_out(_left(load_model(p, lazy=True)))
    want = {t.name: numpy_helper.to_array(t) for t in onnx.load(p).graph.initializer}
    path = os.path.join(made.folder, weight_copy.LOCATION)
    assert os.stat(path).st_mode & 0o777 == 0o600 and os.stat(made.folder).st_mode & 0o777 == 0o700
    with open(path, "rb") as f:
        data = f.read()
    for name, (location, length, offset) in places.items():
        assert location == weight_copy.LOCATION and offset % 4096 == 0
        assert data[offset:offset + length] == want[name].tobytes(), name
    made.remove()
    assert not os.path.exists(made.folder) and not os.listdir(small)


def test_no_copy_in_memory_or_without_room_or_for_weights_not_in_the_model_file(tmp_path, monkeypatch, small):
    p = _save(_model(), tmp_path / "m.onnx")
    big = _left(load_model(p, lazy=True))
    monkeypatch.setattr(weight_copy, "filesystem", lambda path: "tmpfs")
    assert weight_copy.copy_out(big) is None
    monkeypatch.setattr(weight_copy, "filesystem", lambda path: "ext4")
    monkeypatch.setattr(weight_copy, "ROOM", 1 << 62)
    assert weight_copy.copy_out(big) is None
    monkeypatch.setattr(weight_copy, "ROOM", 0)
    monkeypatch.setattr(weight_copy, "MIN_BYTES", 1 << 40)
    assert weight_copy.copy_out(big) is None
    assert not os.listdir(small)


def test_weights_read_whole_are_written_into_the_copy(tmp_path, small):
    """A model read whole (api.load, the debugger): its weights written from the proto's bytes, each at a page
    boundary; typed fields (float_data) as raw bytes, as onnx lays them out."""
    from onnx import TensorProto

    m = _model(typed=True)  # W2 in float_data
    p = _save(m, tmp_path / "m.onnx")
    whole = api.load(p).proto
    made, places = weight_copy.copy_out(_left(whole))
    want = {t.name: numpy_helper.to_array(t) for t in onnx.load(p).graph.initializer}
    with open(os.path.join(made.folder, weight_copy.LOCATION), "rb") as f:
        data = f.read()
    for name, (_, length, offset) in places.items():
        assert offset % 4096 == 0 and data[offset:offset + length] == want[name].tobytes(), name
    made.remove()
    bad = TensorProto(name="W1", data_type=TensorProto.FLOAT, dims=[64, 96], raw_data=b"\0" * 12)  # 12 bytes, 6144 floats
    with pytest.raises(ModelError, match="W1"):
        weight_copy.copy_out([("W1", bad)])
    assert not os.listdir(small)


def test_filesystem_tells_memory_from_disk():
    if not os.path.exists("/proc/self/mountinfo"):
        pytest.skip("no /proc/self/mountinfo: the type cannot be told (no copy is then refused for it)")
    assert FILESYSTEM("/proc/self") == "proc"
    if os.path.isdir("/dev/shm"):
        assert FILESYSTEM("/dev/shm") in weight_copy.MEMORY_FILESYSTEMS
    assert FILESYSTEM("/no/such/path") is None


@pytest.mark.parametrize("how", ["read and write", "no room"])
def test_a_copy_the_kernel_cannot_make(tmp_path, monkeypatch, small, how):
    """Where copy_file_range is refused (another filesystem pair, an old kernel) the bytes are read and written; where
    the folder's filesystem fills up, no copy (the weights then go from memory) and no folder left."""
    p = _save(_model(), tmp_path / "m.onnx")
    big = _left(load_model(p, lazy=True))
    code = errno.EXDEV if how == "read and write" else errno.ENOSPC

    def refuse(*a, **k):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "copy_file_range", refuse, raising=False)
    got = weight_copy.copy_out(big)
    if how == "no room":
        assert got is None and not os.listdir(small)
        return
    made, places = got
    with open(os.path.join(made.folder, weight_copy.LOCATION), "rb") as f:
        data = f.read()
    _, length, offset = places["W1"]
    assert data[offset:offset + length] == W1.tobytes()
    made.remove()


def test_a_model_file_changed_since_it_was_read_is_refused_in_one_line_and_leaves_no_copy(tmp_path, small):
    p = _save(_model(), tmp_path / "m.onnx")
    big = _left(load_model(p, lazy=True))
    st = os.stat(p)
    with open(p, "r+b") as f:
        f.seek(st.st_size // 2)
        f.write(b"\1\2\3\4")
    with pytest.raises(ModelError, match="m.onnx: the file changed while onnxprobe ran") as e:
        weight_copy.copy_out(big)
    assert "\n" not in str(e.value) and not os.listdir(small)


def test_layers_and_diff_run_on_the_copy_as_on_the_models_read_whole(tmp_path, monkeypatch, small):
    made = []
    real = weight_copy.copy_out
    monkeypatch.setattr(weight_copy, "copy_out", lambda big: (lambda got: made.append(got) or got)(real(big)))
    p = _save(_model(), tmp_path / "a.onnx")
    q = _save(_model(w1=W1 * np.float32(1.001)), tmp_path / "b.onnx")
    sel, spec, cfg = api.Selection(all=True), api.InputSpec(arrays={"x": X}), api.RunConfig(cache=False)
    lazy = api.layers(str(p), sel, cfg, spec)
    assert made and made[-1] is not None and not os.listdir(small)  # the copy used, and gone once the session was built
    monkeypatch.setattr(weight_copy, "MIN_BYTES", 1 << 60)
    eager = api.layers(api.load(p), sel, cfg, spec)  # from memory, no copy: the oracle
    monkeypatch.setattr(weight_copy, "MIN_BYTES", 0)
    for name, st in eager.stats.items():
        assert lazy.stats[name] == st, name
    copied = api.layers(api.load(p), sel, cfg, spec, save=True)  # read whole, and a session kept: the copy too
    assert made[-1] is not None and not os.listdir(small)
    for name, st in eager.stats.items():
        assert copied.stats[name] == st, name
    del made[:]
    d_lazy = api.diff(str(p), str(q), selection=sel, config=cfg, inputs=spec)
    assert made and all(m is not None for m in made) and not os.listdir(small)
    del made[:]
    d_eager = api.diff(api.load(p), api.load(q), selection=sel, config=cfg, inputs=spec)
    assert made and all(m is not None for m in made) and not os.listdir(small)  # read whole: written into the copy
    assert [(r.pair.a.name, r.metrics) for r in d_lazy.results] == [(r.pair.a.name, r.metrics) for r in d_eager.results]
    assert any(r.metrics and r.metrics.max_abs for r in d_lazy.results)


def test_served_runs_read_a_copy_laid_out_as_the_entrys_buffer(tmp_path, monkeypatch, small):
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    copies = []
    real = weight_copy.copy_moves
    monkeypatch.setattr(weight_copy, "copy_moves", lambda *a: (lambda got: copies.append(got) or got)(real(*a)))
    monkeypatch.setattr(model_file, "RACY_NS", 0)  # files written just now: their status trusted all the same
    p = _save(_model(), tmp_path / "a.onnx")
    q = _save(_model(w1=W1 * np.float32(1.01)), tmp_path / "b.onnx")
    run = lambda: api.layers(str(p), api.Selection(all=True), api.RunConfig(device="cpu"), api.InputSpec(seed=4))  # noqa: E731
    first, served = run(), run()
    assert type(served.plan).__name__ == "CachedPlan" and copies and copies[-1] is not None and not os.listdir(small)
    for name, st in first.stats.items():
        assert served.stats[name] == st, name
    diff = lambda: api.diff(str(p), str(q), selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))  # noqa: E731
    d1, d2 = diff(), diff()
    assert type(d2.a).__name__ == "ServedSide" and len(copies) >= 2 and copies[-1] is not None and not os.listdir(small)
    assert [(r.pair.a.name, r.metrics, r.passed) for r in d2.results] == [(r.pair.a.name, r.metrics, r.passed) for r in d1.results]
    # the file changed since the entry (same size, other bytes, the time put back): no copy of the recorded layout
    st = os.stat(p)
    onnx.save(_model(w1=-W1), p)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    again = run()
    assert copies[-1] is None and again.stats["h"] != first.stats["h"]


def test_no_usable_temporary_folder_is_no_copy(tmp_path, monkeypatch, small):
    """tempfile finds no folder it can write (a read-only container): no copy, and the command runs as before (QA:
    'No usable temporary directory found', said as onnxruntime's error, exit 1)."""
    def none():
        raise FileNotFoundError(2, "No usable temporary directory found")

    monkeypatch.setattr(tempfile, "gettempdir", none)
    p = _save(_model(), tmp_path / "m.onnx")
    assert weight_copy.copy_out(_left(load_model(p, lazy=True))) is None
    res = api.layers(str(p), api.Selection(all=True), api.RunConfig(cache=False), api.InputSpec(arrays={"x": X}))
    eager = api.layers(api.load(p), api.Selection(all=True), api.RunConfig(cache=False), api.InputSpec(arrays={"x": X}))
    assert res.stats == eager.stats


SIGNALLED = """
import os, sys, time
import onnxruntime as ort
from onnxprobe.graph import io as io_mod
from onnxprobe.runtime import weight_copy
io_mod.LAZY_FILE, weight_copy.MIN_BYTES, weight_copy.filesystem = 0, 0, lambda p: "ext4"
real, mark = ort.InferenceSession.__init__, sys.argv[2]

def slow(self, *a, **k):  # the copy made, the session building: the parent signals now
    open(mark, "w").close()
    time.sleep(60)
    return real(self, *a, **k)

ort.InferenceSession.__init__ = slow
sys.argv = ["onnxprobe", "layers", sys.argv[1], "--no-cache"]
from onnxprobe.cli.main import run
run()
"""


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_while_the_session_builds_leaves_no_copy(tmp_path, sig):
    """Ctrl-C or SIGTERM while onnxruntime builds the session from the copy: the command ends as it does on such a
    signal (130, 143), and the copy goes with it (QA: left behind, a file as big as the weights, 29 times of 30)."""
    import signal
    import subprocess
    import sys
    import time

    p = _save(_model(), tmp_path / "m.onnx")
    tmp, mark = tmp_path / "tmp", tmp_path / "building"
    env = {**os.environ, "TMPDIR": str(tmp)}
    # SIGINT as a terminal delivers it, even where this test runs in the background (which ignores it, inherited)
    proc = subprocess.Popen([sys.executable, "-c", SIGNALLED, str(p), str(mark)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mark.exists(), proc.communicate(timeout=60)[1][-2000:]
        assert [d.name for d in tmp.iterdir() if d.name.startswith("onnxprobe-weights-")]  # the copy is there now
        proc.send_signal(getattr(signal, sig))
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + getattr(signal, sig), err[-2000:]
    assert "Traceback" not in err
    assert not [d.name for d in tmp.iterdir() if d.name.startswith("onnxprobe-weights-")]


def test_the_copy_of_a_killed_run_is_swept_by_the_next(tmp_path):
    """SIGKILL (the OOM killer) while the session builds leaves the copy: nothing runs then. The next run that
    makes a copy removes those of processes that no longer run, and leaves a live process's and other folders."""
    import subprocess
    import sys
    import time

    p = _save(_model(), tmp_path / "m.onnx")
    tmp, mark = tmp_path / "tmp", tmp_path / "building"
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-c", SIGNALLED, str(p), str(mark)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mark.exists(), proc.communicate(timeout=60)[1][-2000:]
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    copies = lambda: sorted(d.name for d in tmp.iterdir() if d.name.startswith("onnxprobe-weights-"))  # noqa: E731
    (left,) = copies()  # the killed run's
    live, other = tmp / f"onnxprobe-weights-{os.getpid()}-live", tmp / "onnxprobe-weights-notapid"
    live.mkdir()
    other.mkdir()
    again = SIGNALLED.replace("ort.InferenceSession.__init__ = slow", "")  # the same copy made, no wait
    r = subprocess.run([sys.executable, "-c", again, str(p), str(mark)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert left not in copies() and set(copies()) == {live.name, other.name}, copies()


def test_an_onnxruntime_that_reads_no_folder_gets_no_copy(tmp_path, monkeypatch, small):
    """onnxruntime before 1.21 ignores the folder it is told and looks for external data in the working directory: no
    copy is made for it, first run or served (the served run failed, and the normal path ran every time)."""
    from onnxprobe.runtime import ort_options

    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    monkeypatch.setattr(model_file, "RACY_NS", 0)
    monkeypatch.setattr(ort_options, "READS_FOLDERS", (99, 0))  # as an onnxruntime before 1.21 reads
    calls = []
    for name in ("copy_out", "copy_moves"):
        real = getattr(weight_copy, name)
        monkeypatch.setattr(weight_copy, name, lambda *a, real=real: calls.append(1) or real(*a))
    p = _save(_model(), tmp_path / "a.onnx")
    run = lambda: api.layers(str(p), api.Selection(all=True), api.RunConfig(device="cpu"), api.InputSpec(seed=4))  # noqa: E731
    first, served = run(), run()
    assert type(served.plan).__name__ == "CachedPlan" and not calls
    for name, st in first.stats.items():
        assert served.stats[name] == st, name
