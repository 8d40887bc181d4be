"""Every flag given a bad value says so in one shape: `onnxprobe: error: --FLAG VALUE: what is wrong`, one
line, exit 2. A bad --json/--html/--save path came in two other shapes: click's "Invalid value for '--json':
... (see `... --help`)" for an empty path or one ending in '/', and the bare path ("/x/y.json: folder /x does
not exist", no flag named) for a missing folder or a folder given as the file."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()
M = str(sample_path("mlp"))
DIR = "{dir}"

CASES = [
    (["layers", M, "--json", "/nonexistent-dir/x.json"], "--json", "/nonexistent-dir/x.json"),
    (["layers", M, "--json", ""], "--json", "''"),
    (["layers", M, "--json", DIR], "--json", DIR),
    (["layers", M, "--json", "out/"], "--json", "out/"),
    (["inspect", M, "--json", "/nonexistent-dir/x.json"], "--json", "/nonexistent-dir/x.json"),
    (["diff", M, M, "--html", "/nonexistent-dir/x.html"], "--html", "/nonexistent-dir/x.html"),
    (["diff", M, M, "--json", DIR], "--json", DIR),
    (["grad", M, "--json", DIR], "--json", DIR),
    (["grad", M, "--html", ""], "--html", "''"),
    (["layers", M, "--save", "/nonexistent-dir/x.npz"], "--save", "/nonexistent-dir/x.npz"),
    (["mark", M, "-o", ""], "-o/--output", "''"),
    (["mark", M, "-o", "/nonexistent-dir/m.onnx"], "-o/--output", "/nonexistent-dir/m.onnx"),
    (["layers", M, "--seed", "abc"], "--seed", "abc"),
    (["diff", M, M, "--min-sqnr", "abc"], "--min-sqnr", "abc"),
    (["diff", M, M, "--rtol", "abc"], "--rtol", "abc"),
    (["layers", M, "--shape", "bad"], "--shape", "bad"),
    (["layers", M, "--input", "x=/nonexistent-dir/x.npy"], "--input", "x=/nonexistent-dir/x.npy"),
]


@pytest.mark.parametrize("args,flag,value", CASES, ids=[" ".join(a[0:1] + a[2:]) for a, _, _ in CASES])
def test_a_bad_flag_value_is_one_line_naming_the_flag_and_the_value(tmp_path, args, flag, value):
    args = [a.replace(DIR, str(tmp_path)) for a in args]
    value = value.replace(DIR, str(tmp_path))
    r = runner.invoke(app, args, env={"ONNXPROBE_NO_CACHE": "1"})
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    line = lines[0]
    # the flag, the value as given (quoted only where it would not read as one word), then what is wrong
    assert line.startswith(f"onnxprobe: error: {flag} "), line
    assert f" {value}: " in line or f" '{value}': " in line, line
    assert "Invalid value" not in line and "--help" not in line and "Traceback" not in r.output


def test_an_output_flag_naming_an_input_file_names_the_flag(tmp_path):
    import shutil

    m = tmp_path / "m.onnx"
    shutil.copy(M, m)
    r = runner.invoke(app, ["layers", str(m), "--json", str(m)], env={"ONNXPROBE_NO_CACHE": "1"})
    assert r.exit_code == 2, r.output
    assert r.stderr.strip().startswith(f"onnxprobe: error: --json {m}: is "), r.stderr
    assert m.read_bytes() == open(M, "rb").read()
