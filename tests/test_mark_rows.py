"""`mark --format csv/json` rows: `tensor` is the tensor marked, as in every command's rows and in
the metadata onnxprobe.exposed; the output it was added as (a statistics row's `onnxprobe.stats:NAME`, a body tensor's
carried-out name) is `output`."""

from __future__ import annotations

import csv
import io
import json

import onnx

from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app


def rows(tmp_path, *extra, fmt="json"):
    r = CliRunner().invoke(app, ["mark", str(sample_path("mlp")), "-o", str(tmp_path / "m.onnx"), "--all",
                                 "--format", fmt, *extra])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout) if fmt == "json" else list(csv.DictReader(io.StringIO(r.stdout)))


def test_stats_rows_name_the_tensor_and_its_statistics_output(tmp_path):
    got = rows(tmp_path, "--stats")
    # what the written model says it exposed: {"outputs": {output: tensor}}
    meta = {p.key: p.value for p in onnx.load(str(tmp_path / "m.onnx")).metadata_props}
    exposed = json.loads(meta["onnxprobe.exposed"])["outputs"]
    assert got and {r["output"]: r["tensor"] for r in got} == exposed
    assert all(r["output"] == f"onnxprobe.stats:{r['tensor']}" for r in got), got


def test_csv_rows_and_chosen_columns_name_the_tensor(tmp_path):
    got = rows(tmp_path, "--stats", fmt="csv")
    assert got and all(r["output"] == f"onnxprobe.stats:{r['tensor']}" for r in got), got
    chosen = rows(tmp_path, "--stats", "--columns", "tensor", fmt="csv")
    assert [r["tensor"] for r in chosen] == [r["tensor"] for r in got]
