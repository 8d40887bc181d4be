"""A file name with spaces, quotes, control characters or bytes that are not UTF-8 reads the same in the path check's
message (``cli.output.check_outputs``: "--json PATH: folder ... does not exist") and in a write that fails after the
check (``errors.WriteFailed``: "--json PATH: cannot write it (...)"), and through the API: the write said the raw
path (an ESC reached the terminal, a newline split the one line, a lone surrogate could not be printed). Oracle:
the file system (/proc takes no new file whatever the user) and the quoted words written out by hand. QA."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError
from onnxprobe.fileio import write_file

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1", "ONNXPROBE_NO_CACHE": "1"}
MLP = str(sample_path("mlp"))
NAME = "it's a \x1b[31m\n\udcff.json"  # a quote, a space, ESC, a newline and the byte 0xff
WORD = "it's a \\x1b[31m\\n\\udcff.json"  # as a message shows it, between double quotes (the name holds a single one)


def _error(argv: list[str]) -> str:
    r = runner.invoke(app, argv, env=ENV)
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_the_path_check_and_a_failed_write_quote_a_hostile_path_alike(tmp_path):
    checked = _error(["inspect", MLP, "--json", str(tmp_path / "no folder" / NAME)])
    assert checked.startswith(f'onnxprobe: error: --json "{tmp_path}/no folder/{WORD}": '), checked
    written = _error(["inspect", MLP, "--json", f"/proc/{NAME}"])
    assert written.startswith(f'onnxprobe: error: --json "/proc/{WORD}": cannot write it ('), written


def test_a_failed_write_through_the_api_quotes_its_path():
    with pytest.raises(UsageError) as e:
        write_file(f"/proc/{NAME}", lambda f: f.write(b"x"))
    assert str(e.value).startswith(f'"/proc/{WORD}": cannot write it ('), str(e.value)
