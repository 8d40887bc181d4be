"""The plan cache's direct mode (runtime.direct, api.lean): the second `layers` of the same model file with the same
request runs the cached probed copy without importing onnx, and prints what the first run printed; anything
unusual (NaN statistics, input files, another runtime, an edited model, a damaged index entry) goes the normal
way, with the right numbers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from conftest import SAMPLE_NAMES, make_model, nan_model, sample_path, sha256
from onnxprobe import api
from onnxprobe.runtime import model_file, plan_cache

ROOT = Path(__file__).resolve().parents[1]


def _cli(cache: Path, *args: str, importtime: bool = False) -> tuple[str, str, bool]:
    """(stdout, stderr, whether onnx was imported) of `onnxprobe ARGS` in a process of its own."""
    env = {**os.environ, "ONNXPROBE_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    env.pop("ONNXPROBE_NO_CACHE", None)
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "onnxprobe", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = p.stderr.splitlines(keepends=True)
    imported = any(re.fullmatch(r"import time:.*\|\s+onnx\s*", ln.rstrip("\n")) for ln in lines)
    err = "".join(ln for ln in lines if not ln.startswith("import time:"))
    return p.stdout, err, imported


def _untimed(table: str) -> str:
    """The table without its footer's run and session times."""
    return "".join(ln for ln in table.splitlines(keepends=True) if " · run " not in ln)


def _json(path: Path) -> dict:
    d = json.loads(path.read_text())
    d.pop("timing")
    return d


def _twice(tmp_path: Path, *args: str) -> tuple[tuple, tuple]:
    """The first (miss) and the second run of one command, each with its table, notes and JSON report."""
    cache = tmp_path / "cache"
    runs = []
    for k in (1, 2):
        out, err, imported = _cli(cache, "layers", *args, "--json", str(tmp_path / "r.json"), importtime=k == 2)
        runs.append((_untimed(out), err, _json(tmp_path / "r.json"), imported))
    return runs[0], runs[1]


def _save_sqrt_of_shifted(path) -> None:
    """Sqrt(x - 0.5) over 300,000 elements: NaN for the seed's draws below 0.5, in tensors too big to be
    summarised on the host."""
    onnx.save(make_model([helper.make_node("Sub", ["x", "h"], ["d"], name="sub"),
                          helper.make_node("Sqrt", ["d"], ["y"], name="sqrt")],
                         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [300000])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [300000])],
                         [numpy_helper.from_array(np.array(0.5, np.float32), "h")]), str(path))


@pytest.mark.parametrize("sel", [[], ["--all"]], ids=["default", "all"])
@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_second_run_is_lean_and_identical(tmp_path, name, sel):
    first, second = _twice(tmp_path, str(sample_path(name)), *sel)
    assert second[:3] == first[:3]
    assert first[2]["tensors"]
    # a model with its weights in an external data file too: its files recorded with it (runtime.direct_files)
    assert second[3] is False


@pytest.mark.parametrize("args", [["dynamic_batch", "--all", "--shape", "x=5x3x8x8"], ["mlp", "--all", "--seed", "7"],
                                  ["transformer_block", "--opt-level", "all", "--device", "cpu"]],
                         ids=["shape", "seed", "opt-level"])
def test_request_options_served(tmp_path, args):
    name, *rest = args
    first, second = _twice(tmp_path, str(sample_path(name)), *rest)
    assert second[:3] == first[:3] and not second[3]
    if "--shape" in rest:
        assert first[2]["tensors"][0]["shape"][0] == 5


def test_other_requests_are_other_entries(tmp_path):
    """Another seed after a cached run: not the cached numbers (the request is part of the key)."""
    cache = tmp_path / "cache"
    m = str(sample_path("mlp"))
    _cli(cache, "layers", m, "--all", "--json", str(tmp_path / "a.json"))
    _cli(cache, "layers", m, "--all", "--seed", "9", "--json", str(tmp_path / "b.json"))
    _cli(cache, "layers", m, "--all", "--seed", "9", "--no-cache", "--json", str(tmp_path / "c.json"))
    assert _json(tmp_path / "b.json") == _json(tmp_path / "c.json") != _json(tmp_path / "a.json")


def test_nan_statistics_fall_back(tmp_path):
    """Statistics that hold NaN or Inf need the masked rerun, which needs the graph: the normal path, each time."""
    path = tmp_path / "nan.onnx"
    onnx.save(nan_model(), str(path))
    first, second = _twice(tmp_path, str(path), "--all", "--input", "x=[-1.0, 0.0, 1.0, 2.0]")
    assert second[:3] == first[:3] and second[3]  # --input: not served either
    npy = tmp_path / "x.npy"
    np.save(npy, np.array([-1.0, 0.0, 1.0, 2.0], np.float32))
    first, second = _twice(tmp_path, str(path), "--all", "--input", f"x={npy}")
    assert second[:3] == first[:3] and second[3]
    tensors = {t["name"]: t for t in second[2]["tensors"]}
    assert tensors["logx"]["nan"] == 1 and tensors["logx"]["inf"] == 1
    # seeded random inputs: Sqrt(x - 0.5) of x in [0, 1) holds NaN, in tensors too big to be summarised on the host
    # (whose statistics are exact whatever they hold, and are served)
    sqrt = tmp_path / "sqrt.onnx"
    _save_sqrt_of_shifted(sqrt)
    first, second = _twice(tmp_path, str(sqrt), "--all")
    assert second[:3] == first[:3] and second[3]
    x = np.random.default_rng(0).random(300000)  # (numpy's own draw: the seed's values, independently of onnxprobe)
    assert {t["name"]: t["nan"] for t in first[2]["tensors"]}["y"] == int(np.sum(x.astype(np.float32) < 0.5))


@pytest.mark.parametrize("variant", [["--runtime", "reference"], ["--no-cache"]], ids=["reference", "no-cache"])
def test_variants_fall_back(tmp_path, variant):
    first, second = _twice(tmp_path, str(sample_path("cnn")), "--all", *variant)
    assert second[:3] == first[:3] and second[3]


def _weighted(path: Path, seed: int = 1) -> np.ndarray:
    """y = Relu(MatMul(x, w)) with w of 64x80 (a stub in the probed copy: its bytes read from the file) and a
    Constant of 5000 elements added (a Constant's stub)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((64, 80)).astype(np.float32)
    c = rng.standard_normal((5000,)).astype(np.float32)
    m = make_model(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         helper.make_node("Relu", ["h"], ["r"], name="relu"),
         helper.make_node("Constant", [], ["c"], name="const", value=numpy_helper.from_array(c, "cval")),
         helper.make_node("ReduceSum", ["c"], ["cs"], name="csum", keepdims=0),
         helper.make_node("Add", ["r", "cs"], ["y"], name="add")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 80])],
        [numpy_helper.from_array(w, "w")])
    onnx.save(m, str(path))
    return w


def _expected(path: Path, x: np.ndarray) -> dict[str, tuple[float, float, float]]:
    """min, max, mean of every node output, from onnx.reference on the model file as it is now."""
    m = onnx.load(str(path))
    names = [o for n in m.graph.node for o in n.output]
    got = ReferenceEvaluator(m).run(names, {"x": x})
    return {n: (float(v.min()), float(v.max()), float(np.mean(v, dtype=np.float64))) for n, v in zip(names, got)}


def _layers(path: Path):
    return api.layers(str(path), api.Selection(all=True), api.RunConfig(device="cpu"), api.InputSpec(seed=4))


def _stats(res) -> dict[str, tuple[float, float, float]]:
    return {r.name: (s.min, s.max, s.mean) for r, s in res.rows() if s is not None and r.kind == "node"}


def _check(res, expected) -> None:
    got = _stats(res)
    assert {"h", "r", "y"} <= set(got)  # (c and cs, computed from weights alone, are not selected: y reads them)
    for n, (lo, hi, mean) in expected.items():
        if n not in got:
            continue
        assert got[n][0] == pytest.approx(lo, rel=1e-5, abs=1e-5) and got[n][1] == pytest.approx(hi, rel=1e-5, abs=1e-5)
        assert got[n][2] == pytest.approx(mean, rel=1e-4, abs=1e-5)


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    return tmp_path / "cache"


def test_served_from_the_files_weights(tmp_path, cache):
    path = tmp_path / "w.onnx"
    _weighted(path)
    first = _layers(path)
    x = first.feed["x"]
    second = _layers(path)
    assert type(second.plan).__name__ == "CachedPlan"  # served: stubs pointed into the model file
    assert _stats(second) == _stats(first)
    _check(second, _expected(path, x))
    assert np.array_equal(second.feed["x"], x)
    # what a served result holds loads on demand: the model, the probed copy with the weights back
    assert {o.name for o in second.plan.base.graph.output} == {"y"}
    assert numpy_helper.to_array(next(t for t in second.plan.model.graph.initializer if t.name == "w")).shape == (64, 80)


@pytest.mark.parametrize("after", ["re-exported", "deleted", "touched"])
def test_a_served_result_reads_the_model_it_measured_or_says_it_cannot(tmp_path, cache, after):
    """A served result loads its model when something asks (histograms, the page, an overlay): re-exported
    after the call, the histograms were the new model's, beside statistics of the old one; deleted, 'no such
    file'. Another file there now is refused in one line; the same bytes (a touch) are read as they are."""
    path = tmp_path / "w.onnx"
    _weighted(path)
    _layers(path)
    res = _layers(path)
    assert type(res.plan).__name__ == "CachedPlan"
    before = res.stats["y"]
    if after == "re-exported":
        other = tmp_path / "other.onnx"
        _weighted(other, seed=7)
        os.replace(other, path)
    elif after == "deleted":
        path.unlink()
    else:
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 5 * 10**9))
    if after == "touched":
        h = api.layers_histograms(res, ["y"], bins=4)["y"]["values"]
        assert h["edges"][0] == pytest.approx(before.min) and h["edges"][-1] == pytest.approx(before.max)
        return
    with pytest.raises(api.ModelError, match="the model file changed since this run, which was served from the plan cache"):
        api.layers_histograms(res, ["y"], bins=4)


@pytest.mark.parametrize("trusting", [False, True], ids=["hashed", "stat-trusted"])
@pytest.mark.parametrize("which", ["w", "cval", "op"])
def test_edited_model_is_not_served_stale(tmp_path, cache, monkeypatch, which, trusting):
    """One weight byte changed after the index entry was written, with the same size and modification time: the
    statistics are the edited model's (the entry's digest, or, where the file's status is trusted instead of a
    hash (``stat-trusted``: as for a file last changed long before its entry), its change time, which the edit
    and os.utime moved)."""
    if trusting:  # every entry as if recorded long after the file's last change
        monkeypatch.setattr(model_file, "RACY_NS", -10**18)
    path = tmp_path / "w.onnx"
    _weighted(path)
    x = _layers(path).feed["x"]
    assert type(_layers(path).plan).__name__ == "CachedPlan"
    original = _expected(path, x)
    st = path.stat()
    data = bytearray(path.read_bytes())
    if which == "op":  # the graph itself (what the entry's probed copy holds, never read from the file again)
        assert data.count(b"Relu") == 1
        data = bytearray(bytes(data).replace(b"Relu", b"Tanh"))
    else:
        t = onnx.load(str(path))
        tensor = (t.graph.initializer[0] if which == "w" else t.graph.node[2].attribute[0].t)
        at = bytes(data).index(tensor.raw_data) + 4 * 7 + 3  # the high byte of element 7: a change that shows
        data[at] ^= 0x40
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size
    expected = _expected(path, x)
    res = _layers(path)
    _check(res, expected)
    assert expected != original  # (the edit shows in the numbers)
    again = _layers(path)  # now served, from the edited file's own entry
    assert type(again.plan).__name__ == "CachedPlan"
    _check(again, expected)


@pytest.mark.parametrize("damage", ["truncate-json", "edit-json", "truncate-onnx", "edit-onnx"])
def test_damaged_index_entry_is_a_miss(tmp_path, cache, damage):
    path = tmp_path / "w.onnx"
    _weighted(path)
    digest = sha256(path)
    first = _layers(path)
    x = first.feed["x"]
    from onnxprobe.api.lean import _ticket  # noqa: PLC2701 - the index key of this request, to damage its entry

    t = _ticket(str(path), api.Selection(all=True), api.RunConfig(device="cpu"), api.InputSpec(seed=4), False, None,
                None, "ort", None)
    kind = damage.split("-")[1]
    f = cache / plan_cache.entry_name(t.key, kind)
    data = f.read_bytes()
    if damage.startswith("truncate"):
        f.write_bytes(data[: len(data) // 2])
    elif kind == "json":
        f.write_bytes(data.replace(b'"seed": 4', b'"seed": 5'))
    else:
        b = bytearray(data)
        b[len(b) // 2] ^= 0xFF
        f.write_bytes(bytes(b))
    res = _layers(path)
    assert type(res.plan).__name__ != "CachedPlan"
    assert _stats(res) == _stats(first)
    _check(res, _expected(path, x))
    assert sha256(path) == digest  # the user's model file is never written


class _Recording:
    """A file object whose reads are recorded: the size each read asks for (a whole-file read: infinity)."""

    def __init__(self, f, sizes: list):
        self._f, self._sizes = f, sizes

    def read(self, n=-1):
        self._sizes.append(float("inf") if n is None or n < 0 else n)
        return self._f.read(n)

    def readinto(self, b):
        self._sizes.append(memoryview(b).nbytes)
        return self._f.readinto(b)

    def readall(self):
        self._sizes.append(float("inf"))
        return self._f.readall()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()

    def __getattr__(self, name):
        return getattr(self._f, name)


def _record_reads(monkeypatch, path: Path) -> list:
    """The sizes of the reads the direct mode (api.lean, runtime.direct) makes of the model file ``path``."""
    import builtins

    from onnxprobe.api import lean
    from onnxprobe.runtime import direct

    sizes: list = []
    real = builtins.open

    def recording(file, *args, **kwargs):
        f = real(file, *args, **kwargs)
        return _Recording(f, sizes) if isinstance(file, (str, os.PathLike)) and os.path.realpath(file) == os.path.realpath(path) else f

    monkeypatch.setattr(direct, "open", recording, raising=False)
    monkeypatch.setattr(lean, "open", recording, raising=False)
    opened = direct.open_regular  # how runtime.direct opens the model file (without waiting on a FIFO)

    def recording_regular(file):
        f = opened(file)
        return _Recording(f, sizes) if os.path.realpath(file) == os.path.realpath(path) else f

    monkeypatch.setattr(direct, "open_regular", recording_regular)
    return sizes


def test_model_file_is_read_in_chunks(tmp_path, cache, monkeypatch):
    """The model file is never held whole: the index lookup reads none of it, writing the entry and serving it read
    it a chunk at a time (here 4 KiB, for weights of 20 KB each), and the numbers are the model's."""
    from onnxprobe.api import lean

    path = tmp_path / "w.onnx"
    _weighted(path)
    monkeypatch.setattr(model_file, "CHUNK", 4096)
    sizes = _record_reads(monkeypatch, path)
    remember = lean._remember
    monkeypatch.setattr(lean, "_remember", lambda *a: None)
    x = _layers(path).feed["x"]
    assert sizes == []  # a miss: no read of the model (a stat, and the index's own small file)
    monkeypatch.setattr(lean, "_remember", remember)
    _layers(path)  # a miss again, its entry written
    assert sizes and max(sizes) <= 4096
    sizes.clear()
    res = _layers(path)
    assert type(res.plan).__name__ == "CachedPlan"
    assert sizes and max(sizes) <= 4096
    assert sum(sizes) >= path.stat().st_size  # every byte hashed
    _check(res, _expected(path, x))


def test_moved_or_copied_model_is_its_own_entry(tmp_path, cache):
    """The index is keyed by the model's path (as given and resolved): a copy elsewhere is a miss, then served from
    its own entry; the original's entry still serves."""
    import shutil

    path = tmp_path / "w.onnx"
    _weighted(path)
    x = _layers(path).feed["x"]
    assert type(_layers(path).plan).__name__ == "CachedPlan"
    copy = tmp_path / "sub" / "w.onnx"
    copy.parent.mkdir()
    shutil.copy2(path, copy)
    first = _layers(copy)
    assert type(first.plan).__name__ != "CachedPlan"
    again = _layers(copy)
    assert type(again.plan).__name__ == "CachedPlan"
    _check(again, _expected(copy, x))
    assert type(_layers(path).plan).__name__ == "CachedPlan"


def _first_run_then(monkeypatch, path: Path, change):
    """``_layers(path)`` (the normal path's run, which writes the index entry) with ``change()`` made to the model
    file right after the run and before the entry is written; its feed."""
    from onnxprobe.api import core

    normal = core.layers

    def changing(*args, **kwargs):
        res = normal(*args, **kwargs)
        change()
        return res

    monkeypatch.setattr(core, "layers", changing)
    try:
        return _layers(path).feed
    finally:
        monkeypatch.setattr(core, "layers", normal)


def test_model_changed_during_the_run_is_not_indexed(tmp_path, cache, monkeypatch):
    """The file's modification time changed between the lookup and the end of the normal run (an editor saving it
    meanwhile): no index entry, whatever its bytes are now."""
    path = tmp_path / "w.onnx"
    _weighted(path)

    def touch():
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))

    _first_run_then(monkeypatch, path, touch)
    assert type(_layers(path).plan).__name__ != "CachedPlan"
    assert type(_layers(path).plan).__name__ == "CachedPlan"


def test_graph_edited_during_the_first_run_with_its_mtime_restored_is_not_served_stale(tmp_path, cache, monkeypatch):
    """An op type changed (same length, so the same size) while the first run ran, and the modification time put
    back (os.utime, cp -p, rsync -t): the entry must not pair the run's graph with the edited file's digest (its
    change time moved: no entry)."""
    path = tmp_path / "w.onnx"
    _weighted(path)

    def edit():
        st = path.stat()
        data = path.read_bytes()
        assert data.count(b"Relu") == 1
        path.write_bytes(data.replace(b"Relu", b"Tanh"))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

    x = _first_run_then(monkeypatch, path, edit)["x"]
    expected = _expected(path, x)  # Tanh's numbers
    _check(_layers(path), expected)
    _check(_layers(path), expected)


def test_masked_rerun_is_not_indexed(tmp_path, cache, monkeypatch):
    """A run whose statistics needed the masked rerun (NaN here) gets no index entry: a later run would build and
    run the lean session only to throw it away and run the normal path again."""
    from onnxprobe.api import lean
    from onnxprobe.runtime import direct

    sqrt = tmp_path / "sqrt.onnx"
    _save_sqrt_of_shifted(sqrt)
    tried = []
    real = direct._run
    monkeypatch.setattr(direct, "_run", lambda *a, **k: tried.append(1) or real(*a, **k))
    args = (str(sqrt), api.Selection(all=True), api.RunConfig(device="cpu"), api.InputSpec(seed=0))
    first = api.layers(*args)
    t = lean._ticket(*args, False, None, None, "ort", None)
    assert plan_cache.read_entry(t.key) is None
    second = api.layers(*args)
    assert tried == []  # no lean session was run
    x = np.random.default_rng(0).random(300000)
    assert first.stats["y"].nan == second.stats["y"].nan == int(np.sum(x.astype(np.float32) < 0.5))


def test_lean_and_normal_runs_share_one_run_core(tmp_path, cache, monkeypatch):
    """A served run and a normal one go through one IOBinding run (runtime.ort_options.run_with_binding, onnx-free):
    nothing logged below fatal, the CPU arena's blocks given back at the end."""
    from onnxprobe.runtime import ort_options

    seen = []
    real = ort_options.run_with_binding

    def recording(ort, sess, binding, **kw):
        seen.append(kw)
        return real(ort, sess, binding, **kw)

    monkeypatch.setattr(ort_options, "run_with_binding", recording)
    path = tmp_path / "w.onnx"
    _weighted(path)
    first = _layers(path)
    assert seen and all(kw["shrink"] for kw in seen)
    seen.clear()
    second = _layers(path)
    assert type(second.plan).__name__ == "CachedPlan" and len(seen) == 1 and seen[0]["shrink"]
    assert _stats(second) == _stats(first)
    options = ort_options.run_options(ort_options.ort_module(), shrink=True)
    assert options.log_severity_level == 4
    assert options.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"


def test_api_layers_has_core_layers_signature():
    """api.layers (api.lean.layers) takes what core.layers takes, by the same names, kinds, defaults and hints (no
    ``**more``: an editor, help() and a type checker show every parameter)."""
    import inspect

    from onnxprobe.api import core, lean

    def described(fn):
        return [(p.name, p.kind, p.default, str(p.annotation).strip("'\"")) for p in inspect.signature(fn).parameters.values()]

    assert described(lean.layers) == described(core.layers)
    assert str(inspect.signature(lean.layers).return_annotation) == str(inspect.signature(core.layers).return_annotation)


def test_extras_is_part_of_the_request(tmp_path, cache):
    """extras=True given is the default's request (served from its entry); extras=False after a cached extras=True
    run: not served from that run's entry (extras is part of the key), then served from its own, as the normal
    run gave it."""
    path = tmp_path / "w.onnx"
    _weighted(path)
    args = (str(path), api.Selection(all=True), api.RunConfig(device="cpu"), api.InputSpec(seed=4))
    full = api.layers(*args)
    assert type(api.layers(*args, extras=True).plan).__name__ == "CachedPlan"  # the default, said: the same request
    light = api.layers(*args, extras=False)
    assert type(light.plan).__name__ != "CachedPlan"
    again = api.layers(*args, extras=False)
    assert type(again.plan).__name__ == "CachedPlan"
    assert {n: (s.abs_mean, s.zero_fraction) for n, s in again.stats.items() if s is not None} \
        == {n: (s.abs_mean, s.zero_fraction) for n, s in light.stats.items() if s is not None}
    assert full.stats.keys() == again.stats.keys()


def test_a_fifo_swapped_in_is_refused_without_waiting_for_a_writer(tmp_path):
    """The served run and the entry writer open the model file after a stat: a FIFO put there since must not
    block the run waiting for a writer (a test suite hung there)."""
    import os


    fifo = tmp_path / "m.onnx"
    os.mkfifo(fifo)
    with pytest.raises(OSError):
        model_file.open_regular(str(fifo))
    regular = tmp_path / "r.onnx"
    regular.write_bytes(b"abc")
    with model_file.open_regular(str(regular)) as f:
        assert f.read() == b"abc"


def test_another_onnxruntime_or_numpy_is_another_entry(tmp_path, cache, monkeypatch):
    """The first run's notes can depend on onnxruntime (an IR version it had to lower) and its inputs on numpy's
    generator: an entry written under other versions is not served."""
    import onnxruntime

    path = tmp_path / "w.onnx"
    _weighted(path)
    _layers(path)
    assert type(_layers(path).plan).__name__ == "CachedPlan"
    monkeypatch.setattr(onnxruntime, "__version__", "0.0.1")
    assert type(_layers(path).plan).__name__ != "CachedPlan"  # a miss, its own entry written
    assert type(_layers(path).plan).__name__ == "CachedPlan"
    monkeypatch.setattr(np, "__version__", "0.0.2")
    assert type(_layers(path).plan).__name__ != "CachedPlan"


def test_weights_stored_as_float_data_are_served(tmp_path, cache):
    """Weights written as packed float_data (Paddle2ONNX's exports: PP-OCR's classifier) are the tensor's own
    bytes in the file too: served lean (a Constant's value and an initializer, both big enough to be stubs), with
    the model's numbers."""
    rng = np.random.default_rng(3)
    w, b = rng.standard_normal((64, 128)).astype(np.float32), rng.standard_normal((512, 128)).astype(np.float32)
    path = tmp_path / "fd.onnx"
    onnx.save(make_model([helper.make_node("Constant", [], ["w"], value=helper.make_tensor("wv", TensorProto.FLOAT, w.shape, w.ravel().tolist())),
                          helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
                          helper.make_node("Add", ["y", "b"], ["yb"], name="add"),
                          helper.make_node("Relu", ["yb"], ["z"], name="relu")],
                         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [512, 64])],
                         [helper.make_tensor_value_info("z", TensorProto.FLOAT, [512, 128])],
                         [helper.make_tensor("b", TensorProto.FLOAT, b.shape, b.ravel().tolist())]), str(path))
    m = onnx.load(str(path))
    assert not m.graph.node[0].attribute[0].t.raw_data and not m.graph.initializer[0].raw_data  # really float_data
    first = _layers(path)
    second = _layers(path)
    assert type(second.plan).__name__ == "CachedPlan"
    x = first.feed["x"].astype(np.float64)
    want = np.maximum(x @ w.astype(np.float64) + b, 0)
    got = second.stats["z"]
    assert got.min == pytest.approx(want.min(), abs=1e-6) and got.max == pytest.approx(want.max(), rel=1e-5)
    assert got.mean == pytest.approx(want.mean(), rel=1e-5) and got.std == pytest.approx(want.std(), rel=1e-4)
    assert {r.name: s.mean for r, s in first.rows()} == {r.name: s.mean for r, s in second.rows()}


def test_a_served_run_reads_the_malloc_setting_as_the_normal_path_does(tmp_path, cache, monkeypatch):
    """The normal path fixes malloc's mmap threshold (memory.return_freed_memory, $ONNXPROBE_MMAP_THRESHOLD) before
    its session; a served run did not, so a bad setting passed without a word once the request was cached."""
    import subprocess
    import sys

    from conftest import ROOT

    path = tmp_path / "w.onnx"
    _weighted(path)
    env = {**os.environ, "ONNXPROBE_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    for _ in range(2):
        assert subprocess.run([sys.executable, "-m", "onnxprobe", "layers", str(path)], capture_output=True,
                              cwd=ROOT, env=env).returncode == 0
    r = subprocess.run([sys.executable, "-m", "onnxprobe", "layers", str(path)], capture_output=True, text=True,
                       cwd=ROOT, env={**env, "ONNXPROBE_MMAP_THRESHOLD": "abc"})
    assert r.returncode == 2 and "ONNXPROBE_MMAP_THRESHOLD" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_an_unchanged_file_is_not_hashed_again(tmp_path, cache, monkeypatch):
    """A file whose status is the one its entry recorded, and last changed well before it (``model_file.RACY_NS``), is
    served without hashing it (seconds for a model of gigabytes); one changed just before its entry was recorded
    is hashed every time (git's racy files)."""

    path = tmp_path / "w.onnx"
    _weighted(path)
    x = _layers(path).feed["x"]
    hashed, real = [], model_file.hasher
    monkeypatch.setattr(model_file, "hasher", lambda: hashed.append(1) or real())
    res = _layers(path)  # written a moment ago: racy, hashed
    assert type(res.plan).__name__ == "CachedPlan" and hashed
    hashed.clear()
    monkeypatch.setattr(model_file, "RACY_NS", -10**18)
    res = _layers(path)
    assert type(res.plan).__name__ == "CachedPlan" and not hashed
    _check(res, _expected(path, x))


@pytest.mark.parametrize("kind", ["vfat", "exfat", None])
def test_a_file_system_whose_ctime_can_be_set_back_is_always_hashed(tmp_path, cache, monkeypatch, kind):
    """FAT's change time is its modification time, which os.utime sets back (Windows' st_ctime is the creation time):
    there, or on a file system mountinfo does not tell, a file's status proves nothing and it is hashed every time."""
    path = tmp_path / "w.onnx"
    _weighted(path)
    _layers(path)
    dev = os.stat(path).st_dev
    monkeypatch.setattr(model_file, "RACY_NS", -10**18)
    monkeypatch.setattr(model_file, "_mount_types", lambda: {} if kind is None else {(os.major(dev), os.minor(dev)): kind})
    hashed, real = [], model_file.hasher
    monkeypatch.setattr(model_file, "hasher", lambda: hashed.append(1) or real())
    assert type(_layers(path).plan).__name__ == "CachedPlan" and hashed


def test_touching_an_entry_never_follows_a_link(tmp_path, monkeypatch):
    """The entry marked as used (its .json's time) is the cache's own file: a link planted in its place does not
    reach the file it leads to."""
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "c"))
    (tmp_path / "c").mkdir()
    target = tmp_path / "victim.txt"
    target.write_text("x")
    os.utime(target, ns=(10**9, 10**9))
    k = "0" * 32
    (tmp_path / "c" / plan_cache.entry_name(k, "json")).symlink_to(target)
    plan_cache.touch(k)
    assert target.stat().st_mtime_ns == 10**9


def _small_external(path: Path, scale: float = 1.0) -> None:
    """y = MatMul(x, w) with w of 4x4 in an external data file beside ``path`` (too small to be a stub)."""
    w = (np.arange(16, dtype=np.float32).reshape(4, 4) - 7) * np.float32(scale)
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [numpy_helper.from_array(w, "w")])
    onnx.save_model(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=path.name + ".data",
                    size_threshold=0)


def test_a_small_weight_in_an_external_file_is_never_served_stale(tmp_path, cache):
    """A model whose weights lie partly in another file is more than its own bytes: never served (an entry checks
    the model file alone), so an edit of that file is read."""
    path = tmp_path / "ext.onnx"
    _small_external(path)
    first = _layers(path)
    _small_external(path, scale=3.0)  # the .data file edited, the model file's bytes as they were
    second = _layers(path)
    assert type(second.plan).__name__ != "CachedPlan"
    x = second.feed["x"].astype(np.float64)
    w = (np.arange(16, dtype=np.float64).reshape(4, 4) - 7) * 3
    assert _stats(second)["y"][1] == pytest.approx((x @ w).max(), rel=1e-6)
    assert _stats(second)["y"] != _stats(first)["y"]
