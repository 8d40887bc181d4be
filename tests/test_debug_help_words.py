"""The debugger's `help COMMAND` speaks the session's and the command line's words: it is read by a user at
the prompt, so it names no internal function (``api.grad_spec``) and shows no source markup (double
backquotes, which only docstrings of the code use)."""

from __future__ import annotations

from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app
from onnxprobe.session import commands as C

runner = CliRunner()


def test_every_command_help_names_no_internal_function(tmp_path):
    f = tmp_path / "help.txt"
    f.write_text("\n".join(f"help {name}" for name in C.COMMANDS) + "\n")
    r = runner.invoke(app, ["debug", str(sample_path("mlp")), "--script", str(f)], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    for name in C.COMMANDS:
        assert name in r.stdout
    assert "api." not in r.stdout, [line for line in r.stdout.splitlines() if "api." in line]
    assert "``" not in r.stdout, [line for line in r.stdout.splitlines() if "``" in line]
    assert "checked as on the command line" in r.stdout  # the sentence stays, in the user's words
