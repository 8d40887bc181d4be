"""The debugger's `stats --json FILE|-`, as `layers --json` and the session's own `diff --json`: the whole report
(every tensor's statistics, the model, the device, the notes) to a file, or to stdout instead of the table;
`--format json` (the table's rows) keeps working. `stats` refused --json as an unknown option, though `diff`
took it: the same flag meant something in one command and nothing in the other."""

from __future__ import annotations

import json
import shlex

import numpy as np
import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import make_model, sha256
from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
X = (np.arange(8, dtype=np.float32).reshape(2, 4) - 3.5) / 2


def relu_model(tmp_path) -> tuple[str, str]:
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Neg", ["r"], ["y"], name="neg")]
    p = tmp_path / "m.onnx"
    onnx.save(make_model(nodes, [vi("x", TensorProto.FLOAT, [2, 4])], [vi("y", TensorProto.FLOAT, [2, 4])]), str(p))
    np.save(tmp_path / "x.npy", X)
    return str(p), f"x={tmp_path / 'x.npy'}"


def _oracle() -> dict[str, np.ndarray]:
    r = np.maximum(X.astype(np.float64), 0)
    return {"r": r, "y": -r}


def _check(tensors: list[dict]) -> None:
    by = {t["name"]: t for t in tensors}
    for name, v in _oracle().items():
        assert by[name]["min"] == v.min() and by[name]["max"] == v.max(), by[name]
        assert abs(by[name]["mean"] - v.mean()) < 1e-6, by[name]


def debug(p, x, line: str):
    return runner.invoke(app, ["debug", p, "--input", x, "--device", "cpu", "--all", "--script", "-"], env=ENV, input=line + "\n")


def test_debug_stats_json_is_the_whole_report(tmp_path):
    p, x = relu_model(tmp_path)
    cli = runner.invoke(app, ["layers", p, "--input", x, "--device", "cpu", "--all", "--json", str(tmp_path / "cli.json")], env=ENV)
    assert cli.exit_code == 0, cli.output
    want = json.loads((tmp_path / "cli.json").read_text())
    r = debug(p, x, f"stats --json {shlex.quote(str(tmp_path / 'dbg.json'))}")
    assert r.exit_code == 0, r.output
    assert "wrote the whole report to" in r.stdout and "2 tensors" in r.stdout, r.stdout  # the table, and the file
    got = json.loads((tmp_path / "dbg.json").read_text())
    for key in ("schema_version", "model", "device", "opt_level", "notes"):
        assert got[key] == want[key], key
    assert [t["name"] for t in got["tensors"]] == [t["name"] for t in want["tensors"]]
    _check(got["tensors"])
    r = debug(p, x, "stats --json -")
    assert r.exit_code == 0, r.output
    printed = json.loads(r.stdout)  # --json -: the report instead of the table
    assert printed["model"] == want["model"]
    _check(printed["tensors"])


def test_debug_stats_format_json_still_gives_the_rows(tmp_path):
    p, x = relu_model(tmp_path)
    r = debug(p, x, "stats --format json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert isinstance(rows, list) and {row["tensor"] for row in rows} == {"r", "y"}, rows


def test_debug_stats_json_is_refused_as_on_the_command_line(tmp_path):
    p, x = relu_model(tmp_path)
    before = sha256(p)
    for flags in (["--json", "-", "--format", "csv"], ["--json", "-", "--columns", "tensor"], ["--json", p]):
        cli = runner.invoke(app, ["layers", p, "--input", x, *flags], env=ENV)
        r = debug(p, x, "stats " + shlex.join(map(str, flags)))
        assert cli.exit_code == 2 and r.exit_code == 1, (cli.output, r.output)
        said = cli.output.strip().splitlines()[-1].removeprefix("onnxprobe: error: ")
        # the same words, after the line and (for a path) the debugger command that wrote it ("line 1: diff: --json ...")
        assert "onnxprobe: error: line 1: " in r.output and said in r.output, (said, r.output)
    assert sha256(p) == before


def test_debug_help_documents_json_where_json_is_offered(tmp_path):
    p, x = relu_model(tmp_path)
    for cmd in ("stats", "diff"):
        r = debug(p, x, f"help {cmd}")
        assert r.exit_code == 0, r.output
        assert "--json FILE|-" in r.stdout and "--format" in r.stdout, r.stdout
