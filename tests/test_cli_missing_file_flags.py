"""A file flag whose file is missing is one line that names the flag, as --map, --target, --script and
--inputs-from said already: --inputs, --vs-npz and --input said only '/nope/x.npz: no such .npz file', and
--inputs-dir said 'expected a folder of .npz files...' of a folder the user had given, only mistyped (QA)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()

CASES = [
    (["layers", "{m}", "--inputs", "{p}/x.npz"], "--inputs"),
    (["grad", "{m}", "--inputs", "{p}/x.npz"], "--inputs"),
    (["mark", "{m}", "-o", "{t}/o.onnx", "--all", "--inputs", "{p}/x.npz"], "--inputs"),
    (["diff", "{m}", "--vs-npz", "{p}/acts.npz"], "--vs-npz"),
    (["layers", "{m}", "--input", "x={p}/x.npy"], "--input"),
    (["diff", "{m}", "{m}", "--input", "x={p}/x.npy"], "--input"),
    (["layers", "{m}", "--inputs-dir", "{p}/calib"], "--inputs-dir"),
    (["grad", "{m}", "--inputs-dir", "{p}/calib"], "--inputs-dir"),
]


@pytest.mark.parametrize("argv,flag", CASES, ids=[f"{a[0]} {f}" for a, f in CASES])
def test_a_missing_file_names_its_flag(tmp_path, argv, flag):
    missing = tmp_path / "nope"
    r = runner.invoke(app, [a.format(m=sample_path("mlp"), p=missing, t=tmp_path) for a in argv])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"onnxprobe: error: {flag} "), r.stderr
    assert str(missing) in lines[0] and "no such" in lines[0], r.stderr
