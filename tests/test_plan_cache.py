"""runtime.plan_cache: the second run of a command skips the rewrite, gives the same numbers, and a
changed model, selection, input shape or onnxprobe version misses; the cache stays within its size,
survives a damaged entry, and is off when asked."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from conftest import sample_path
from onnxprobe import api
from onnxprobe.api import core
from onnxprobe.runtime import plan_cache
import onnxprobe.runtime.runners.planning as runner_planning


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    return tmp_path / "cache"


def counted(monkeypatch, module, name: str) -> list:
    """Replace ``module.name`` by a wrapper that counts its calls; the list of calls."""
    calls, real = [], getattr(module, name)

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(module, name, counting)
    return calls


@pytest.fixture()
def rewrites(monkeypatch):
    """Counts the rewrites (graph.expose calls) the runner makes."""
    return counted(monkeypatch, runner_planning, "expose")


def _stats(res) -> dict:
    return {r.name: (s.min, s.max, s.mean, s.std) for r, s in res.rows() if s is not None}


def _layers(path, **kw):
    # the plan cache is the normal path's (api.core.layers): api.layers would serve a repeated request from its
    # lean index (api.lean, tests/test_lean_hit.py) without reading the plan entry these tests edit
    return core.layers(path, api.Selection(all=True), api.RunConfig(device="cpu", cache=kw.pop("cache", True)), kw.pop("inputs", None))


def test_second_run_skips_the_rewrite_and_gives_the_same_numbers(cache, rewrites):
    first = _layers(sample_path("cnn"))
    assert len(rewrites) == 1 and list(cache.glob("*.onnx"))
    second = _layers(sample_path("cnn"))
    assert len(rewrites) == 1  # served from the cache
    uncached = _layers(sample_path("cnn"), cache=False)
    assert _stats(first) == _stats(second) == _stats(uncached)


def _big_weight_model(path, scale: float):
    from onnx import TensorProto, helper

    w = numpy_helper.from_array((np.random.default_rng(0).standard_normal((128, 128)) * scale).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["y"], name="relu")],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 128])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 128])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_new_weights_of_the_same_graph_are_used(cache, rewrites, tmp_path):
    """An entry holds the graph and its small constants, not the big weights: the same graph with other
    big weights reuses it, and the statistics are those of the new weights."""
    a = _big_weight_model(tmp_path / "a.onnx", 1.0)
    b = _big_weight_model(tmp_path / "b.onnx", 3.0)
    _layers(a)
    cached = _layers(b)
    assert len(rewrites) == 1
    assert _stats(cached) == _stats(_layers(b, cache=False))
    assert _stats(cached) != _stats(_layers(a, cache=False))


def test_changes_miss(cache, rewrites, tmp_path, monkeypatch):
    _layers(sample_path("cnn"))
    api.layers(sample_path("cnn"), api.Selection(ops=("Conv",)), api.RunConfig(device="cpu"))  # another selection
    assert len(rewrites) == 2
    m = onnx.load(str(sample_path("cnn")))
    m.graph.node[0].name = "renamed"  # another graph
    onnx.save(m, str(tmp_path / "renamed.onnx"))
    _layers(tmp_path / "renamed.onnx")
    assert len(rewrites) == 3
    _layers(sample_path("dynamic_batch"), inputs=api.InputSpec(shapes={"x": (2, 3, 8, 8)}))
    _layers(sample_path("dynamic_batch"), inputs=api.InputSpec(shapes={"x": (3, 3, 8, 8)}))  # other input shapes
    assert len(rewrites) == 5
    monkeypatch.setattr(plan_cache, "__version__", "0.0.0-other")
    _layers(sample_path("cnn"))  # another onnxprobe version
    assert len(rewrites) == 6
    monkeypatch.setattr(plan_cache, "FORMAT", plan_cache.FORMAT + 1)
    _layers(sample_path("cnn"))  # another entry format, same version
    assert len(rewrites) == 7
    monkeypatch.setattr(plan_cache, "code_fingerprint", lambda: "edited")
    _layers(sample_path("cnn"))  # the same version and format, with a module edited
    assert len(rewrites) == 8
    _layers(sample_path("cnn"))
    assert len(rewrites) == 8


def test_the_code_fingerprint_follows_every_module_edit(tmp_path):
    """A development checkout edits modules without a new version or FORMAT: each edit (size or time) is
    another fingerprint, so a plan an older build wrote is never read (a QA session's stale plans hid its fix)."""
    import os

    pkg = tmp_path / "pkg"
    (pkg / "graph" / "__pycache__").mkdir(parents=True)
    (pkg / "graph" / "stats_nodes.py").write_text("A = 1\n")
    (pkg / "api.py").write_text("")
    seen = [plan_cache.code_fingerprint(str(pkg))]
    assert plan_cache.code_fingerprint(str(pkg)) == seen[0]  # once per process
    plan_cache._CODE.clear()
    assert plan_cache.code_fingerprint(str(pkg)) == seen[0]  # the same files: the same fingerprint
    (pkg / "graph" / "__pycache__" / "x.py").write_text("compiled")  # not a module of the package
    plan_cache._CODE.clear()
    assert plan_cache.code_fingerprint(str(pkg)) == seen[0]
    for edit in (lambda: (pkg / "graph" / "stats_nodes.py").write_text("A = 22\n"),  # another size
                 lambda: os.utime(pkg / "graph" / "stats_nodes.py", ns=(1, 10**18)),  # the same size, another time
                 lambda: (pkg / "graph" / "new.py").write_text("")):  # a module added
        edit()
        plan_cache._CODE.clear()
        seen.append(plan_cache.code_fingerprint(str(pkg)))
        assert seen[-1] not in seen[:-1]
    plan_cache._CODE.clear()


def test_bounded_damaged_and_off(cache, rewrites, monkeypatch):
    monkeypatch.setenv("ONNXPROBE_CACHE_SIZE", "60000")
    for name in ("cnn", "mlp", "transformer_block"):
        _layers(sample_path(name))
    total = sum(f.stat().st_size for f in cache.iterdir())
    assert total <= 60000
    for f in cache.glob("*.onnx"):
        f.write_bytes(b"not a model")
    n = len(rewrites)
    res = _layers(sample_path("mlp"))  # a damaged entry is a miss
    assert len(rewrites) == n + 1 and _stats(res) == _stats(_layers(sample_path("mlp"), cache=False))
    for f in cache.iterdir():
        f.unlink()
    monkeypatch.setenv("ONNXPROBE_NO_CACHE", "1")
    _layers(sample_path("cnn"))
    assert not list(cache.iterdir())


@pytest.mark.parametrize("text, limit", [("100", 100), ("512M", 512 * 2**20), ("1GiB", 2**30), (" 2kb ", 2048)])
def test_cache_size_takes_bytes_and_binary_units(monkeypatch, text, limit):
    monkeypatch.setenv("ONNXPROBE_CACHE_SIZE", text)
    assert plan_cache.size_limit() == limit


@pytest.mark.parametrize("text", ["abc", "-5", "1.5G", "12 apples"])
def test_an_unreadable_cache_size_is_one_clear_error_not_a_silent_no_cache(cache, monkeypatch, text):
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    monkeypatch.setenv("ONNXPROBE_CACHE_SIZE", text)
    r = CliRunner().invoke(app, ["layers", str(sample_path("mlp"))])
    assert r.exit_code == 2 and "ONNXPROBE_CACHE_SIZE" in r.output and "Traceback" not in r.output, r.output
    r = CliRunner().invoke(app, ["layers", str(sample_path("mlp")), "--no-cache"])  # the cache is not used: no matter
    assert r.exit_code == 0, r.output


def test_no_cache_flag(cache):
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    r = CliRunner().invoke(app, ["layers", str(sample_path("mlp")), "--no-cache"])
    assert r.exit_code == 0, r.output
    assert not cache.exists() or not list(cache.iterdir())
    r = CliRunner().invoke(app, ["layers", str(sample_path("mlp"))])
    assert r.exit_code == 0 and list(cache.glob("*.json"))
    assert np.isfinite(1.0)


@pytest.mark.parametrize("command", [["grad", "CNN"], ["debug", "CNN", "--script", "-"]], ids=["grad", "debug"])
def test_no_cache_flag_of_grad_and_debug(cache, command):
    """grad and debug write plan cache entries too (the forward run that learns shapes, the probed runs): their
    --no-cache keeps them out, as layers' and diff's does (it was 'No such option')."""
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    args = [str(sample_path("cnn")) if a == "CNN" else a for a in command]
    script = "run\ngrad\nstats\n"
    r = CliRunner().invoke(app, [*args, "--no-cache"], input=script)
    assert r.exit_code == 0, r.output
    assert not cache.exists() or not list(cache.iterdir())
    r = CliRunner().invoke(app, args, input=script)
    assert r.exit_code == 0 and list(cache.glob("*.json")), r.output


# -- diff: the merged graph of the one-run diff (compare.fused_cache.build_cached) ---------------------------------
@pytest.fixture()
def builds(monkeypatch):
    """Counts the merged graphs diff builds."""
    import onnxprobe.compare.fused as fused

    return counted(monkeypatch, fused, "build")


def _scaled_copy(src, dst, f: float):
    m = onnx.load(str(src))
    for t in m.graph.initializer:
        a = numpy_helper.to_array(t)
        if a.dtype == np.float32:
            t.CopyFrom(numpy_helper.from_array((a * f).astype(np.float32), t.name))
    onnx.save(m, str(dst))
    return dst


def _diff_numbers(res) -> list:
    return [(r.pair.b.name, r.metrics.sqnr_db, r.metrics.max_abs, r.introduced.sqnr_db if r.introduced else None) for r in res.results]


def test_diff_reuses_its_merged_graph_and_gives_the_same_numbers(cache, builds, tmp_path):
    a, b = _scaled_copy(sample_path("cnn"), tmp_path / "a.onnx", 1.001), sample_path("cnn")
    cfg = api.RunConfig(device="cpu")
    first = api.diff(a, b, selection=api.Selection(all=True), config=cfg, fuse=True)
    assert len(builds) == 1 and first.in_graph > 0
    second = api.diff(a, b, selection=api.Selection(all=True), config=cfg, fuse=True)
    assert len(builds) == 1 and second.in_graph == first.in_graph  # served from the cache, still measured in the graph
    fresh = api.diff(a, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False), fuse=True)
    assert len(builds) == 2  # --no-cache builds it
    assert _diff_numbers(first) == _diff_numbers(second) == _diff_numbers(fresh)


def test_diff_cache_entry_takes_the_weights_of_the_models_it_is_used_for(cache, builds, tmp_path):
    """Big weights are not in an entry: the same graphs with other big weights reuse it, with theirs."""
    b = _big_weight_model(tmp_path / "b.onnx", 1.0)
    a = _big_weight_model(tmp_path / "a.onnx", 1.001)
    c = _big_weight_model(tmp_path / "c.onnx", 1.5)
    cfg, off = api.RunConfig(device="cpu"), api.RunConfig(device="cpu", cache=False)
    first = api.diff(a, b, selection=api.Selection(all=True), config=cfg, fuse=True)
    other = api.diff(c, b, selection=api.Selection(all=True), config=cfg, fuse=True)
    assert len(builds) == 1 and other.in_graph > 0
    assert _diff_numbers(other) == _diff_numbers(api.diff(c, b, selection=api.Selection(all=True), config=off, fuse=True))
    assert _diff_numbers(other) != _diff_numbers(first)


def test_diff_cache_misses_on_another_graph_selection_criterion_or_version(cache, builds, tmp_path, monkeypatch):
    a, b = _scaled_copy(sample_path("cnn"), tmp_path / "a.onnx", 1.001), sample_path("cnn")
    cfg = api.RunConfig(device="cpu")
    api.diff(a, b, selection=api.Selection(all=True), config=cfg, fuse=True)
    api.diff(a, b, selection=api.Selection(ops=("Conv",)), config=cfg, fuse=True)  # another selection
    assert len(builds) == 2
    api.diff(a, b, selection=api.Selection(all=True), config=cfg, tolerance=api.Tolerance(rtol=0.5), fuse=True)  # another rtol: another excess node
    assert len(builds) == 3
    api.diff(a, b, selection=api.Selection(all=True), config=cfg, fuse=True, introduced=False)  # no introduced-error cones
    assert len(builds) == 4
    m = onnx.load(str(a))
    m.graph.node[0].name = "renamed"  # another graph on side A
    onnx.save(m, str(tmp_path / "renamed.onnx"))
    api.diff(tmp_path / "renamed.onnx", b, selection=api.Selection(all=True), config=cfg, fuse=True)
    assert len(builds) == 5
    monkeypatch.setattr(plan_cache, "__version__", "0.0.0-other")
    api.diff(a, b, selection=api.Selection(all=True), config=cfg, fuse=True)  # another onnxprobe version
    assert len(builds) == 6


def test_a_cached_plan_keeps_every_probe_field(cache, rewrites, tmp_path):
    """Every field of every Probe comes back from the cache as the rewrite made it (a field the cache
    dropped would change what the readers do: an If branch's scalar read as [1], say), and the values
    read through it are the same."""
    from dataclasses import asdict

    from test_diff_branches import X, _model

    m = _model(tmp_path / "if.onnx", 1.0)
    feeds = api.InputSpec(arrays={"c": np.array(True), "x0": X})
    first = api.layers(m, api.Selection(all=True), api.RunConfig(device="cpu"), feeds, save=True)
    second = api.layers(m, api.Selection(all=True), api.RunConfig(device="cpu"), feeds, save=True)
    assert len(rewrites) == 1  # the second plan came from the cache
    assert [asdict(p) for p in first.plan.probes] == [asdict(p) for p in second.plan.probes]
    assert any(p.raw_scalar for p in second.plan.probes)
    assert second.arrays["s"].shape == () and float(second.arrays["s"]) == float(first.arrays["s"])


def test_a_probes_record_is_asdict_and_reads_back():
    """``Probe.record`` (what the cache's entries hold) is ``dataclasses.asdict``'s dict, made shallowly: every field
    of the probe and of its TensorRef, none left at a default (a field it dropped would come back as the default),
    and ``probes_from`` reads it back through JSON as the same probe."""
    import json
    from dataclasses import asdict, fields

    from onnxprobe.runtime.plan_cache import probes_from
    from onnxprobe.types import Probe, TensorRef

    ref = TensorRef(name="t", node="n", op_type="If", index=7, scope=("if1/then_branch",), dtype="float32",
                    shape=(1, "N", None), is_output=True, direction="backward", grad_of="x", kind="input", qualified=True)
    probe = Probe(ref=ref, stats_output="s", stats_sums="ss", stats_block=64, stats_extras=False, shape_output="sh",
                  exact_extremes="ee", raw_output="r", stats_on_host=True, raw_for_stats=True, raw_scalar=True,
                  planned_shape=(1, 3))
    for obj, cls in ((probe, Probe), (ref, TensorRef)):  # the test's probe sets every field off its default
        assert all(getattr(obj, f.name) != f.default for f in fields(cls)), cls
    assert probe.record() == asdict(probe)
    back = probes_from(json.loads(json.dumps([probe.record()])), {"s", "ss", "sh", "ee", "r"})
    assert back == [probe]


def test_trimming_deletes_only_the_caches_own_entries(cache, monkeypatch):
    """$ONNXPROBE_CACHE_DIR may name a folder that holds other files (a user's models and reports, old ones
    included): trimming to the size limit deletes only entries, which are named by their key."""
    import os
    import shutil

    cache.mkdir(parents=True)
    theirs = {"big_model.onnx": b"\0" * 300_000, "big_model.json": b"{}", "notes.json": b"{}"}
    for name, data in theirs.items():
        (cache / name).write_bytes(data)
        os.utime(cache / name, (1e9, 1e9))  # older than any entry
    shutil.copy(sample_path("mlp"), cache / "net.onnx")
    monkeypatch.setenv("ONNXPROBE_CACHE_SIZE", "60000")
    for name in ("cnn", "mlp", "transformer_block"):
        _layers(sample_path(name))
    assert all((cache / name).read_bytes() == data for name, data in theirs.items())
    assert (cache / "net.onnx").exists()
    ours = [f for f in cache.iterdir() if plan_cache.ENTRY.fullmatch(f.name)]
    assert ours and sum(f.stat().st_size for f in ours) <= 60000


def test_trimming_deletes_half_entries_and_stale_temporaries(cache, monkeypatch):
    """An entry's .onnx without its .json (a failed .json write, a kill between the two writes) and the
    temporaries a killed writer leaves are no entries: never read, never trimmed, they grew past the bound.
    Old ones go; young ones may be a concurrent writer's and stay; a user's files are left alone."""
    import os
    import time

    cache.mkdir(parents=True)
    old, young = time.time() - 3600, time.time()
    planted = {"0" * 32 + ".probed.onnx": old, "1" * 32 + ".probed.json": old, "." + "2" * 32 + ".probed.onnx.abc123.tmp": old,
               "." + "3" * 32 + ".probed.json.x_9.tmp": old, "4" * 32 + ".probed.onnx": young,
               "." + "5" * 32 + ".probed.onnx.def456.tmp": young,
               "mine.onnx.tmp": old, ".mine.onnx.abc.tmp": old}
    for name, when in planted.items():
        (cache / name).write_bytes(b"\0" * 1000)
        os.utime(cache / name, (when, when))
    _layers(sample_path("mlp"))  # stores an entry, which trims
    left = {f.name for f in cache.iterdir()}
    assert not left & {n for n, when in planted.items() if when == old and "mine" not in n}, left
    assert {"4" * 32 + ".probed.onnx", "." + "5" * 32 + ".probed.onnx.def456.tmp", "mine.onnx.tmp", ".mine.onnx.abc.tmp"} <= left
    # a young half entry counts toward the bound, and goes as the oldest entries do
    (cache / ("6" * 32 + ".probed.onnx")).write_bytes(b"\0" * 200_000)
    os.utime(cache / ("6" * 32 + ".probed.onnx"), (young - 10, young - 10))
    monkeypatch.setenv("ONNXPROBE_CACHE_SIZE", "150000")
    _layers(sample_path("cnn"))
    ours = [f for f in cache.iterdir() if plan_cache.ENTRY.fullmatch(f.name)]
    assert ours and sum(f.stat().st_size for f in ours) <= 150000 and not (cache / ("6" * 32 + ".probed.onnx")).exists()


def _entries(cache):
    """Each entry's .json file and its metadata (the text past the digest's line, to the part written later)."""
    import json

    return [(f, json.loads(f.read_bytes().partition(b"\n")[2].partition(b"\n")[0])) for f in cache.glob("*.json")]


def _rewrite(f, meta) -> None:
    """``meta`` as entry file ``f``'s metadata, under a digest that holds: what the entry's own checks must refuse."""
    import json

    k = f.name.split(".")[0]
    rest = json.dumps(meta).encode() + b"\n"
    data = plan_cache._read(f.with_name(plan_cache.entry_name(k, "onnx")))
    f.write_bytes(plan_cache.MAGIC + plan_cache._digest(k, data, rest).encode() + b"\n" + rest)


@pytest.mark.parametrize("edit", [
    lambda m: {"probes": [], "warnings": 7},
    lambda m: [1, 2],
    lambda m: {**m, "probes": "x"},
    lambda m: {**m, "probes": [{**p, "raw_output": "nosuch"} for p in m["probes"]]},
    lambda m: {**m, "probes": [{**p, "stats_output": 5} for p in m["probes"]]},
    lambda m: {**m, "probes": [{**p, "ref": {**p["ref"], "scope": 3}} for p in m["probes"]]},
    lambda m: {**m, "probes": [{**p, "ref": {**p["ref"], "nosuch": 1}} for p in m["probes"]]},
])
def test_an_edited_plan_entry_is_a_miss(cache, rewrites, edit):

    want = _stats(_layers(sample_path("mlp"), cache=False))
    _layers(sample_path("mlp"))
    (f, meta), = _entries(cache)
    _rewrite(f, edit(meta))
    n = len(rewrites)
    res = _layers(sample_path("mlp"))
    assert len(rewrites) == n + 1 and _stats(res) == want


@pytest.mark.parametrize("edit", [
    lambda m: {**m, "outputs": 7},
    lambda m: {**m, "outputs": m["outputs"] + ["nosuch"]},
    lambda m: {**m, "raw": {"99999": ["a", "b"]}},
    lambda m: {**m, "raw": {"x": ["a", "b"]}},
    lambda m: {**m, "aname": [1]},
    lambda m: {**m, "notes": "n"},
    lambda m: {**m, "same": [99999]},
    lambda m: {**m, "same": "0"},
    lambda m: {**m, "same_weights": "x"},
    lambda m: {**m, "same_weights": [["onnxprobe.b/nosuch", "onnxprobe.a/nosuch"]]},
    lambda m: {k: v for k, v in m.items() if k != "same_weights"},  # an entry of the build before
])
def test_an_edited_diff_entry_is_a_miss(cache, builds, tmp_path, edit):

    a, b = _scaled_copy(sample_path("cnn"), tmp_path / "a.onnx", 1.001), sample_path("cnn")
    cfg = api.RunConfig(device="cpu")
    first = api.diff(a, b, selection=api.Selection(all=True), config=cfg, fuse=True)
    fused = [(f, m) for f, m in _entries(cache) if isinstance(m, dict) and m.get("kind") == "fused"]
    assert len(fused) == 1 and len(builds) == 1
    f, meta = fused[0]
    _rewrite(f, edit(meta))
    for g, m in _entries(cache):  # the request's own entry (api.diff_direct) would serve it without the merged graph's
        if isinstance(m, dict) and m.get(plan_cache.LATER) == "template":
            g.unlink()
            g.with_suffix(".onnx").unlink()
    again = api.diff(a, b, selection=api.Selection(all=True), config=cfg, fuse=True)
    assert len(builds) == 2 and _diff_numbers(again) == _diff_numbers(first)


def test_a_cache_folder_that_is_a_file_is_one_clear_error(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    (tmp_path / "f").write_text("x")
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "f"))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    r = CliRunner().invoke(app, ["layers", str(sample_path("mlp"))])
    assert r.exit_code == 2 and "ONNXPROBE_CACHE_DIR" in r.output and "not a folder" in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1
    r = CliRunner().invoke(app, ["layers", str(sample_path("mlp")), "--no-cache"])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("where, words", [("f/sub", "lies under the file"), ("/proc/onnxprobe-cache", "cannot write in it")])
def test_a_cache_folder_that_cannot_hold_files_is_one_clear_error(tmp_path, monkeypatch, where, words):
    """A folder under a file, or one in /proc, can never hold an entry: each run rebuilt without a word."""
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    (tmp_path / "f").write_text("x")
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / where))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    r = CliRunner().invoke(app, ["layers", str(sample_path("mlp"))])
    assert r.exit_code == 2 and "ONNXPROBE_CACHE_DIR" in r.output and words in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1
    assert CliRunner().invoke(app, ["layers", str(sample_path("mlp")), "--no-cache"]).exit_code == 0


@pytest.mark.parametrize("make, words", [
    (lambda t: (t / "c").symlink_to(t / "nowhere"), "is a link to '{t}/nowhere', which does not exist"),
    (lambda t: ((t / "c").symlink_to(t / "d"), (t / "d").symlink_to(t / "c")), "is a loop of symbolic links"),
    (lambda t: ((t / "up").symlink_to(t / "gone"), (t / "c").symlink_to(t / "up" / "x")), "is a link to '{t}/up/x', which does not exist"),
], ids=["dangling", "loop", "chain"])
def test_a_cache_folder_that_is_a_broken_link_says_so(tmp_path, monkeypatch, make, words):
    """mkdir's 'File exists' named nothing of the cause."""
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    make(tmp_path)
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    r = CliRunner().invoke(app, ["layers", str(sample_path("mlp"))])
    assert r.exit_code == 2 and words.format(t=tmp_path) in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.output
    r = CliRunner().invoke(app, ["layers", str(sample_path("mlp")), "--no-cache"])
    assert r.exit_code == 0, r.output


def test_a_cache_folder_below_a_broken_link_says_which(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    (tmp_path / "l").symlink_to(tmp_path / "nowhere")
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "l" / "sub"))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    r = CliRunner().invoke(app, ["layers", str(sample_path("mlp"))])
    assert r.exit_code == 2 and f"lies under '{tmp_path}/l', a link to '{tmp_path}/nowhere'" in r.stderr, r.output


def test_the_cache_folder_expands_a_tilde_and_ignores_a_relative_xdg_cache_home(tmp_path, monkeypatch):
    """'~/c' quoted in a shell reaches onnxprobe as it is: it made ./~/c in the current folder. A relative
    $XDG_CACHE_HOME is to be ignored (the XDG Base Directory spec): ~/.cache instead."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", "~/c")
    assert plan_cache.cache_dir() == home / "c"
    _layers(sample_path("mlp"))
    assert list((home / "c").glob("*.json")) and not (work / "~").exists()
    monkeypatch.delenv("ONNXPROBE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "rel")
    assert plan_cache.cache_dir() == home / ".cache" / "onnxprobe"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert plan_cache.cache_dir() == tmp_path / "xdg" / "onnxprobe"


@pytest.mark.parametrize("text", ["abc", "-5", "99999999999999999999", "1.5"])
def test_an_unreadable_mmap_threshold_is_one_clear_error(monkeypatch, text):
    import subprocess
    import sys

    from conftest import ROOT

    r = subprocess.run([sys.executable, "-m", "onnxprobe", "layers", str(sample_path("mlp"))], capture_output=True,
                       text=True, cwd=ROOT, env={**__import__("os").environ, "ONNXPROBE_MMAP_THRESHOLD": text,
                                                 "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and "ONNXPROBE_MMAP_THRESHOLD" in r.stderr and "internal" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def no_home(monkeypatch):
    """The process as a user without a home folder: HOME unset and no entry in the password database (a
    container run as a uid of its own, ``env -i``, a service)."""
    import pwd

    def no_entry(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", no_entry)


@pytest.mark.parametrize("home", [None, "", "rel/home"], ids=["unset", "empty", "relative"])
def test_without_a_home_folder_the_cache_is_off_and_nothing_lands_in_the_current_folder(tmp_path, monkeypatch, rewrites, home):
    """With no home folder os.path.expanduser('~') is '~' itself: the cache went to ./~/.cache/onnxprobe, a
    folder named '~' in whatever folder the command ran in (HOME='' made it /.cache). It is off instead: it
    only saves time. An ONNXPROBE_CACHE_DIR with a '~' that cannot be expanded is one clear error."""
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    no_home(monkeypatch)
    if home is not None:
        monkeypatch.setenv("HOME", home)
    monkeypatch.delenv("ONNXPROBE_CACHE_DIR")
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    assert plan_cache.cache_dir() is None and not plan_cache.enabled()
    _layers(sample_path("mlp")), _layers(sample_path("mlp"))
    assert len(rewrites) == 2  # no cache: each run rewrites
    assert [p.name for p in work.iterdir()] == []
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", "~/c")
    r = CliRunner().invoke(app, ["layers", str(sample_path("mlp"))])
    assert r.exit_code == 2 and "ONNXPROBE_CACHE_DIR '~/c'" in r.stderr and "home" in r.stderr, r.output
    assert [p.name for p in work.iterdir()] == []
