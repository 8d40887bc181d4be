"""The debugger's commands that write a file name it in the one-line shape the command line's flags use
(``--json PATH: problem``), led by the command: ``save: PATH: problem`` (save TENSOR, save all, save html) and
``stats: --json PATH: problem`` (``diff`` too). They said ``PATH: problem`` alone, so a script's error line did
not tell which command's file it was. Oracle: the file system (the folder is missing, the path is a folder,
/proc takes no new file)."""

from __future__ import annotations

import shlex
import sys

import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()


def W(path) -> str:
    """A path as the command line's messages write it (quoted where it holds a space)."""
    from onnxprobe.text import as_word

    return as_word(str(path))
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def _errors(tmp_path, lines: list[str], models=("mlp",)) -> list[str]:
    f = tmp_path / "s.txt"
    f.write_text("run\n" + "\n".join(lines) + "\n")
    r = runner.invoke(app, ["debug", *[str(sample_path(m)) for m in models], "--script", str(f)], env=ENV)
    assert r.exit_code != 0, r.output
    return [ln for ln in r.output.splitlines() if "error: line" in ln]


def test_save_names_itself_with_the_path(tmp_path):
    missing = tmp_path / "no such folder"  # a path with spaces: quoted, as the command line quotes it
    a_file = tmp_path / "f.txt"
    a_file.write_text("x")
    cases = [(f"save all {shlex.quote(str(missing / 'a.npz'))}", f"save: {W(missing / 'a.npz')}: "),
             (f"save html {shlex.quote(str(missing / 'r.html'))}", f"save: {W(missing / 'r.html')}: "),
             (f"save y {shlex.quote(str(missing / 'y.npy'))}", f"save: {W(missing / 'y.npy')}: "),
             (f"save y {shlex.quote(str(tmp_path))}", f"save: {W(tmp_path)}: "),
             (f"save y {shlex.quote(str(a_file / 'y.pb'))}", f"save: {W(a_file / 'y.pb')}: "),
             (f"stats --json {shlex.quote(str(missing / 's.json'))}", f"stats: --json {W(missing / 's.json')}: ")]
    assert not missing.exists() and tmp_path.is_dir() and a_file.is_file()
    errors = _errors(tmp_path, [c for c, _ in cases])
    assert len(errors) == len(cases), errors
    for k, (err, (_, want)) in enumerate(zip(errors, cases)):
        assert f"line {k + 2}: {want}" in err, err


def test_diff_json_names_itself(tmp_path):
    missing = tmp_path / "nope"
    errors = _errors(tmp_path, [f"diff --json {shlex.quote(str(missing / 'd.json'))}"], models=("mlp", "mlp"))
    assert len(errors) == 1 and f"line 2: diff: --json {W(missing / 'd.json')}: " in errors[0], errors


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc takes no new file on Linux")
def test_a_write_that_fails_after_the_checks_names_save_too(tmp_path):
    """/proc/x: its folder is there, the write itself fails (no new file in /proc)."""
    errors = _errors(tmp_path, ["save all /proc/onnxprobe-a.npz", "save y /proc/onnxprobe-y.npy",
                                "save html /proc/onnxprobe-r.html"])
    assert len(errors) == 3, errors
    for k, name in enumerate(["a.npz", "y.npy", "r.html"]):
        assert f"line {k + 2}: save: /proc/onnxprobe-{name}: " in errors[k], errors[k]
