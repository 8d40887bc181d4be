"""The debugger's `grad --model b`: the backward graph of the second model (README: "--model b everywhere";
cmd_grad reads --model), which the session refused as an unknown option since grad's usage did not name it."""

from __future__ import annotations

from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()


def test_grad_takes_model_b(tmp_path):
    a = b = str(sample_path("cnn"))
    r = runner.invoke(app, ["debug", a, b, "--script", "-"], env={"COLUMNS": "200", "NO_COLOR": "1"},
                      input="grad --model b\nshow logits_grad --model b\nshow logits_grad\n")
    assert "unknown option" not in r.output, r.output
    assert "[b] loss sum of logits" in r.stdout and "logits_grad  from node" in r.stdout, r.output
    assert "line 3: no tensor named 'logits_grad'" in r.output  # model a has no backward graph
    assert r.exit_code == 1
