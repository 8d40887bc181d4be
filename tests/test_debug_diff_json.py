"""The debugger's `diff --json FILE|-`, as on the command line: the whole report (unmatched tensors with their
reasons, the verdict), which the table's "and N more (see --json)" sends the user to. The session's `diff`
refused --json as an unknown option, so the unmatched tensors past the first three could not be seen."""

from __future__ import annotations

import json
import shlex

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model, sha256
from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def chain(path, n_extra: int) -> str:
    """x -> Relu -> r, then ``n_extra`` Neg nodes of r that the other model lacks (unmatched in B), -> y."""
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu")]
    prev = "r"
    for i in range(n_extra):
        nodes.append(helper.make_node("Neg", [prev], [f"neg{i}"], name=f"neg{i}"))
        prev = f"neg{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    onnx.save(make_model(nodes, [vi("x", TensorProto.FLOAT, [2, 4])], [vi("y", TensorProto.FLOAT, [2, 4])]), str(path))
    return str(path)


def test_debug_diff_json_is_the_command_lines_report(tmp_path):
    a, b = chain(tmp_path / "a.onnx", 0), chain(tmp_path / "b.onnx", 6)
    cli = runner.invoke(app, ["diff", a, b, "--all", "--json", str(tmp_path / "cli.json")], env=ENV)
    assert cli.exit_code in (0, 1) and "see --json" in cli.stdout, cli.output
    want = json.loads((tmp_path / "cli.json").read_text())
    r = runner.invoke(app, ["debug", a, b, "--script", "-"], env=ENV, input=f"diff --all --json {shlex.quote(str(tmp_path / 'dbg.json'))}\n")
    assert r.exit_code == 0 and "see --json" in r.stdout, r.output
    got = json.loads((tmp_path / "dbg.json").read_text())
    for key in ("pairs", "unmatched_a", "unmatched_b", "verdict"):
        assert got[key] == want[key], key
    assert len(got["unmatched_b"]) > 3
    r = runner.invoke(app, ["debug", a, b, "--script", "-"], env=ENV, input="diff --all --json -\n")
    assert r.exit_code == 0, r.output
    printed = json.loads(r.stdout)  # --json -: the report instead of the table
    assert printed["unmatched_b"] == want["unmatched_b"] and "SQNR along depth" not in r.stdout


def test_debug_diff_json_is_refused_as_on_the_command_line(tmp_path):
    a, b = chain(tmp_path / "a.onnx", 0), chain(tmp_path / "b.onnx", 1)
    before = sha256(a)
    for flags in (["--json", "-", "--format", "csv"], ["--json", "-", "--columns", "tensor"], ["--json", a]):
        cli = runner.invoke(app, ["diff", a, b, *flags], env=ENV)
        r = runner.invoke(app, ["debug", a, b, "--script", "-"], env=ENV, input="diff " + shlex.join(map(str, flags)) + "\n")
        assert cli.exit_code == 2 and r.exit_code == 1, (cli.output, r.output)
        said = cli.output.strip().splitlines()[-1].removeprefix("onnxprobe: error: ")
        # the same words, after the line and (for a path) the debugger command that wrote it ("line 1: diff: --json ...")
        assert "onnxprobe: error: line 1: " in r.output and said in r.output, (said, r.output)
    assert sha256(a) == before
