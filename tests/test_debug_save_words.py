"""The debugger's `save` with an empty path said 'output path: an empty path', not led by its command as its every
other file error is ("save: PATH: why"); and `save html a.html b.html` said "give what to save and a file", the
usage of one given nothing, where it was given a file too many."""

from __future__ import annotations

from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app


def test_save_errors_are_led_by_the_command_and_say_what_is_wrong(tmp_path):
    script = tmp_path / "s.txt"
    script.write_text("save y ''\nsave html a.html b.html\n")
    r = CliRunner().invoke(app, ["debug", str(sample_path("mlp")), "--script", str(script)])
    lines = [ln for ln in r.stderr.splitlines() if "error" in ln]
    assert r.exit_code == 1 and len(lines) == 2, r.output
    assert lines[0].startswith("onnxprobe: error: line 1: save: '': an empty path"), lines[0]
    assert "line 2: save: one file: 'b.html' is more than save takes" in lines[1], lines[1]
    assert not (tmp_path / "a.html").exists()
