"""A light diff (``api.diff(extras=False)``, the CLI when nothing it writes shows them): the one-run graph
leaves out the max relative error, Σ|a-b| and the worst element's index (``graph.pair_nodes.EXTRAS``), so
that their PairMetrics fields are None (and the introduced error's mean |a-b| and index), and every other
number is the full diff's, bit for bit. The full diff's two are checked
against numpy float64 on the models' own tensors (onnxruntime runs of each model alone)."""

from __future__ import annotations

import json
import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.compare import measure
from onnxprobe.runtime.runners import base as base_runner
from tests.conftest import sample_feeds, sample_path

runner = CliRunner()
MODELS = ["cnn", "mlp", "transformer_block"]


def _perturbed(name: str, folder) -> str:
    """A copy of the sample model ``name`` with every float weight moved by ~1% (seeded)."""
    m = onnx.load(str(sample_path(name)))
    rng = np.random.default_rng(7)
    for i, t in enumerate(m.graph.initializer):
        w = numpy_helper.to_array(t)
        if w.dtype == np.float32 and w.size > 1:
            w = (w * (1 + 1e-2 * rng.standard_normal(w.shape))).astype(np.float32)
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(w, t.name))
    out = folder / f"{name}_perturbed.onnx"
    onnx.save(m, str(out))
    return str(out)


def _values(path: str, feeds: dict) -> dict[str, np.ndarray]:
    """Every node output of the model at ``path``, as onnxruntime computes it alone (no optimisation)."""
    m = onnx.load(path)
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(onnx.ValueInfoProto(name=o) for n in m.graph.node for o in n.output if o and o not in have)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def _diff(a: str, b: str, feeds: dict, extras: bool, **kw):
    return api.diff(a, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                    inputs=api.InputSpec(arrays=feeds), extras=extras, **kw)


def _others(m) -> dict:
    """Every field of a PairMetrics (or IntroducedError) but those a light diff leaves out, as exact values
    (repr: -0.0, nan)."""
    return {k: repr(v) for k, v in vars(m).items() if k not in ("max_rel", "mean_abs", "worst")}


@pytest.mark.parametrize("name", MODELS)
def test_light_leaves_out_two_metrics_and_keeps_the_rest_bit_for_bit(name, tmp_path, monkeypatch):
    monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (0, 0))  # every float32 pair through a row
    a, b, feeds = _perturbed(name, tmp_path), str(sample_path(name)), sample_feeds(name)
    full, light = _diff(a, b, feeds, True), _diff(a, b, feeds, False)
    assert full.in_graph > 0 and light.in_graph == full.in_graph
    assert len(full.results) == len(light.results) > 0
    va, vb = _values(a, feeds), _values(b, feeds)
    checked = 0
    for f, g in zip(full.results, light.results):
        assert (f.pair.a.name, f.pair.b.name) == (g.pair.a.name, g.pair.b.name)
        assert f.passed == g.passed and f.problem == g.problem
        # the introduced error as measured (a pair whose cone reads exact inputs takes the pair's own: its
        # mean |a-b| is then left out too, never read as 0)
        if f.introduced is None:
            assert g.introduced is None
        else:
            assert g.introduced.mean_abs is None and g.introduced.worst is None
            assert isinstance(f.introduced.mean_abs, float) and isinstance(f.introduced.worst, tuple)
            assert _others(f.introduced) == _others(g.introduced)
        if f.metrics is None:
            assert g.metrics is None
            continue
        assert _others(f.metrics) == _others(g.metrics), f.pair.a.name
        assert g.metrics.max_rel is None and g.metrics.mean_abs is None and g.metrics.worst is None
        assert all(g.metrics.to_dict()[k] is None for k in ("max_rel", "mean_abs", "worst_index"))  # JSON null
        x, y = va.get(f.pair.a.name), vb.get(f.pair.b.name)
        if x is None or y is None or x.dtype != np.float32:
            continue
        d = np.abs(x.astype(np.float64) - y.astype(np.float64))
        want_mean = d.mean()
        want_rel = (d / np.maximum(np.abs(y.astype(np.float64)), 1e-45)).max()  # float32's smallest subnormal
        want_rel = want_rel if want_rel <= np.finfo(np.float32).max else math.inf  # a float32 quotient overflows
        assert isinstance(f.metrics.mean_abs, float) and isinstance(f.metrics.max_rel, float)
        assert f.metrics.mean_abs == pytest.approx(want_mean, rel=2e-5, abs=1e-12), f.pair.a.name
        assert f.metrics.max_rel == pytest.approx(want_rel, rel=1e-5), f.pair.a.name
        if x.shape == y.shape and x.size:  # the worst element: the first largest float32 |a - b|, as ArgMax takes it
            assert f.metrics.worst == tuple(int(i) for i in np.unravel_index(int(np.abs(x - y).argmax()), x.shape))
        checked += 1
    assert checked >= 3


def test_light_graph_has_fewer_nodes(tmp_path, monkeypatch):
    monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (0, 0))
    built = []
    real = measure.build_cached

    def spy(*args, **kw):
        fg = real(*args, **kw)
        built.append(fg)
        return fg

    monkeypatch.setattr(measure, "build_cached", spy)
    a, b, feeds = _perturbed("cnn", tmp_path), str(sample_path("cnn")), sample_feeds("cnn")
    _diff(a, b, feeds, True)
    _diff(a, b, feeds, False)
    full, light = built
    assert full.extras and not light.extras
    rows = sum(1 for o in full.outputs if o.endswith(".max") and not o.endswith("i.max"))
    assert rows >= 5
    n_full, n_light = len(full.model.graph.node), len(light.model.graph.node)
    # per row: Max(|b|, tiny), Div, ReduceMax (max rel) and Σ|d|'s partial ReduceSum, at least
    assert n_full - n_light >= 4 * rows, (n_full, n_light, rows)


def test_a_criterion_judged_by_max_rel_keeps_it(tmp_path, monkeypatch):
    monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (0, 0))
    a, b, feeds = _perturbed("mlp", tmp_path), str(sample_path("mlp")), sample_feeds("mlp")
    for rtol, passed in ((1e9, True), (1e-9, False)):
        tol = api.Tolerance("max_rel", rtol=rtol)
        full, light = _diff(a, b, feeds, True, tolerance=tol), _diff(a, b, feeds, False, tolerance=tol)
        assert all(r.metrics.max_rel is not None for r in light.results if r.metrics is not None)
        assert [r.passed for r in light.results] == [r.passed for r in full.results]
        assert any(r.passed is passed for r in light.results)
        assert [r.metrics.max_rel for r in light.results] == [r.metrics.max_rel for r in full.results]


def test_separate_runs_measure_them_as_ever(tmp_path):
    a, b, feeds = _perturbed("mlp", tmp_path), str(sample_path("mlp")), sample_feeds("mlp")
    res = _diff(a, b, feeds, False, fuse=False)
    assert all(r.metrics.max_rel is not None and r.metrics.mean_abs is not None for r in res.results if r.metrics)


@pytest.mark.parametrize("how", ["not mergeable", "the one run fails"])
def test_a_light_diff_that_falls_back_to_separate_runs_reports_what_they_measured(how, tmp_path, monkeypatch):
    """A light diff whose one run cannot be (the models cannot share a graph) or fails: the separate runs
    measure every metric, and the results hold them (not None, as if they were not measured), equal to a full
    diff's in separate runs."""
    from onnxprobe.compare.fused import NotMergeable
    from onnxprobe.errors import ExecutionError

    a, b, feeds = _perturbed("mlp", tmp_path), str(sample_path("mlp")), sample_feeds("mlp")
    if how == "not mergeable":
        def refuse(*args, **kw):
            raise NotMergeable("a test's refusal")
        monkeypatch.setattr(measure, "build_cached", refuse)
    else:
        def fail(*args, **kw):
            raise ExecutionError("a test's failure")
        monkeypatch.setattr(measure, "run", fail)
        monkeypatch.setattr(measure, "runtime_shapes", lambda *args, **kw: {})
    light = _diff(a, b, feeds, False)
    apart = _diff(a, b, feeds, True, fuse=False)
    assert light.in_graph == 0 and any("separate runs" in n or "run apart" in n for n in light.notes), light.notes
    got = [r.metrics for r in light.results if r.metrics is not None]
    assert got and all(m.max_rel is not None and m.mean_abs is not None and m.worst is not None for m in got)
    assert [repr(vars(r.metrics)) for r in light.results if r.metrics] == [repr(vars(r.metrics)) for r in apart.results if r.metrics]


def test_extras_is_a_switch(tmp_path):
    with pytest.raises(api.UsageError, match="extras"):
        api.diff(str(sample_path("mlp")), str(sample_path("mlp")), extras="no")


def _cli(*args, env=None):
    r = runner.invoke(app, ["diff", *map(str, args), "--device", "cpu", "--all"], env=env)
    return r


def test_cli_table_is_the_full_runs_and_written_reports_have_numbers(tmp_path, monkeypatch):
    monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (0, 0))
    monkeypatch.setenv("ONNXPROBE_NO_CACHE", "1")
    calls = []
    real = api.diff

    def spy(*args, **kw):
        calls.append(kw.get("extras", True))
        return real(*args, **kw)

    monkeypatch.setattr(api, "diff", spy)
    a, b = _perturbed("cnn", tmp_path), sample_path("cnn")
    light = _cli(a, b, "--format", "csv")
    out = tmp_path / "r.json"
    full = _cli(a, b, "--format", "csv", "--json", out)
    assert calls == [False, True]
    assert light.exit_code == full.exit_code and light.stdout == full.stdout
    assert "max_rel" not in light.stdout.splitlines()[0]
    pairs = json.loads(out.read_text())["pairs"]
    assert pairs and all(isinstance(p["max_rel"], (float, str)) and isinstance(p["mean_abs"], float)
                         for p in pairs if p["count"])
    # --columns max_rel: its numbers (not "-")
    cols = _cli(a, b, "--format", "csv", "--columns", "tensor,max_rel,pass")
    assert calls[-1] is True
    rows = [line.split(",") for line in cols.stdout.splitlines()[1:] if line]
    assert rows and all(math.isfinite(float(r[1])) or r[1] in ("inf", "nan") for r in rows)
    table = _cli(a, b)
    assert calls[-1] is False and table.exit_code == light.exit_code and "max rel" not in table.stdout
    assert table.stdout == _cli(a, b, "--json", tmp_path / "t.json").stdout


def test_cli_metric_max_rel_judges_by_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ONNXPROBE_NO_CACHE", "1")
    a, b = _perturbed("mlp", tmp_path), sample_path("mlp")
    for rtol, code in (("1e9", 0), ("1e-9", 1)):
        r = _cli(a, b, "--metric", "max_rel", "--rtol", rtol, "--format", "csv")
        assert r.exit_code == code, r.output
        header, *rows = [line.split(",") for line in r.stdout.splitlines() if line]
        k = header.index("max_rel")
        assert rows and all(x[k] not in ("", "-") for x in rows)


def test_cache_light_entry_never_serves_a_full_run(tmp_path, monkeypatch):
    monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (0, 0))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    a, b = _perturbed("cnn", tmp_path), sample_path("cnn")
    assert _cli(a, b).exit_code in (0, 1)
    out = tmp_path / "r.json"
    _cli(a, b, "--json", out)
    pairs = json.loads(out.read_text())["pairs"]
    assert pairs and all(p["max_rel"] is not None and p["mean_abs"] is not None for p in pairs if p["count"])
    # and the full entry does not serve a light run either (its rows would be read in the wrong layout)
    _cli(a, b, "--json", out)
    light = _cli(a, b, "--format", "csv")
    full = _cli(a, b, "--format", "csv", "--json", tmp_path / "s.json")
    assert light.stdout == full.stdout


def test_light_numbers_are_the_full_ones_on_rows_past_block_max(tmp_path, monkeypatch):
    """Tensors of 3 rows of 17000 elements (past BLOCK_MAX: float64 sums, three partials per term): a light
    diff's RMSE, cosine and SQNR, and its introduced error's, are the full diff's bit for bit (they were off in
    the last bits: onnxruntime's float64 row sums round by where the row starts, and the light rows, without
    Σ|d| first, moved every term up one row), and the full diff's cosine is numpy float64's."""
    from onnx import TensorProto, helper

    monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (0, 0))

    def model(path, w, c):
        inits = [numpy_helper.from_array(np.array(w, np.float32), "w"), numpy_helper.from_array(np.array(c, np.float32), "c")]
        nodes = [helper.make_node("Mul", ["x", "w"], ["xw"], name="mul"), helper.make_node("Add", ["xw", "c"], ["y"], name="add"),
                 helper.make_node("Relu", ["y"], ["z"], name="relu")]
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "n"])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
        onnx.save(m, str(path))
        return str(path)

    a, b = model(tmp_path / "a.onnx", 1.001, 0.01), model(tmp_path / "b.onnx", 1.0, 0.0)
    feeds = {"x": (np.random.default_rng(0).standard_normal((3, 17000)) * 3).astype(np.float32)}
    full, light = _diff(a, b, feeds, True), _diff(a, b, feeds, False)
    assert light.in_graph == full.in_graph >= 3
    va, vb = _values(a, feeds), _values(b, feeds)
    for f, g in zip(full.results, light.results):
        assert _others(f.metrics) == _others(g.metrics), f.pair.a.name
        assert (f.introduced is None) == (g.introduced is None)
        if f.introduced is not None:
            assert _others(f.introduced) == _others(g.introduced), f.pair.a.name
        x, y = va[f.pair.a.name].astype(np.float64).ravel(), vb[f.pair.b.name].astype(np.float64).ravel()
        assert f.metrics.cosine == pytest.approx((x @ y) / math.sqrt((x @ x) * (y @ y)), rel=1e-12)
