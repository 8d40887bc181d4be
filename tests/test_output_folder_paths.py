"""An output path that ends in '/' names a folder, one that may not exist: it is refused in one line (exit 2)
and nothing is written. Path('out/') is Path('out'), so `--json out/`, `-o out/`, the debugger's
`save html out/` and `save_to='out/'` wrote a file named `out` where the user named a folder (QA)."""

from __future__ import annotations

import os
import shlex

import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe import api
from onnxprobe.cli.main import app

runner = CliRunner()

COMMANDS = [
    ["layers", "{m}", "--json", "{o}"],
    ["layers", "{m}", "--save", "{o}"],
    ["layers", "{m}", "--html", "{o}"],
    ["layers", "{m}", "--netron", "{o}"],
    ["layers", "{m}", "--overlay", "{o}"],
    ["diff", "{m}", "{m}", "--json", "{o}"],
    ["grad", "{m}", "--export", "{o}"],
    ["grad", "{m}", "--save-grads", "{o}"],
    ["inspect", "{m}", "--json", "{o}"],
    ["mark", "{m}", "-o", "{o}", "--all"],
    ["extract", "{m}", "-o", "{o}", "--to", "fc1_out"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(a[0:1] + a[2:3] + a[3:4]) for a in COMMANDS])
def test_cli_output_ending_in_a_slash_is_refused(tmp_path, argv):
    out = str(tmp_path / "out") + "/"
    r = runner.invoke(app, [a.format(m=sample_path("mlp"), o=out) for a in argv])
    assert r.exit_code == 2, r.output
    assert len(r.stderr.strip().splitlines()) == 1 and "out/" in r.stderr and "folder" in r.stderr, r.stderr
    assert os.listdir(tmp_path) == [], os.listdir(tmp_path)


@pytest.mark.parametrize("line", ["save html {o}", "save all {o}", "save y {o}"])
def test_debugger_save_ending_in_a_slash_is_refused(tmp_path, line):
    out = str(tmp_path / "out.npz") + "/"
    script = tmp_path / "s.txt"
    script.write_text(line.format(o=shlex.quote(out)) + "\n")
    r = runner.invoke(app, ["debug", str(sample_path("mlp")), "--script", str(script)])
    assert r.exit_code == 1 and "out.npz/" in r.stderr and "folder" in r.stderr, r.output
    assert sorted(os.listdir(tmp_path)) == ["s.txt"], os.listdir(tmp_path)


def test_api_save_to_ending_in_a_slash_is_refused(tmp_path):
    with pytest.raises(api.UsageError, match="folder"):
        api.save_npz({"a": __import__("numpy").zeros(2)}, str(tmp_path / "acts.npz") + "/")
    assert os.listdir(tmp_path) == []


FILE_ONLY = [(argv, argv[argv.index("{o}") - 1]) for argv in COMMANDS if "--json" not in argv]


@pytest.mark.parametrize("argv,flag", FILE_ONLY, ids=[f"{a[0]} {f}" for a, f in FILE_ONLY])
def test_stdout_for_a_file_output_is_refused_naming_the_flag(tmp_path, monkeypatch, argv, flag):
    """'-' (stdout) where only a file will do: one line naming the flag as given, as every other bad value
    is (mark's and extract's -o said 'the model is written to a file', naming no flag, QA)."""
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, [a.format(m=sample_path("mlp"), o="-") for a in argv])
    assert r.exit_code == 2, r.output
    assert len(r.stderr.strip().splitlines()) == 1 and flag in r.stderr and "not '-'" in r.stderr, r.stderr
    assert os.listdir(tmp_path) == [], os.listdir(tmp_path)


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(a[0:1] + a[2:3] + a[3:4]) for a in COMMANDS])
def test_a_link_into_a_missing_folder_is_said_as_such(tmp_path, argv):
    """An output that is a symbolic link to a file in a folder that does not exist: said as a link and its
    folder, as a plain path into a missing folder is ('folder X does not exist'); it was the system's "No such
    file or directory", naming the link's target (mark, extract, --export) or the link (the reports) (QA)."""
    link = tmp_path / "out"
    link.symlink_to(tmp_path / "gone" / "x")
    r = runner.invoke(app, [a.format(m=sample_path("mlp"), o=link) for a in argv])
    assert r.exit_code == 2, r.output
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and str(link) in err and "symbolic link" in err and "does not exist" in err, err
    assert sorted(os.listdir(tmp_path)) == ["out"], os.listdir(tmp_path)
