"""A graph input's gradient row in diff --grad is numbered as grad numbers it: by the node that first
reads the input (its '#' and JSON 'index'), never by a sentinel -1 that leaked into the table's '#'
column and the JSON ('-1  x_grad  input')."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()


def test_an_input_gradient_row_has_its_readers_index_as_in_grad():
    m = str(sample_path("mlp"))
    r = runner.invoke(app, ["diff", "--grad", m, m, "--all", "--json", "-"])
    assert r.exit_code == 0, r.output
    pairs = {p["a"]: p for p in json.loads(r.stdout)["pairs"]}
    g = runner.invoke(app, ["grad", m, "--all", "--json", "-"])
    assert g.exit_code == 0, g.output
    rows = {x["tensor"]: x for x in json.loads(g.stdout)["gradients"]}
    assert pairs["x_grad"]["index"] == rows["x"]["index"] >= 0, (pairs["x_grad"], rows["x"])
    r = runner.invoke(app, ["diff", "--grad", m, m, "--all"], env={"COLUMNS": "120"})
    assert r.exit_code == 0 and "-1  x_grad" not in r.stdout, r.stdout
