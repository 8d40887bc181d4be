"""A tensor of an If branch not taken has no values: its row says '-' for NaN and Inf (empty in CSV), where
it read a clean '0 0' beside values of the branch taken that hold NaN, in `layers` and the debugger's `stats`."""

from __future__ import annotations

import csv
import io
import shlex

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
X = np.array([0.1, 0.2, 0.9, 0.3], np.float32)


def if_model(path) -> None:
    """lg = Log(x - 0.5); y = If(cond, then: Sqrt(lg), else: Neg(lg)): run with cond false."""
    then = helper.make_graph([helper.make_node("Sqrt", ["lg"], ["o"], name="sq")], "then_branch", [],
                             [helper.make_tensor_value_info("o", TensorProto.FLOAT, [4])])
    other = helper.make_graph([helper.make_node("Neg", ["lg"], ["o"], name="ng")], "else_branch", [],
                              [helper.make_tensor_value_info("o", TensorProto.FLOAT, [4])])
    nodes = [helper.make_node("Sub", ["x", "c"], ["xs"], name="sub"), helper.make_node("Log", ["xs"], ["lg"], name="log"),
             helper.make_node("If", ["cond"], ["y"], name="if1", then_branch=then, else_branch=other)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
                                       helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                          [numpy_helper.from_array(np.array(0.5, np.float32), "c")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_a_branch_not_taken_counts_no_nan_or_inf(tmp_path):
    m = tmp_path / "if.onnx"
    if_model(m)
    np.savez(tmp_path / "in.npz", x=X, cond=np.array(False))
    with np.errstate(invalid="ignore", divide="ignore"):
        nans = int(np.isnan(-np.log(X.astype(np.float64) - 0.5)).sum())  # the else branch, which ran
    r = runner.invoke(app, ["layers", str(m), "--all", "--inputs", str(tmp_path / "in.npz"), "--format", "csv"], env=ENV)
    assert r.exit_code == 0, r.output
    rows = {x["node"]: x for x in csv.DictReader(io.StringIO(r.stdout))}
    assert rows["sq"]["status"] == "not run" and rows["sq"]["nan"] == rows["sq"]["inf"] == ""
    assert rows["ng"]["status"] == "ran" and int(rows["ng"]["nan"]) == nans == 3
    f = tmp_path / "s.txt"
    f.write_text(f"inputs {shlex.quote(str(tmp_path / 'in.npz'))}\nstats --all\n")
    r = runner.invoke(app, ["debug", str(m), "--script", str(f)], env=ENV)
    assert r.exit_code == 0, r.output
    sq = next(line for line in r.stdout.splitlines() if " Sqrt " in line).split()
    ng = next(line for line in r.stdout.splitlines() if " Neg " in line).split()
    assert "not run" in " ".join(sq) and sq[-2:] == ["-", "-"], sq
    assert ng[-2:] == [str(nans), "0"], ng


def test_json_gives_null_nan_and_inf_for_a_branch_not_taken(tmp_path):
    """JSON said "nan": 0, "inf": 0 beside a status "not run" (the table '-', CSV empty): null, as JSON writes
    what was not measured; in layers --json, a dataset report and merge-stats of such shards."""
    import json

    m = tmp_path / "if.onnx"
    if_model(m)
    with np.errstate(invalid="ignore", divide="ignore"):
        nans = int(np.isnan(-np.log(X.astype(np.float64) - 0.5)).sum())
    np.savez(tmp_path / "in.npz", x=X, cond=np.array(False))
    r = runner.invoke(app, ["layers", str(m), "--all", "--inputs", str(tmp_path / "in.npz"), "--json", "-"], env=ENV)
    assert r.exit_code == 0, r.output
    rows = {t["node"]: t for t in json.loads(r.stdout)["tensors"]}
    assert rows["sq"]["status"] == "not run" and rows["sq"]["nan"] is None and rows["sq"]["inf"] is None, rows["sq"]
    assert rows["ng"]["nan"] == nans and rows["ng"]["inf"] == 0
    shards = []
    for k in range(2):
        d = tmp_path / f"d{k}"
        d.mkdir()
        np.savez(d / "b.npz", x=X + k, cond=np.array(False))
        shards.append(str(tmp_path / f"s{k}.json"))
        r = runner.invoke(app, ["layers", str(m), "--all", "--inputs-dir", str(d), "--json", shards[-1]], env=ENV)
        assert r.exit_code == 0, r.output
        sq = next(t for t in json.loads(open(shards[-1]).read())["tensors"] if t["node"] == "sq")
        assert sq["nan"] is None and sq["inf"] is None, sq
    r = runner.invoke(app, ["merge-stats", *shards, "--json", "-"], env=ENV)
    assert r.exit_code == 0, r.output
    merged = {t["node"]: t for t in json.loads(r.stdout)["tensors"]}
    assert merged["sq"]["status"] == "not run" and merged["sq"]["nan"] is None and merged["sq"]["inf"] is None, merged["sq"]
    with np.errstate(invalid="ignore", divide="ignore"):
        want = sum(int(np.isnan(-np.log(X.astype(np.float64) + k - 0.5)).sum()) for k in range(2))
    assert merged["ng"]["nan"] == want
