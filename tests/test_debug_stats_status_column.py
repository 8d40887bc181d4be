"""The debugger's `stats --columns ... status` gives the rows `layers --columns ... status` gives, as the README says
the same options work there: it was refused ("--columns: no column 'status'") while its own `stats --format csv`
printed the column (QA)."""

from __future__ import annotations

from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()


def test_stats_takes_the_status_column_as_layers_does(tmp_path):
    model = str(sample_path("control_flow"))
    script = tmp_path / "s.txt"
    script.write_text("probe add --all\nstats --all --format csv --columns tensor,min,status\n")
    got = runner.invoke(app, ["debug", model, "--script", str(script)])
    assert got.exit_code == 0, got.output
    want = runner.invoke(app, ["layers", model, "--all", "--format", "csv", "--columns", "tensor,min,status", "--no-cache"])
    assert want.exit_code == 0, want.output
    rows = [line for line in got.stdout.splitlines() if "," in line]
    assert rows and rows[0] == "tensor,min,status", got.stdout
    assert set(rows) == {line for line in want.stdout.splitlines() if "," in line}, (got.stdout, want.stdout)
