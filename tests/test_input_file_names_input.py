"""An input file that cannot be read did not name the input it was given for: `--input x=abc` said "--input
abc: no such input file", the debugger's `input x abc` "input abc: no such input file". Each now names the
input and the file as they were typed (`--input x=abc`, `input x abc`; the API `files (--input) x=abc`), for
every reason a file is refused: missing, a folder, of an unknown type, truncated, not a tensor."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError

ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
MLP = str(sample_path("mlp"))  # input x


def _files(tmp_path) -> dict[str, tuple[str, str]]:
    """file -> what the message says of it after the input's words."""
    folder = tmp_path / "dir.npy"
    folder.mkdir()
    (tmp_path / "x.txt").write_text("1 2 3")
    np.save(tmp_path / "whole.npy", np.zeros((4, 8), np.float32))
    data = (tmp_path / "whole.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(data[:-40])  # a truncated .npy: its header declares more than it holds
    (tmp_path / "junk.pb").write_bytes(b"\xff\xff\xff\xff not a TensorProto")
    return {"missing": (str(tmp_path / "nope.npy"), ": no such input file"),
            "folder": (str(folder), ": is a folder (input file expected)"),
            "type": (str(tmp_path / "x.txt"), ": unsupported file type '.txt'"),
            "truncated": (str(tmp_path / "cut.npy"), ": declares"),
            "not a tensor": (str(tmp_path / "junk.pb"), ": cannot read as .pb tensor")}


KINDS = ["missing", "folder", "type", "truncated", "not a tensor"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_command_line_names_the_input_and_the_file(tmp_path, kind):
    path, rest = _files(tmp_path)[kind]
    r = CliRunner().invoke(app, ["layers", MLP, "--input", f"x={path}"], env=ENV)
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert r.stderr.startswith(f"onnxprobe: error: --input x={path}{rest}"), r.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_the_debugger_names_the_input_and_the_file(tmp_path, kind):
    path, rest = _files(tmp_path)[kind]
    f = tmp_path / "session.txt"
    f.write_text(f"input x {path}\n")
    r = CliRunner().invoke(app, ["debug", MLP, "--script", str(f)], env=ENV)
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    assert r.stderr.startswith(f"onnxprobe: error: line 1: input x {path}{rest}"), r.stderr
    assert "--input" not in r.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_the_api_names_the_input_and_the_file(tmp_path, kind):
    path, rest = _files(tmp_path)[kind]
    with pytest.raises(UsageError) as e:
        api.feeds(MLP, api.InputSpec(files={"x": path}))
    assert str(e.value).startswith(f"files (--input) x={path}{rest}"), str(e.value)
