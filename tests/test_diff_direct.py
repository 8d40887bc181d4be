"""diff's direct mode (api.diff_direct): the second `diff` of the same two model files with the same request runs
the merged graph the first one left in the plan cache, without reading, validating, observing or matching the models
again, and its result is the first one's: every pair, number, verdict, unmatched entry and note. Anything it cannot
serve (an edited file, a damaged entry, another request, input files, another reference) goes the normal way, with
the right numbers; the served numbers are checked against numpy float64 on each model's own tensors."""

from __future__ import annotations

import importlib
import json
import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.compare.frozen import freeze, thaw
from onnxprobe.match.observe import Observable
from onnxprobe.match.pairs import Matching, Pair, Unmatched
from onnxprobe.runtime import plan_cache
from onnxprobe.stats.metrics import Tolerance
from tests.conftest import sample_path
from tests.test_diff_light import _values  # every node output of a model alone, as onnxruntime computes it

api_diff = importlib.import_module("onnxprobe.api.diff")  # the module (api.diff is the function)
MODELS = ["cnn", "mlp", "transformer_block", "dynamic_batch", "control_flow"]


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    return tmp_path / "cache"


@pytest.fixture()
def pending(monkeypatch):
    """Every runtime.direct.Pending session started ("opened") and let go ("closed") meanwhile."""
    from onnxprobe.runtime import direct

    seen: dict[str, list] = {"opened": [], "closed": []}
    orig_init, orig_close = direct.Pending.__init__, direct.Pending.close

    def init(self, *x, **y):
        seen["opened"].append(self)
        orig_init(self, *x, **y)

    def close(self):
        seen["closed"].append(self)
        orig_close(self)

    monkeypatch.setattr(direct.Pending, "__init__", init)
    monkeypatch.setattr(direct.Pending, "close", close)
    return seen


def _perturbed(name: str, folder, only: str | None = None, scale: float = 1e-2) -> str:
    """A copy of the sample model ``name`` with its float weights (or the one named ``only``) moved (seeded)."""
    m = onnx.load(str(sample_path(name)))
    rng = np.random.default_rng(7)
    for i, t in enumerate(m.graph.initializer):
        w = numpy_helper.to_array(t)
        if w.dtype == np.float32 and w.size > 1 and (only is None or t.name == only):
            w = (w * (1 + scale * rng.standard_normal(w.shape))).astype(np.float32)
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(w, t.name))
    out = folder / f"{name}_perturbed.onnx"
    onnx.save(m, str(out))
    return str(out)


def _diff(a, b, **kw):
    kw.setdefault("selection", api.Selection(all=True))
    kw.setdefault("config", api.RunConfig(device="cpu"))
    return api.diff(a, b, **kw)


def _served(res) -> bool:
    return type(res.a).__name__ == "ServedSide"


def _rows(res) -> list:
    return [(r.pair.a.name, r.pair.b.name, r.pair.strategy, r.shape, r.metrics, r.introduced, r.passed, r.tolerance,
             r.problem) for r in res.results]


def _same(first, second) -> None:
    assert _rows(second) == _rows(first)
    assert second.matching == first.matching
    assert second.notes == first.notes
    assert second.verdict() == first.verdict()
    assert second.criterion == first.criterion
    assert second.in_graph == first.in_graph
    assert second.selected_b == first.selected_b and second.selected_a == first.selected_a
    assert second.uncompared == first.uncompared
    assert second.a.describe() == first.a.describe() and second.b.describe() == first.b.describe()
    assert sorted(second.feed) == sorted(first.feed)
    assert all(np.array_equal(second.feed[k], first.feed[k]) for k in first.feed)


@pytest.mark.parametrize("extras", [True, False], ids=["full", "light"])
@pytest.mark.parametrize("name", MODELS)
def test_second_diff_is_served_and_identical(tmp_path, cache, name, extras):
    a, b = str(sample_path(name)), _perturbed(name, tmp_path)
    first = _diff(a, b, extras=extras)
    second = _diff(a, b, extras=extras)
    assert not _served(first)
    if first.in_graph != len(first.results) or any(r.metrics is None for r in first.results):
        assert not _served(second)  # not all measured in the one run (an If branch not taken): the normal way
    else:
        assert _served(second)
    _same(first, second)


def test_served_numbers_against_numpy_float64(tmp_path, cache):
    a, b = str(sample_path("cnn")), _perturbed("cnn", tmp_path)
    _diff(a, b)
    res = _diff(a, b)
    assert _served(res)
    va, vb = _values(a, res.feed), _values(b, res.feed)
    checked = 0
    for r in res.results:
        x, y = va[r.pair.a.name].astype(np.float64), vb[r.pair.b.name].astype(np.float64)
        d = x - y
        assert r.metrics.max_abs == pytest.approx(np.abs(d).max(), rel=1e-6, abs=1e-12)
        sq = (d ** 2).sum()
        if sq > 0:
            assert r.metrics.sqnr_db == pytest.approx(10 * np.log10((y ** 2).sum() / sq), abs=1e-4)
        checked += 1
    assert checked == len(res.results) > 5


def test_exact_inputs_introduced_error_is_applied_again(tmp_path, cache):
    """Only the last weight moved: the earlier pairs are exact, and the pairs whose B cone reads only exact tensors
    take their accumulated error as their introduced one (compare.diff._introduced_from_exact_inputs), served too."""
    m = onnx.load(str(sample_path("mlp")))
    last = [t.name for t in m.graph.initializer if numpy_helper.to_array(t).size > 1][-1]
    a, b = str(sample_path("mlp")), _perturbed("mlp", tmp_path, only=last)
    first, second = _diff(a, b), _diff(a, b)
    assert _served(second)
    assert any(r.metrics.exact for r in first.results) and not all(r.metrics.exact for r in first.results)
    assert first.plan.exact_inputs is not None and first.plan.exact_inputs[1]
    _same(first, second)


def test_cli_second_diff_reads_no_model(tmp_path, cache, monkeypatch):
    a, b = str(sample_path("cnn")), _perturbed("cnn", tmp_path)
    runner = CliRunner()
    outs = []
    for k in range(2):
        if k:  # served: neither model is read, validated, observed nor matched
            monkeypatch.setattr(api_diff, "make_sides", lambda *x, **y: (_ for _ in ()).throw(AssertionError("read")))
        table = runner.invoke(app, ["diff", a, b, "--all", "--device", "cpu"])
        js = runner.invoke(app, ["diff", a, b, "--all", "--device", "cpu", "--json", str(tmp_path / f"r{k}.json")])
        outs.append((table.exit_code, table.output, js.exit_code, json.loads((tmp_path / f"r{k}.json").read_text())))
    for d in (outs[0][3], outs[1][3]):
        d.pop("timing", None)
    assert outs[1] == outs[0]
    assert outs[0][3]["pairs"]


@pytest.mark.parametrize("flags", [["--atol", "5e-3"], ["--min-sqnr", "45"], ["--metric", "cosine"]])
def test_cli_another_threshold_reads_no_model(tmp_path, cache, monkeypatch, flags):
    """diff, then the same diff with another threshold or metric: served (neither model read), and what a run that
    reads both models says, to the byte (table and JSON)."""
    a, b = str(sample_path("cnn")), _perturbed("cnn", tmp_path)
    runner = CliRunner()
    args = ["diff", a, b, "--all", "--device", "cpu"]
    for extra in ([], ["--json", str(tmp_path / "first.json")]):
        assert runner.invoke(app, args + extra).exit_code in (0, 1)
    normal = [runner.invoke(app, args + flags + ["--no-cache"] + extra) for extra in ([], ["--json", "-"])]
    monkeypatch.setattr(api_diff, "make_sides", lambda *x, **y: (_ for _ in ()).throw(AssertionError("read")))
    served = [runner.invoke(app, args + flags + extra) for extra in ([], ["--json", "-"])]
    assert [r.exit_code for r in served] == [r.exit_code for r in normal]
    assert served[0].output == normal[0].output
    js = [json.loads(r.stdout) for r in (served[1], normal[1])]
    for d in js:
        d.pop("timing", None)
    assert js[0] == js[1] and js[0]["criterion"] != json.loads((tmp_path / "first.json").read_text())["criterion"]


def test_served_sides_are_built_when_read(tmp_path, cache):
    a, b = str(sample_path("mlp")), _perturbed("mlp", tmp_path)
    _diff(a, b)
    res = _diff(a, b)
    assert _served(res)
    assert {o.name for o in res.a.model.proto.graph.output} == {o.name for o in onnx.load(a).graph.output}
    assert res.b.runner.facts()["model"] == res.b.facts()["model"]
    # what reads the sides' runners works on a served result: histograms of its worst rows, on its own inputs
    hists = api.diff_histograms(res, [res.results[-1].pair.a.name])
    assert hists


@pytest.mark.parametrize("restored", [False, True], ids=["mtime-moved", "mtime-restored"])
def test_edited_model_b_is_not_served_stale(tmp_path, cache, restored):
    a, b = str(sample_path("cnn")), _perturbed("cnn", tmp_path)
    _diff(a, b)
    st = os.stat(b)
    m = onnx.load(b)  # other weights, same size
    t = next(t for t in m.graph.initializer if numpy_helper.to_array(t).size > 100)
    w = numpy_helper.to_array(t) * np.float32(1.5)
    t.CopyFrom(numpy_helper.from_array(w.astype(np.float32), t.name))
    onnx.save(m, b)
    assert os.stat(b).st_size == st.st_size
    if restored:
        os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns))
    got = _diff(a, b)
    fresh = _diff(a, b, config=api.RunConfig(device="cpu", cache=False))
    assert _rows(got) == _rows(fresh)
    assert _served(got) is False or restored  # restored mtime: the change time says it changed; hashed, a miss


def _entry(cache) -> tuple[str, bytes, dict]:
    """The one diff entry in ``cache``: (key, its graph's bytes, its metadata)."""
    keys = [p.name.split(".")[0] for p in cache.iterdir() if p.name.endswith(".probed.json") and "template" in p.read_text()]
    assert len(keys) == 1
    data, meta = plan_cache.read_entry(keys[0])
    assert isinstance(meta["template"], plan_cache.Deferred)  # parsed while the session builds
    meta["template"] = meta["template"].value()
    return keys[0], data, meta


@pytest.mark.parametrize("damage", ["class", "field", "files", "outputs", "recipe", "digest", "onnx", "template text",
                                    "template json", "prepack"])
def test_damaged_entry_is_a_miss(tmp_path, cache, damage):
    a, b = str(sample_path("mlp")), _perturbed("mlp", tmp_path)
    first = _diff(a, b)
    k, data, meta = _entry(cache)
    if damage == "class":  # an entry naming a class that is not kept: never made
        meta["template"]["frozen"]["objects"][0][0] = "Popen"
    elif damage == "field":
        meta["template"]["frozen"]["objects"][0][1].append("more")
    elif damage == "files":
        meta["files"][1]["moves"] = [[10 ** 9, 4, 0]]
    elif damage == "outputs":
        meta["outputs"].append("no such output")
    elif damage == "recipe":
        meta["recipe"][0][2] = [-1]
    elif damage == "onnx":
        data = data[:100]
    elif damage == "prepack":
        meta["prepack"] = "no"
    path = cache / plan_cache.entry_name(k, "json")
    if damage == "digest":  # written by hand: its digest is not the entry's
        line1, _, rest = path.read_bytes().partition(b"\n")
        path.write_bytes(plan_cache.MAGIC + b"0" * (len(line1) - len(plan_cache.MAGIC)) + b"\n" + rest)
    elif damage == "template text":  # the part parsed later is under the digest too: edited, the entry is a miss
        text = path.read_bytes()
        head_end = text.index(b"\n", text.index(b"\n") + 1)
        assert b'"measured": "' in text[head_end:]  # a string still: what the template's checks take
        path.write_bytes(text[:head_end] + text[head_end:].replace(b'"measured": "', b'"measured": "X', 1))
    elif damage == "template json":  # under a digest that holds, a template that is no JSON: a miss, not an error
        plan_cache.write_entry(k, data, {**meta, "template": "{"}, later="template")
        rest = path.read_bytes().partition(b"\n")[2]
        rest = rest.replace(b'\n"{"', b"\n{")
        path.write_bytes(plan_cache.MAGIC + plan_cache._digest(k, data, rest).encode() + b"\n" + rest)
    else:
        plan_cache.write_entry(k, data, meta, later="template")
    again = _diff(a, b)
    assert not _served(again)
    _same(first, again)


def test_served_diff_applies_the_recorded_exact_inputs(tmp_path, cache):
    """A pair the first run found fed only by exact tensors takes its accumulated error as its introduced one
    (compare.diff._introduced_from_exact_inputs): the served run applies what the entry records, by B's name."""
    a, b = str(sample_path("mlp")), _perturbed("mlp", tmp_path)
    first = _diff(a, b)
    r = next(r for r in first.results if r.introduced is not None and r.introduced != type(r.introduced).of(r.metrics))
    k, data, meta = _entry(cache)
    meta["template"]["alike"] = sorted({*meta["template"]["alike"], r.pair.b.name})
    plan_cache.write_entry(k, data, meta, later="template")
    served = _diff(a, b)
    assert _served(served)
    got = next(x for x in served.results if x.pair.b.name == r.pair.b.name)
    assert got.introduced == type(r.introduced).of(got.metrics) != r.introduced


@pytest.mark.parametrize("kw", [
    {"fuse": False}, {"profile": True}, {"inputs": "arrays"}, {"config": api.RunConfig(device="cpu", cache=False)},
    {"max_memory": 2 ** 30},
], ids=["separate-runs", "profile", "input-arrays", "no-cache", "max-memory"])
def test_other_requests_go_the_normal_way(tmp_path, cache, kw):
    a, b = str(sample_path("mlp")), _perturbed("mlp", tmp_path)
    if kw.get("inputs") == "arrays":
        m = onnx.load(a)
        i = m.graph.input[0]
        dims = [d.dim_value or 1 for d in i.type.tensor_type.shape.dim]
        kw = {"inputs": api.InputSpec(arrays={i.name: np.ones(dims, np.float32)})}
    for _ in range(2):
        res = _diff(a, b, **kw)
        assert not _served(res)


def _normal(a, b, **kw):
    """The same request run the normal way (no cache: neither served nor writing an entry)."""
    return _diff(a, b, config=api.RunConfig(device="cpu", cache=False), **kw)


# criteria whose rows are the default's: the same rtol (allclose, any atol), or no allclose excess read (rtol 0)
SERVED_CRITERIA = {
    "atol": api.Tolerance("allclose", atol=5e-3),
    "atol-flag": api.Tolerance.from_flags(atol=5e-3),  # over the default: its rtol kept
    "max_abs": api.Tolerance("max_abs", atol=10.0),
    "rmse": api.Tolerance("rmse", atol=1e-3),
    "sqnr": api.Tolerance("sqnr", min_sqnr=45.0),
    "cosine": api.Tolerance("cosine", min_cosine=0.99999),
}


@pytest.mark.parametrize("extras", [True, False], ids=["full", "light"])
@pytest.mark.parametrize("criterion", list(SERVED_CRITERIA))
def test_another_criterion_of_the_same_rows_is_served_as_a_normal_run_judges_it(tmp_path, cache, criterion, extras):
    """A diff already run, asked again with another threshold or metric (a user trying criteria): served from the
    entry, judged as the normal path judges it, every number, verdict, criterion and note that path's."""
    a, b = str(sample_path("cnn")), _perturbed("cnn", tmp_path)
    tol = SERVED_CRITERIA[criterion]
    first = _diff(a, b, extras=extras)
    again = _diff(a, b, tolerance=tol, extras=extras)
    normal = _normal(a, b, tolerance=tol, extras=extras)
    assert _served(again) and not _served(normal)
    _same(normal, again)
    assert again.criterion != first.criterion
    assert [r.tolerance for r in again.results] == [r.tolerance for r in normal.results]
    assert _served(_diff(a, b, extras=extras))  # the entry still serves the first request, as it judged it
    _same(first, _diff(a, b, extras=extras))


def test_a_criterion_that_changes_the_verdict_is_served_with_it(tmp_path, cache):
    a, b = str(sample_path("cnn")), _perturbed("cnn", tmp_path)
    strict = _diff(a, b)
    loose = _diff(a, b, tolerance=api.Tolerance("max_abs", atol=10.0))
    assert _served(loose)
    assert strict.verdict()[0] == "fail" and loose.verdict()[0] == "pass"
    assert all(r.passed for r in loose.results) and not all(r.passed for r in strict.results)


@pytest.mark.parametrize("criterion", ["rtol", "max_rel-light", "mean_abs-light", "relative-atol", "per-tensor"])
def test_a_criterion_whose_rows_differ_goes_the_normal_way(tmp_path, cache, criterion):
    """An allclose rtol other than the entry's (its rows hold the excess over that rtol), a metric a light entry's
    rows leave out, an atol judged at the run's scale, other per-tensor rules (keyed): measured again, right."""
    a, b = str(sample_path("cnn")), _perturbed("cnn", tmp_path)
    extras = not criterion.endswith("-light")
    kw = {"rtol": {"tolerance": api.Tolerance("allclose", rtol=1e-2)},
          "max_rel-light": {"tolerance": api.Tolerance("max_rel", rtol=0.5)},
          "mean_abs-light": {"tolerance": api.Tolerance("mean_abs", atol=1e-3)},
          "relative-atol": {"tolerance": api.Tolerance("allclose", atol=1e-3, atol_relative=True)},
          "per-tensor": {"per_tensor": {"conv1_out": api.Tolerance("max_abs", atol=1.0)}}}[criterion]
    _diff(a, b, extras=extras)
    again = _diff(a, b, extras=extras, **kw)
    assert not _served(again)
    _same(_normal(a, b, extras=extras, **kw), again)


def test_a_light_request_is_not_served_the_rows_of_a_criterion_that_kept_every_metric(tmp_path, cache):
    """A light diff judged by max_rel measures every metric (``judged_by_extras``); asked again by SQNR, light (rows
    of the same rtol, 0), the normal path reports no max_rel nor mean |a-b|: so must the answer."""
    a, b = str(sample_path("cnn")), _perturbed("cnn", tmp_path)
    _diff(a, b, extras=False, tolerance=api.Tolerance("max_rel", rtol=0.5))
    sqnr = api.Tolerance("sqnr", min_sqnr=45.0)
    again = _diff(a, b, extras=False, tolerance=sqnr)
    assert not _served(again)
    _same(_normal(a, b, extras=False, tolerance=sqnr), again)
    assert all(r.metrics.max_rel is None for r in again.results if r.metrics is not None)


def test_another_seed_is_another_entry(tmp_path, cache):
    a, b = str(sample_path("cnn")), _perturbed("cnn", tmp_path)
    strict = _diff(a, b)
    seeded = _diff(a, b, inputs=api.InputSpec(seed=5))
    assert not _served(seeded)
    assert not np.array_equal(seeded.feed[next(iter(seeded.feed))], strict.feed[next(iter(strict.feed))])
    assert _served(_diff(a, b, inputs=api.InputSpec(seed=5)))


def test_frozen_round_trip():
    obs = Observable(key="k", name="n", probe="p", node="nd", op_type="Conv", effective_op="Conv", index=3,
                     shape=(1, "N", 4), kind="float", sources=("input:x",), weights=("d1",), weight_sizes=(9,))
    other = Observable(key="k2", name="n2", probe="p2", node="nd2", op_type="Relu", effective_op="Relu", index=4,
                       shape=None, kind="qdq", is_output=True)
    pair = Pair(obs, other, "name", "same name")
    data = {"pairs": [pair, pair], "m": Matching([pair], [Unmatched(obs, "why")], []), "t": Tolerance("sqnr", min_sqnr=-3.0),
            "inf": float("inf"), "s": {"a", "b"}, "by_int": {1: (2, 3)}, "tagged": {"~t": 1}}
    back = thaw(json.loads(json.dumps(freeze(data))))
    assert back == data
    assert back["pairs"][0] is back["pairs"][1] is back["m"].pairs[0]  # met twice, written once
    assert isinstance(back["m"].pairs[0].a.shape, tuple)


@pytest.mark.parametrize("bad", [
    {"objects": [["Popen", []]], "value": 1},
    {"objects": [["Tolerance", ["sqnr"]]], "value": 1},  # a field missing
    {"objects": [], "value": {"~r": 0}},  # a reference to nothing
    {"objects": [], "value": {"~f": "1e400"}},
    "not a dict",
])
def test_thaw_refuses_what_freeze_cannot_make(bad):
    with pytest.raises((ValueError, TypeError, KeyError)):
        thaw(bad)


def test_freeze_refuses_other_objects():
    with pytest.raises(ValueError):
        freeze({"x": np.float32(1.0)})
    with pytest.raises(ValueError):
        freeze(object())


def test_a_model_with_external_weights_is_never_served_stale(tmp_path, cache):
    """B's small weight in an external data file: its edit is read (an entry checks the model files alone, so a
    model that is more than its own bytes is never served)."""
    from tests.test_lean_hit import _small_external

    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    _small_external(a)
    _small_external(b, scale=1.5)
    first = _diff(str(a), str(b))
    _small_external(b, scale=1.0)  # now B is A
    second = _diff(str(a), str(b))
    assert not _served(second)
    assert all(r.metrics.exact for r in second.results) and not all(r.metrics.exact for r in first.results)


def test_served_sides_of_a_file_edited_since_are_refused(tmp_path, cache):
    """A served result's sides are read from the files when first used: B rewritten after the diff would give
    another model than the one measured (its histograms, its model): refused, never read silently (QA)."""
    a, b = str(sample_path("cnn")), _perturbed("cnn", tmp_path)
    _diff(a, b)
    res = _diff(a, b)
    assert _served(res)
    m = onnx.load(b)  # other weights, same size
    t = next(t for t in m.graph.initializer if numpy_helper.to_array(t).size > 100)
    t.CopyFrom(numpy_helper.from_array((numpy_helper.to_array(t) * np.float32(1.5)).astype(np.float32), t.name))
    onnx.save(m, b)
    with pytest.raises(api.ModelError, match="changed since"):
        res.b.model  # noqa: B018
    # the same bytes again (another inode, other times): read as the diff measured them
    again = _diff(a, b, config=api.RunConfig(device="cpu", cache=False))
    _diff(a, b)  # the edited B's entry
    res = _diff(a, b)
    assert _served(res)
    os.replace(b, b + ".moved")
    with open(b + ".moved", "rb") as f, open(b, "wb") as g:
        g.write(f.read())
    assert res.b.runner is not None
    assert api.diff_histograms(res, [res.results[-1].pair.a.name]) == api.diff_histograms(again, [res.results[-1].pair.a.name])


@pytest.mark.parametrize("field,value", [("notes", [1, 2]), ("describe", [1, 2]), ("labels", ["A"]), ("facts", [5, 6]),
                                         ("measured", 7), ("exact", "x"), ("alike", [None]), ("rtols", "x"),
                                         ("raw", []), ("extras", "yes"), ("same", ["0"]), ("same", [10**6])])
def test_entry_with_a_template_of_other_types_is_a_miss(tmp_path, cache, field, value):
    """An entry whose digest holds but whose template's plain fields are not what _remember writes (notes of
    ints: an internal error in the report) is a miss, as runtime.direct's entries are (_meta_fits)."""
    a, b = str(sample_path("mlp")), _perturbed("mlp", tmp_path)
    first = _diff(a, b)
    k, data, meta = _entry(cache)
    meta["template"][field] = value
    plan_cache.write_entry(k, data, meta, later="template")
    again = _diff(a, b)
    assert not _served(again)
    _same(first, again)


def test_a_served_diff_reports_its_progress(tmp_path, cache):
    a, b = str(sample_path("mlp")), _perturbed("mlp", tmp_path)
    _diff(a, b)
    calls = []
    res = _diff(a, b, progress=lambda done, total: calls.append((done, total)))
    assert _served(res) and calls and calls[-1][0] == calls[-1][1]


@pytest.mark.parametrize("kw", [{"introduced": "yes"}, {"fp32_sensitivity": True}, {"tolerance": "max_abs"},
                                {"per_tensor": {"y": "max_abs"}}, {"extras": 1}])
def test_a_prepared_entry_never_skips_the_checks(tmp_path, cache, kw, pending):
    """api.diff prepares an entry from the request as stated, before the normal path checks it: an argument the
    normal path refuses is refused in its words, however close its key came to an entry's, and the prepared session
    is let go."""
    from onnxprobe.errors import UsageError

    a, b = str(sample_path("mlp")), _perturbed("mlp", tmp_path)
    _diff(a, b)
    assert _served(_diff(a, b))
    with pytest.raises(UsageError):
        _diff(a, b, **kw)
    assert set(map(id, pending["opened"])) <= set(map(id, pending["closed"]))


def test_a_session_that_fails_to_build_raises_where_it_is_run():
    """runtime.direct.Pending: what onnxruntime says of a skeleton it cannot load comes out of run(), in the caller's
    thread (the served path then goes the normal way); close() after it is harmless."""
    from onnxprobe.runtime import direct

    pending = direct.start_skeleton(b"not a model", np.zeros(0, np.uint8), "off")
    with pytest.raises(Exception) as got:
        pending.run({}, [])
    assert not isinstance(got.value, (KeyboardInterrupt, SystemExit))
    pending.close()
    pending.close()


def test_a_prepared_session_is_let_go_when_the_normal_path_fails_to_import(tmp_path, cache, monkeypatch, pending):
    """api.diff_lean starts the session, then imports the normal path (onnx, the comparison code: the 0.15-0.2 s a
    Ctrl-C most likely lands in): what ends that import (a KeyboardInterrupt, an ImportError) lets the session go.
    Left building, the command line's process ended by the interpreter's shutdown, which a second Ctrl-C broke
    with onnxruntime still building: 'terminate called without an active exception', exit code 134 or 139."""
    import sys
    import threading

    from onnxprobe.api import diff_lean

    a, b = str(sample_path("mlp")), _perturbed("mlp", tmp_path)
    _diff(a, b)
    monkeypatch.setitem(sys.modules, "onnxprobe.api.diff", None)  # its import fails
    with pytest.raises(ImportError):
        diff_lean.diff(a, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))
    assert pending["opened"] and set(map(id, pending["opened"])) <= set(map(id, pending["closed"]))
    assert not [t for t in threading.enumerate() if t.name == "onnxprobe-session" and t.is_alive()]


def test_closing_a_pending_session_outlasts_a_second_ctrl_c(monkeypatch):
    """runtime.direct.Pending.close waits for the build through another Ctrl-C (then raises it): a thread left
    building outlives the command into the interpreter's shutdown (the test above)."""
    from onnxprobe.runtime import direct

    pending = direct.start_skeleton(b"not a model", np.zeros(0, np.uint8), "off")
    orig, calls = direct.Pending._wait, []

    def wait(self):
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        orig(self)

    monkeypatch.setattr(direct.Pending, "_wait", wait)
    with pytest.raises(KeyboardInterrupt):
        pending.close()
    assert pending._done.is_set() and not pending._thread.is_alive()


def test_a_ctrl_c_while_onnxruntime_is_first_imported_is_a_ctrl_c(tmp_path, monkeypatch):
    """onnxruntime's extension turns a KeyboardInterrupt raised while it initialises into ImportError('import numpy
    failed'): api.diff_lean took that for a request it cannot prepare and went on, importing onnxruntime again, and
    the Ctrl-C was lost (the whole report, exit code 1). runtime.ort_options.ort_module holds a Ctrl-C back until
    the import is done, then raises it. (A stand-in module that does what onnxruntime's extension does.)"""
    import signal
    import sys

    from onnxprobe.runtime import ort_options

    fake = tmp_path / "fake" / "onnxruntime"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "import signal, time\n"
        "try:\n"
        "    signal.raise_signal(signal.SIGINT)\n"
        "    for _ in range(1000):\n"
        "        time.sleep(0)\n"
        "except KeyboardInterrupt:\n"
        "    raise ImportError('import numpy failed') from None\n"
        "__version__ = 'fake'\n"
        "def set_default_logger_severity(level):\n"
        "    pass\n")
    monkeypatch.syspath_prepend(str(fake.parent))
    for name in [n for n in sys.modules if n == "onnxruntime" or n.startswith("onnxruntime.")]:
        monkeypatch.delitem(sys.modules, name)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        ort_options.ort_module()
    assert sys.modules["onnxruntime"].__version__ == "fake"  # imported whole, then the Ctrl-C
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_request_reads_its_entry_once(tmp_path, cache, monkeypatch):
    """api.diff makes the request's ticket once and reads its entry once (api.diff_lean, before the normal path is
    imported); the normal path serves from what it read or runs under the same ticket, whether the entry is there
    (served), missing (a first run) or stale (a file edited since: its weights no longer the entry's)."""
    from onnxprobe.runtime import plan_cache

    a, b = str(sample_path("mlp")), _perturbed("mlp", tmp_path)
    reads = []
    orig = plan_cache.read_entry
    monkeypatch.setattr(plan_cache, "read_entry", lambda k: reads.append(k) or orig(k))
    first = _diff(a, b)
    key = reads[0]  # the request's own entry, read first (a normal run reads its merged graph's too)
    direct_reads = lambda: reads.count(key)  # noqa: E731
    assert not _served(first) and direct_reads() == 1
    assert _served(_diff(a, b)) and direct_reads() == 2
    m = onnx.load(b)  # the same size, other weights
    w = numpy_helper.to_array(m.graph.initializer[0]).copy()
    w.flat[0] += 1
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array(w, m.graph.initializer[0].name))
    onnx.save(m, b)
    again = _diff(a, b)
    assert not _served(again) and direct_reads() == 3
    assert _served(_diff(a, b)) and direct_reads() == 4  # the entry the normal run wrote anew


def test_a_served_diff_keeps_each_notes_command_line_words(tmp_path, cache):
    """A note said in two wordings (the dynamic-dimension note: 'use --shape x=...' to the command line,
    'shapes (--shape)' to the API) came back from the cache in the API's words only, which the command line then
    printed."""
    from onnxprobe.errors import cli_words

    a, b = str(sample_path("dynamic_batch")), _perturbed("dynamic_batch", tmp_path)
    first, second = _diff(a, b), _diff(a, b)
    assert _served(second) and not _served(first)
    two = [n for n in first.notes if cli_words(n) != str(n)]
    assert two, first.notes  # else the test proves nothing
    assert [cli_words(n) for n in second.notes] == [cli_words(n) for n in first.notes]
    assert [str(n) for n in second.notes] == [str(n) for n in first.notes]
    for _ in range(2):  # the command line, a first and a served run: its own words both times
        r = CliRunner().invoke(app, ["diff", a, b])
        assert "(use --shape" in r.stderr and "shapes (--shape)" not in r.stderr, r.stderr
