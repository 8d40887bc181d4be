"""The debugger's `diff` takes the criterion flags of `onnxprobe diff` (--metric, --atol, --rtol, --min-sqnr,
--min-cosine; --atol/--rtol NAME:VALUE for one tensor), with the same meaning and the same verdicts. It
refused them as unknown options while its own report said "--metric, --atol, --rtol change it". QA."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
SHIFT = {"s": 0.01, "y": 0.002}  # what B's constants differ by (max|a-b| of s; of y, both): known without onnxprobe


def shifted(path, ds: float, dy: float) -> str:
    """x -> Add(c1) -> s -> Add(c2) -> y; B is the same with c1 + ds and c2 + dy."""
    vi = helper.make_tensor_value_info
    c1 = numpy_helper.from_array(np.full([2, 4], 1.0 + ds, np.float32), "c1")
    c2 = numpy_helper.from_array(np.full([2, 4], 0.5 + dy, np.float32), "c2")
    nodes = [helper.make_node("Add", ["x", "c1"], ["s"], name="add1"), helper.make_node("Add", ["s", "c2"], ["y"], name="add2")]
    onnx.save(make_model(nodes, [vi("x", TensorProto.FLOAT, [2, 4])], [vi("y", TensorProto.FLOAT, [2, 4])], [c1, c2]), str(path))
    return str(path)


@pytest.fixture()
def pair(tmp_path):
    return shifted(tmp_path / "a.onnx", 0.0, 0.0), shifted(tmp_path / "b.onnx", -SHIFT["s"], -SHIFT["y"])


def verdicts(report: dict) -> dict[str, bool]:
    return {p["a"]: p["passed"] for p in report["pairs"]}


def judged(max_abs: float, atol: float) -> bool:
    return max_abs <= atol + 1e-6  # float32 rounding of the constants; the thresholds below are far from it


@pytest.mark.parametrize("flags", [[], ["--atol", "0.05"], ["--atol", "0.005"], ["--atol", "0.005", "--atol", "y:0.05"],
                                   ["--metric", "max_abs", "--atol", "0.015"], ["--metric", "cosine"], ["--min-sqnr", "20"]])
def test_debug_diff_takes_the_criterion_flags_of_diff(pair, flags, tmp_path):
    a, b = pair
    cli = runner.invoke(app, ["diff", a, b, "--all", *flags, "--json", str(tmp_path / "cli.json")], env=ENV)
    assert cli.exit_code in (0, 1), cli.output
    r = runner.invoke(app, ["debug", a, b, "--script", "-"], env=ENV,
                      input=f"diff --all {' '.join(flags)} --json {tmp_path / 'dbg.json'}\n")
    assert r.exit_code == cli.exit_code, r.output  # a failing verdict fails the script as it fails the command
    want, got = json.loads((tmp_path / "cli.json").read_text()), json.loads((tmp_path / "dbg.json").read_text())
    assert verdicts(got) == verdicts(want) and got["criterion"] == want["criterion"] and got["verdict"] == want["verdict"]
    if flags[:1] == ["--atol"]:  # the oracle: each tensor's max|a-b| against its tolerance (y's own where given)
        atol = {"s": float(flags[1]), "y": float(flags[-1].partition(":")[2] if "y:" in flags[-1] else flags[1])}
        ys = verdicts(got)
        assert ys["s"] == judged(SHIFT["s"], atol["s"]) and ys["y"] == judged(SHIFT["s"] + SHIFT["y"], atol["y"]), got["pairs"]


def test_debug_diff_criteria_change_the_table_and_what_diff_caches(pair):
    a, b = pair
    r = runner.invoke(app, ["debug", a, b, "--script", "-"], env=ENV,
                      input="diff --all --format csv --columns tensor,pass\ndiff --all --atol 0.05 --format csv --columns tensor,pass\n"
                            "diff --all --format csv --columns tensor,pass\n")
    assert r.exit_code == 1, r.output  # two of the diffs fail (a failing verdict fails the script, as the command)
    rows = [line for line in r.stdout.splitlines() if line.startswith(("s,", "y,"))]
    assert [row.split(",")[1] for row in rows] == ["false", "false", "true", "true", "false", "false"], r.stdout


@pytest.mark.parametrize("flags", [["--metric", "bogus"], ["--atol", "-1"], ["--atol", "x"], ["--metric", "cosine", "--atol", "0.1"],
                                   ["--min-sqnr", "20", "--min-cosine", "0.9"], ["--atol", "0.1", "--atol", "0.2"]])
def test_debug_diff_refuses_bad_criteria_as_diff_does(pair, flags):
    a, b = pair
    cli = runner.invoke(app, ["diff", a, b, *flags], env=ENV)
    r = runner.invoke(app, ["debug", a, b, "--script", "-"], env=ENV, input="diff " + " ".join(flags) + "\n")
    assert cli.exit_code == 2 and r.exit_code == 1, (cli.output, r.output)
    said = cli.output.strip().splitlines()[-1].removeprefix("onnxprobe: error: ")
    assert f"onnxprobe: error: line 1: {said}" in r.output, (said, r.output)
    assert "Traceback" not in r.output


def test_debug_diff_shows_the_judged_metric_column_as_diff_does(pair):
    a, b = pair
    flags = ["--all", "--metric", "rmse", "--atol", "0.011", "--format", "csv", "--columns", "tensor,rmse,pass"]
    cli = runner.invoke(app, ["diff", a, b, *flags], env=ENV)
    r = runner.invoke(app, ["debug", a, b, "--script", "-"], env=ENV, input="diff " + " ".join(flags) + "\n")
    assert cli.exit_code == 1 and r.exit_code == 1, (cli.output, r.output)
    rows = {line.split(",")[0]: line.split(",")[1:] for line in r.stdout.splitlines() if line.startswith(("s,", "y,"))}
    assert rows == {line.split(",")[0]: line.split(",")[1:] for line in cli.stdout.splitlines() if line.startswith(("s,", "y,"))}
    for name, shift in (("s", SHIFT["s"]), ("y", SHIFT["s"] + SHIFT["y"])):  # every element differs by the shift
        assert abs(float(rows[name][0]) - shift) < 1e-6 and rows[name][1] == ("true" if shift <= 0.011 else "false"), rows


def test_match_of_a_mistyped_name_suggests_the_compared_tensor(pair):
    """`show fetch_nam` said "did you mean 'fetch_name_0'?"; `match fetch_nam` only "is not a compared tensor"."""
    a, b = pair
    r = runner.invoke(app, ["debug", a, b, "--script", "-"], env=ENV, input="match yy\nmatch zzzz\nmatch y\n")
    assert r.exit_code == 1, r.output
    assert "line 1: match: 'yy' is not a compared tensor of either model; did you mean 'y'?" in r.output, r.output
    assert "line 2: match: 'zzzz' is not a compared tensor of either model (diff --all lists them)" in r.output, r.output
    assert "line 3" not in r.output and "matched by name" in r.stdout


def test_a_suggested_name_is_spelled_as_listed_so_that_it_can_be_typed(tmp_path):
    """A tensor named a\\b\\cd is listed (and typed) as a\\\\b\\\\cd; `show`/`goto` of a near miss suggested it with
    its backslashes doubled twice ('a\\\\\\\\b...'), a spelling that names no tensor."""
    vi = helper.make_tensor_value_info
    name = "a\\b\\cd"
    nodes = [helper.make_node("Relu", ["x"], [name], name="r"), helper.make_node("Neg", [name], ["y"], name="n")]
    path = str(tmp_path / "m.onnx")
    onnx.save(make_model(nodes, [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])]), path)
    listed = "a\\\\b\\\\cd"  # as `nodes` lists it
    r = runner.invoke(app, ["debug", path, "--script", "-"], env=ENV, input=f"nodes\nshow {listed[:-1]}\ngoto {listed[:-1]}\n")
    assert listed in r.stdout, r.stdout
    said = [line for line in r.output.splitlines() if "did you mean" in line]
    assert len(said) == 2 and all(line.endswith(f"did you mean '{listed}'?") for line in said), said
    r = runner.invoke(app, ["debug", path, "--script", "-"], env=ENV, input=f"show {listed}\n")  # what was suggested works
    assert r.exit_code == 0 and "from node r (Relu)" in r.stdout, r.output


def test_debug_diff_columns_ask_for_a_metric_it_is_not_judged_by_as_diff_does(pair):
    """`diff --columns tensor,rmse` shows RMSE under any metric on the command line (README: "`--columns` can ask for
    `mean_abs`, `rmse` and `max_rel` under any metric"); the debugger's `diff` refused it: "no column 'rmse'". QA."""
    a, b = pair
    flags = ["--all", "--format", "csv", "--columns", "tensor,rmse,mean_abs,pass"]
    cli = runner.invoke(app, ["diff", a, b, *flags], env=ENV)
    r = runner.invoke(app, ["debug", a, b, "--script", "-"], env=ENV, input="diff " + " ".join(flags) + "\n")
    assert cli.exit_code == 1 and r.exit_code == 1, (cli.output, r.output)
    rows = {line.split(",")[0]: line.split(",")[1:] for line in r.stdout.splitlines() if line.startswith(("s,", "y,"))}
    for name, shift in (("s", SHIFT["s"]), ("y", SHIFT["s"] + SHIFT["y"])):  # every element differs by the shift
        assert abs(float(rows[name][0]) - shift) < 1e-6 and abs(float(rows[name][1]) - shift) < 1e-6, rows
