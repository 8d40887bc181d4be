"""api.html, api.overlay and api.netron: the --html page, the Model Explorer overlay and the Netron attachment
of a result, from Python; the command line writes what they return (one path: a notebook gets the files the
command writes). Checked against the command's own files, and on the node ids Model Explorer's ONNX adapter
gives (tests/test_overlay.py's oracle)."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe import api
from onnxprobe.api.reports import command_line_words
from onnxprobe.cli.main import app
from test_overlay import adapter_ids

runner = CliRunner()


def _cli(args):
    r = runner.invoke(app, [str(a) for a in args], env={"NO_COLOR": "1"})
    assert r.exit_code in (0, 1), r.output
    return r


def _drop_times(page: str) -> str:
    """The page without what differs between two runs (seconds, dates)."""
    return re.sub(r"\d+(\.\d+)? ?(ms|s)\b", "T", page)


@pytest.mark.parametrize("kind", ["layers", "diff", "grad"])
def test_overlay_and_netron_are_the_commands_files(tmp_path, kind):
    model = sample_path("cnn")
    if kind == "layers":
        res, args = api.layers(model, api.Selection(all=True)), ["layers", model, "--all"]
    elif kind == "diff":
        res, args = api.diff(model, model, selection=api.Selection(all=True)), ["diff", model, model, "--all"]
    else:
        res, args = api.grad(model), ["grad", model]
    ov, nt = tmp_path / "ov.json", tmp_path / "nt.json"
    _cli(args + ["--overlay", ov, "--netron", nt])
    kw = {"model": model} if kind == "grad" else {}
    with command_line_words():  # the command's files say its advice in its words (the API's: test_api_verdict_words)
        got_ov = json.loads(json.dumps(api.overlay(res, **kw)))
        got_nt = json.loads(json.dumps(api.netron(res, **kw)))
    assert got_ov == json.loads(ov.read_text()) and got_nt == json.loads(nt.read_text())
    # every node id it colours is one Model Explorer's adapter gives the model
    ids = adapter_ids(model)
    coloured = [(g, n) for g, d in got_ov.items() for n in (d.get("results") or {})]
    assert coloured and all(n in ids.get(g, ()) for g, n in coloured), coloured[:5]


def test_html_is_the_commands_page_and_written_where_asked(tmp_path):
    pytest.importorskip("plotly", reason="the HTML report needs plotly (the test extra has it)")
    model = sample_path("cnn")
    res = api.diff(model, model, selection=api.Selection(all=True))
    page = api.html(res)
    assert page.lstrip().lower().startswith("<!doctype html") and "conv" in page.lower()
    out = tmp_path / "r.html"
    assert api.html(res, out) == out.read_text(encoding="utf-8")
    cli = tmp_path / "cli.html"
    _cli(["diff", model, model, "--all", "--html", cli])
    # the command adds the histograms of the worst rows and the inputs in words: without them, the same table
    hist_free = api.html(res, histograms={}, inputs=None)
    assert _drop_times(hist_free).count("<tr") == _drop_times(cli.read_text(encoding="utf-8")).count("<tr")


def test_wrong_results_and_models_are_one_usage_error(tmp_path):
    model = sample_path("cnn")
    res = api.grad(model)
    with pytest.raises(api.UsageError, match="needs the model"):
        api.overlay(res)
    with pytest.raises(api.UsageError, match="inputs: the inputs in words"):
        api.html(res, inputs=api.InputSpec())
    with pytest.raises(api.UsageError, match="histograms: a dict"):
        api.html(res, histograms=[1, 2])
    for bad in (None, {"pairs": []}, np.zeros(3), api.inspect(model)):
        for f in (api.html, api.overlay, api.netron):
            with pytest.raises(api.UsageError, match="expected the result of api.layers"):
                f(bad)
    with pytest.raises(api.ModelError, match="no such file"):
        api.overlay(api.layers(model), model=tmp_path / "missing.onnx")
    proto = onnx.load(str(model))
    before = proto.SerializeToString()
    api.overlay(api.layers(model), model=proto)
    assert proto.SerializeToString() == before


@pytest.mark.parametrize("kind", ["layers", "diff", "grad", "inspect"])
@pytest.mark.parametrize("width", [60, 80])
def test_text_is_what_the_command_prints(kind, width):
    """api.text: the report a command prints, for a notebook's print(); the command's stdout on a pipe at
    that width is the oracle (same table, header and footer lines)."""
    model = sample_path("cnn")
    res, args = {"layers": lambda: (api.layers(model, api.Selection(all=True)), ["layers", model, "--all"]),
                 "diff": lambda: (api.diff(model, model), ["diff", model, model]),
                 "grad": lambda: (api.grad(model), ["grad", model]),
                 "inspect": lambda: (api.inspect(model), ["inspect", model])}[kind]()
    r = runner.invoke(app, [str(a) for a in args], env={"NO_COLOR": "1", "COLUMNS": str(width)})
    assert r.exit_code == 0, r.output
    with command_line_words():  # the command's advice in its words; the API's in its own (below)
        mine = api.text(res, width=width)
    if kind == "diff":
        assert "tolerance=Tolerance(" in api.text(res, width=200) and "tolerance=Tolerance(" not in mine
    strip = lambda t: [ln for ln in re.sub(r"\d+(\.\d+)? ?(µs|ms|s)\b", "T", t).splitlines() if ln.strip()]  # noqa: E731
    assert strip(mine) == strip(r.stdout)
    assert all(len(ln) <= width for ln in mine.splitlines())


def test_text_formats_and_bad_arguments():
    model = sample_path("cnn")
    res = api.layers(model, api.Selection(all=True))
    csv = api.text(res, format="csv", columns=["tensor", "mean"])
    rows = [ln.split(",") for ln in csv.strip().splitlines()]
    assert rows[0] == ["tensor", "mean"] and len(rows) == 1 + len(list(res.rows()))
    ref = dict(res.rows())
    means = {r.name: s.mean for r, s in ref.items()} if hasattr(next(iter(ref)), "name") else {}
    assert means and all(name in means for name, _ in rows[1:]), (rows, means)
    for name, mean in rows[1:]:
        if name in means:
            assert float(mean) == pytest.approx(means[name], rel=1e-3, abs=1e-6)
    for bad in ({"width": 5}, {"width": "80"}, {"format": "html"}, {"columns": ["no-such-column"]}, {"wide": "no"}):
        with pytest.raises(api.UsageError):
            api.text(res, **bad)
    with pytest.raises(api.UsageError, match="expected the result of api.layers"):
        api.text({"tensors": []})


@pytest.mark.parametrize("width", [20, 40, 80])
def test_text_wide_is_the_commands_wide(width):
    """wide=True is --wide: every column kept and no row folded onto the next line, whatever the width
    (the command's --wide output, the oracle, is the same at every $COLUMNS)."""
    model = sample_path("cnn")
    res = api.layers(model, api.Selection(all=True))
    r = runner.invoke(app, ["layers", str(model), "--all", "--wide"], env={"NO_COLOR": "1", "COLUMNS": str(width)})
    assert r.exit_code == 0, r.output
    mine = api.text(res, width=width, wide=True)
    no_times = lambda t: re.sub(r"\d+(\.\d+)? ?(µs|ms|s)\b", "T", t)  # noqa: E731
    assert no_times(mine) == no_times(r.stdout)
    names = [ref.name for ref, _ in res.rows()]
    # a line per tensor, its name and its numbers on it: no row folded onto the next line
    assert all(sum(f"  {n}  " in ln and ln.rstrip().endswith("0") for ln in mine.splitlines()) >= 1 for n in names)


def test_text_columns_as_the_flag_takes_them():
    """columns as --columns takes them: a string of comma-separated keys, or a list (whose items may hold
    several); a string was read as a list of its characters ("no column 't'"). Oracle: the command's
    --columns tensor,mean output."""
    model = sample_path("cnn")
    res = api.layers(model, api.Selection(all=True))
    r = runner.invoke(app, ["layers", str(model), "--all", "--columns", "tensor,mean", "--format", "csv"],
                      env={"NO_COLOR": "1", "COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0] == "tensor,mean"
    for cols in ("tensor,mean", "tensor, mean", ["tensor", "mean"], ["tensor,mean"], ("tensor", "mean")):
        assert api.text(res, format="csv", columns=cols) == r.stdout, cols
    for bad in ("tensor,,mean", [3], ["tensor", None]):
        with pytest.raises(api.UsageError, match="columns"):
            api.text(res, columns=bad)


def _chain(names: list[str]) -> onnx.ModelProto:
    from onnx import TensorProto, helper

    nodes, prev = [], "x"
    for i, n in enumerate(names):
        nodes.append(helper.make_node("Relu" if i % 2 else "Neg", [prev], [n], name=f"node_{n}"))
        prev = n
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [2, 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_overlay_on_another_model_colours_no_wrong_node():
    """api.overlay(result, model) of a model the result is not about coloured that model's first nodes with the
    result's numbers (a row's node index read in the other model): now one UsageError when the model holds
    none of the result's tensors, and a node is coloured only where it makes the row's tensor (the same
    tensors behind one more node, a graph tool's rewrite: each on its own producer, by name)."""
    names = ["a", "b", "c", "d"]
    res = api.layers(_chain(names), api.Selection(all=True))
    other = _chain(["p", "q", "r", "s"])
    with pytest.raises(api.UsageError, match="model"):
        api.overlay(res, other)
    with pytest.raises(api.UsageError, match="model"):
        api.netron(res, other)
    shifted = _chain(["pre", *names])  # every node of the result one index further on
    got = api.overlay(res, shifted)["g"]["results"]
    want = {f"node_{ref.name}": max(abs(t.min), abs(t.max)) for ref, t in res.rows()}
    assert {k: v["value"] for k, v in got.items()} == pytest.approx(want)
    assert api.overlay(res)["g"]["results"] == got  # as on its own model


def test_html_of_a_dataset_diff_says_it_is_pooled(tmp_path):
    """api.html of a diff_dataset result (drawn without histograms, which are of one input's tensors; `diff
    --inputs-dir --html` writes the same page): its facts said nothing of the dataset, so a page of metrics pooled
    over every sample read as one input's. It names the batches, as a layers_dataset page does."""
    pytest.importorskip("plotly", reason="the HTML report needs plotly (the test extra has it)")
    model = sample_path("cnn")
    x = onnx.load(str(model)).graph.input[0]
    shape = [d.dim_value or 1 for d in x.type.tensor_type.shape.dim]
    rng = np.random.default_rng(0)
    for k in range(3):
        np.savez(tmp_path / f"b{k}.npz", **{x.name: rng.standard_normal(shape).astype(np.float32)})
    res = api.diff_dataset(model, model, tmp_path)
    assert res.samples == 3
    facts = dict(re.findall(r"<dt>([^<]*)</dt><dd[^>]*>([^<]*)</dd>", api.html(res)))
    assert "3 batches" in facts.get("dataset", ""), facts
    layers = dict(re.findall(r"<dt>([^<]*)</dt><dd[^>]*>([^<]*)</dd>", api.html(api.layers_dataset(model, tmp_path))))
    assert "3 batches" in layers.get("dataset", ""), layers


def test_a_dataset_diff_writes_its_html_page(tmp_path):
    """`diff A B --inputs-dir DIR --html PAGE` was refused ('--html draws the histograms of one input's
    tensors'); it writes the page of the pooled metrics, as api.html draws it, naming the dataset."""
    pytest.importorskip("plotly", reason="the HTML report needs plotly (the test extra has it)")
    model = sample_path("cnn")
    x = onnx.load(str(model)).graph.input[0]
    shape = [d.dim_value or 1 for d in x.type.tensor_type.shape.dim]
    rng = np.random.default_rng(1)
    data = tmp_path / "data"
    data.mkdir()
    for k in range(2):
        np.savez(data / f"b{k}.npz", **{x.name: rng.standard_normal(shape).astype(np.float32)})
    page = tmp_path / "page.html"
    r = runner.invoke(app, ["diff", str(model), str(model), "--inputs-dir", str(data), "--html", str(page)])
    assert r.exit_code == 0, r.output
    facts = dict(re.findall(r"<dt>([^<]*)</dt><dd[^>]*>([^<]*)</dd>", page.read_text(encoding="utf-8")))
    assert "2 batches" in facts.get("dataset", ""), facts
    mine = api.html(api.diff_dataset(model, model, data), inputs=[f"dataset {data.name}"])
    assert _drop_times(mine).count("<tr") == _drop_times(page.read_text(encoding="utf-8")).count("<tr") > 1


@pytest.mark.parametrize("kind", ["layers", "diff"])
def test_text_of_merged_shards_is_what_merge_stats_prints(tmp_path, kind):
    """api.merge_stats returns the merged report as a dict: api.text prints it as `merge-stats` does."""
    model = sample_path("mlp")
    data = tmp_path / "d"
    data.mkdir()
    rng = np.random.default_rng(2)
    for k in range(2):
        np.savez(data / f"b{k}.npz", x=rng.standard_normal((4, 16)).astype(np.float32))
    shard = tmp_path / "s.json"
    args = ["layers", model] if kind == "layers" else ["diff", model, model]
    assert runner.invoke(app, [str(a) for a in args] + ["--inputs-dir", str(data), "--json", str(shard)]).exit_code == 0
    r = runner.invoke(app, ["merge-stats", str(shard)], env={"NO_COLOR": "1", "COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    mine = api.text(api.merge_stats([shard]), width=80)
    strip = lambda t: [ln for ln in t.splitlines() if ln.strip()]  # noqa: E731
    assert strip(mine) == strip(r.stdout) and len(strip(mine)) > 3


def test_a_grad_result_without_its_model_names_the_function_asked():
    """api.netron of a grad result without its model said "... (api.overlay(result, model))": each names itself."""
    from onnxprobe.errors import UsageError

    r = api.grad(sample_path("mlp"))
    for fn, name in ((api.netron, "netron"), (api.overlay, "overlay")):
        with pytest.raises(UsageError, match=rf"the {name} of a grad result .*api\.{name}\(result, model\)"):
            fn(r)
