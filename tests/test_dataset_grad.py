"""`grad --inputs-dir`: the gradients of a dataset's loss. Oracle: one run on the samples concatenated
along the batch axis (a model with no cross-sample ops: its summed loss is the sum of the samples'
losses), through the single-input `grad`, whose gradients the other tests check against torch."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()
STATS = ("norm", "min", "max", "mean", "std", "count")


def _run(*args, code=(0,)):
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code in code, r.output
    return r


@pytest.mark.parametrize("reduce,which,kinds", [("sum", ["--all"], {"weight", "activation", "input"}),
                                               ("mean", ["--all"], {"weight", "activation", "input"}),
                                               ("mean", ["--wrt", "x"], {"input"})])
def test_dataset_gradients_equal_one_run_on_the_concatenated_samples(tmp_path, reduce, which, kinds):
    rng = np.random.default_rng(5)
    xs = [rng.normal(size=(n, 3, 8, 8)).astype(np.float32) for n in (2, 1, 3)]  # batches of other sizes
    ds = tmp_path / "ds"
    ds.mkdir()
    for i, x in enumerate(xs):
        np.save(tmp_path / f"x{i}.npy", x)
        np.savez(ds / f"b{i}.npz", x=x)
    np.save(tmp_path / "all.npy", np.concatenate(xs))
    got = json.loads(_run("grad", sample_path("dynamic_batch"), *which, "--inputs-dir", ds, "--reduce", reduce,
                          "--json", "-").stdout)
    ref = json.loads(_run("grad", sample_path("dynamic_batch"), *which, "--input", f"x={tmp_path / 'all.npy'}",
                          "--json", "-").stdout)
    assert (got["samples"], got["reduce"], got["executor"]) == (3, reduce, {"engine": "local"})
    f = 1 / 3 if reduce == "mean" else 1.0
    assert got["loss"]["value"] == pytest.approx(ref["loss"]["value"] * f, rel=1e-6)
    by_name = {g["tensor"]: g for g in ref["gradients"]}
    seen = set()
    for g in got["gradients"]:
        r = by_name[g["tensor"]]
        seen.add(g["kind"])
        for k in STATS:
            want = r[k] if k == "count" else r[k] * f
            scale = max(abs(r["max"]), abs(r["min"])) * f
            assert g[k] == pytest.approx(want, rel=1e-5, abs=1e-6 * scale), (g["tensor"], k)
        assert g["value_norm"] == pytest.approx(r["value_norm"], rel=1e-6), g["tensor"]
    assert seen == kinds


def test_saved_dataset_gradients_are_the_sums(tmp_path):
    rng = np.random.default_rng(6)
    ds = tmp_path / "ds"
    ds.mkdir()
    xs = [rng.normal(size=(1, 3, 8, 8)).astype(np.float32) for _ in range(3)]
    for i, x in enumerate(xs):
        np.savez(ds / f"b{i}.npz", x=x)
    _run("grad", sample_path("dynamic_batch"), "--inputs-dir", ds, "--save-grads", tmp_path / "g.npz", "--json", tmp_path / "g.json")
    saved = dict(np.load(tmp_path / "g.npz"))
    each = []
    for i, x in enumerate(xs):
        np.save(tmp_path / f"x{i}.npy", x)
        _run("grad", sample_path("dynamic_batch"), "--input", f"x={tmp_path / f'x{i}.npy'}", "--save-grads", tmp_path / f"g{i}.npz")
        each.append(dict(np.load(tmp_path / f"g{i}.npz")))
    weights = [g["tensor"] for g in json.loads((tmp_path / "g.json").read_text())["gradients"] if g["kind"] == "weight"]
    assert weights and set(weights) <= set(saved)
    for w in weights:
        np.testing.assert_allclose(saved[w], sum(e[w].astype(np.float64) for e in each), rtol=1e-6, atol=1e-7)


def test_dataset_losses_are_sum_or_mean(tmp_path):
    ds = tmp_path / "ds"
    ds.mkdir()
    np.savez(ds / "b0.npz", x=np.ones((1, 3, 8, 8), np.float32))
    np.save(tmp_path / "t.npy", np.ones((1, 4), np.float32))
    r = _run("grad", sample_path("dynamic_batch"), "--inputs-dir", ds, "--loss", "mse", "--target", tmp_path / "t.npy", code=(2,))
    assert "--target holds one input's values" in r.stderr
    r = _run("grad", sample_path("dynamic_batch"), "--inputs-dir", ds, "--reduce", "max", code=(2,))
    assert "--reduce" in r.stderr
    r = _run("grad", sample_path("dynamic_batch"), "--reduce", "mean", code=(2,))
    assert "--inputs-dir" in r.stderr


def test_inputs_from_a_pipeline_is_the_same_dataset(tmp_path):
    """grad --inputs-from FILE.py:FUNC (as layers and diff take it), and api.grad_dataset(inputs_from=) with
    the feed dicts in memory: the same gradients as --inputs-dir over the same batches (whose gradients the
    test above checks against one run on the samples put together); --check of one input is refused."""
    from onnxprobe import api

    rng = np.random.default_rng(7)
    xs = [rng.normal(size=(n, 3, 8, 8)).astype(np.float32) for n in (2, 1)]
    ds = tmp_path / "ds"
    ds.mkdir()
    for i, x in enumerate(xs):
        np.savez(ds / f"b{i}.npz", x=x)
    pipe = tmp_path / "pipe.py"
    pipe.write_text("import numpy as np\n"
                    f"def batches():\n    for i in range({len(xs)}):\n"
                    f"        yield {{'x': np.load({str(ds)!r} + f'/b{{i}}.npz')['x']}}\n")
    model = sample_path("dynamic_batch")
    want = json.loads(_run("grad", model, "--all", "--inputs-dir", ds, "--reduce", "mean", "--json", "-").stdout)
    got = json.loads(_run("grad", model, "--all", "--inputs-from", f"{pipe}:batches", "--reduce", "mean", "--json", "-").stdout)
    assert got["samples"] == want["samples"] == 2 and got["loss"]["value"] == pytest.approx(want["loss"]["value"], rel=1e-12)
    for g, w in zip(got["gradients"], want["gradients"]):
        assert g["tensor"] == w["tensor"] and all(g[k] == pytest.approx(w[k], rel=1e-9, abs=1e-12) for k in STATS)
    res = api.grad_dataset(model, inputs_from=[{"x": x} for x in xs], reduce="mean")
    assert res.samples == 2 and res.loss == pytest.approx(want["loss"]["value"], rel=1e-12)
    r = _run("grad", model, "--inputs-from", f"{pipe}:batches", "--check", code=(2,))
    assert "--check is of one input" in r.stderr


def test_a_bad_first_sample_is_named_as_a_later_one_is(tmp_path):
    """grad makes its plan from the first sample: a wrong dtype there said "input x (from the dataset): ..."
    naming no sample, where layers and diff name it."""
    ds = tmp_path / "ds"
    ds.mkdir()
    np.savez(ds / "a0.npz", x=np.zeros((4, 16)))  # float64
    np.savez(ds / "a1.npz", x=np.zeros((4, 16), np.float32))
    r = _run("grad", sample_path("mlp"), "--inputs-dir", ds, code=(2,))
    assert "a0.npz: input x" in r.stderr and "float64" in r.stderr, r.output
    (tmp_path / "p.py").write_text("import numpy as np\ndef items():\n    yield {'x': np.zeros((4, 16))}\n")
    r = _run("grad", sample_path("mlp"), "--inputs-from", f"{tmp_path / 'p.py'}:items", code=(2,))
    assert "item 0: input x" in r.stderr, r.output


def test_grad_over_a_dataset_writes_its_html_report(tmp_path):
    """grad --inputs-dir --html failed after the run ('y' is not a tensor whose gradient this result holds):
    a dataset's result holds the weights' summed gradients, whose histograms the report draws."""
    pytest.importorskip("plotly")
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    (tmp_path / "ds").mkdir()
    for i in range(2):
        np.savez(tmp_path / "ds" / f"b{i}.npz", x=np.random.default_rng(i).random((4, 16)).astype(np.float32))
    page = tmp_path / "g.html"
    r = CliRunner().invoke(app, ["grad", str(sample_path("mlp")), "--inputs-dir", str(tmp_path / "ds"), "--html", str(page)])
    assert r.exit_code == 0 and page.is_file(), r.output
