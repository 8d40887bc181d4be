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


def test_help_list_keeps_every_description_at_any_width(tmp_path):
    """The debugger's `help` list at 40 columns dropped the description column (and cropped the longest usage):
    every command's usage stays whole and every word of its description is shown, within the width."""
    import re

    from rich.cells import cell_len

    f = tmp_path / "help.txt"
    f.write_text("help\n")
    for width in (40, 60, 80, 120):
        r = runner.invoke(app, ["debug", str(sample_path("mlp")), "--script", str(f)],
                          env={"COLUMNS": str(width), "NO_COLOR": "1"})
        assert r.exit_code == 0, r.output
        lines = r.stdout.splitlines()
        assert all(cell_len(line) <= width for line in lines), (width, [line for line in lines if cell_len(line) > width])
        words, joined = r.stdout.split(), "".join(r.stdout.split())
        for c in C.COMMANDS.values():
            assert "".join(c.short_usage.split()) in joined, (width, c.short_usage)  # whole, folded at 40 if need be
            for word in c.help.split():
                assert word in words, (width, c.name, word)
        if width >= 80:  # wide enough for two columns: the descriptions sit beside the usages
            assert re.search(r"^  info …\s{2,}the model:", r.stdout, re.M), r.stdout
