"""api.report: what `--json` writes of a result, from Python: a notebook's result as a plain dict that
json.dumps writes (jq reads it), the same as the command line's report."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError

MLP = str(sample_path("mlp"))


def dumps(d) -> dict:
    return json.loads(json.dumps(d, allow_nan=False))  # plain JSON: no numpy scalars, no NaN


@pytest.fixture()
def dataset(tmp_path):
    rng = np.random.default_rng(0)
    m = api.load(MLP)
    vi = m.proto.graph.input[0]
    dims = [d.dim_value or 2 for d in vi.type.tensor_type.shape.dim]
    for j in range(2):
        api.save_npz({vi.name: rng.standard_normal(dims).astype(np.float32)}, tmp_path / f"b{j}.npz")
    return tmp_path


def test_every_result_is_its_json_report(tmp_path, dataset):
    results = {
        "layers": api.layers(MLP, api.Selection(all=True)),
        "dataset": api.layers_dataset(MLP, dataset, api.Selection(all=True)),
        "diff": api.diff(MLP, vs_reference=True),
        "diff_dataset": api.diff_dataset(MLP, inputs=dataset, vs_reference=True),
        "grad": api.grad(MLP),
        "inspect": api.inspect(MLP),
        "mark": api.mark(MLP, tmp_path / "m.onnx", api.Selection(all=True)),
        "extract": api.extract(MLP, tmp_path / "e.onnx", None, api.inspect(MLP).summary.outputs[0].name),
    }
    for kind, res in results.items():
        d = api.report(res)
        assert dumps(d) == d, kind
    assert [t["name"] for t in api.report(results["dataset"])["tensors"]] == [
        t["name"] for t in api.report(results["layers"])["tensors"]]
    assert "sample_digests" in api.report(results["dataset"]) and "samples" in api.report(results["diff_dataset"])
    assert api.report(results["mark"])["exposed"] and api.report(results["extract"])["written"].endswith("e.onnx")


def test_the_report_is_what_the_command_line_writes(tmp_path, dataset):
    out = tmp_path / "r.json"
    r = CliRunner().invoke(app, ["layers", MLP, "--all", "--inputs-dir", str(dataset), "--json", str(out)])
    assert r.exit_code == 0, r.output
    cli = json.loads(out.read_text())
    mine = api.report(api.layers_dataset(MLP, dataset, api.Selection(all=True)))
    assert [t["moments"] for t in mine["tensors"]] == [t["moments"] for t in cli["tensors"]]


def test_anything_else_is_refused_in_one_line():
    with pytest.raises(UsageError, match="report") as e:
        api.report({"a": 1})
    assert "\n" not in str(e.value)


def test_sorted_diff_and_profiled_layers_reports_are_the_command_lines(tmp_path):
    """`diff --sort introduced --json` and `layers --profile --json` wrote reports api.report could not:
    it took no order and no profile, so a notebook got the pairs in model order and no kernel times."""
    cnn = str(sample_path("cnn"))
    out = tmp_path / "d.json"
    r = CliRunner().invoke(app, ["diff", cnn, "--vs-reference", "--all", "--sort", "accumulated", "--json", str(out)])
    assert r.exit_code == 0, r.output
    cli = json.loads(out.read_text())
    res = api.diff(cnn, vs_reference=True, selection=api.Selection(all=True))
    mine = api.report(res, sort="accumulated")
    assert [p["a"] for p in mine["pairs"]] == [p["a"] for p in cli["pairs"]]
    assert [p["a"] for p in mine["pairs"]] == [r.pair.a.name for r in api.sort_results(res.results, "accumulated")]
    assert [p["a"] for p in api.report(res)["pairs"]] == [r.pair.a.name for r in res.results]  # topo, the default

    m = api.load(cnn)
    lay = api.layers(m)
    prof = api.profile_layers(m, lay, lay.feed)
    d = api.report(lay, profile=prof)
    assert dumps(d) == d and set(d["profile"]) >= {"plain_ms", "probed_ms", "probe_overhead_ms", "runs"}
    assert all("kernel_ms" in t for t in d["tensors"])
    r = CliRunner().invoke(app, ["layers", cnn, "--profile", "--json", str(out)])
    assert r.exit_code == 0, r.output
    cli = json.loads(out.read_text())
    assert set(cli["profile"]) == set(d["profile"]) and set(cli["tensors"][0]) == set(d["tensors"][0])

    for bad in (lambda: api.report(lay, sort="introduced"), lambda: api.report(res, sort="depth"),
                lambda: api.report(res, profile=prof), lambda: api.report(lay, profile={"a": 1})):
        with pytest.raises(UsageError) as e:
            bad()
        assert "\n" not in str(e.value)
