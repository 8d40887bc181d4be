"""A file a command cannot write after its path passed the checks (/proc takes no new file) is said in the one
shape of every bad flag value, naming the flag: ``--json /proc/x.json: cannot write it (...)``. It said
``/proc/x.json: cannot write it (...)`` alone, so a line did not tell which of a command's outputs failed, where
the same command's checked paths read ``--json PATH: problem``. Oracle: the file system (/proc refuses a new
file whatever the user; the check before the work lets it through, as an existing folder)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import sample_feeds, sample_path
from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1", "ONNXPROBE_NO_CACHE": "1"}
MLP = str(sample_path("mlp"))


def _fails_naming(argv: list[str], flag: str, path: str) -> None:
    assert not os.path.exists(path)
    r = runner.invoke(app, argv, env=ENV)
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.startswith("onnxprobe: error:")]
    assert len(lines) == 1, r.output
    assert lines[0].startswith(f"onnxprobe: error: {flag} {path}: cannot write it ("), lines[0]
    assert "Traceback" not in r.output


CASES = [
    (["layers", MLP], "--json", "x.json"),
    (["layers", MLP], "--html", "x.html"),
    (["layers", MLP], "--save", "x.npz"),
    (["layers", MLP], "--overlay", "x.json"),
    (["layers", MLP], "--netron", "x.json"),
    (["inspect", MLP], "--json", "x.json"),
    (["diff", MLP, MLP], "--json", "x.json"),
    (["diff", MLP, MLP], "--html", "x.html"),
    (["grad", MLP], "--json", "x.json"),
    (["grad", MLP], "--save-grads", "x.npz"),
    (["grad", MLP], "--export", "x.onnx"),
    (["mark", MLP, "--all"], "-o", "x.onnx"),
    (["extract", MLP, "--to", "relu1_out"], "--output", "x.onnx"),
]


@pytest.mark.parametrize("argv, flag, name", CASES, ids=[f"{c[0][0]} {c[1]}" for c in CASES])
def test_a_write_that_fails_names_its_flag(argv, flag, name):
    named = "-o/--output" if flag in ("-o", "--output") else flag  # as the path check names it (cli.output.OUTPUT_FLAG)
    _fails_naming([*argv, flag, f"/proc/{name}"], named, f"/proc/{name}")


def _dataset(folder) -> str:
    folder.mkdir()
    for i in range(2):
        np.savez(folder / f"b{i}.npz", **sample_feeds("mlp", seed=i))
    return str(folder)


def test_dataset_outputs_name_their_flag(tmp_path):
    ds = _dataset(tmp_path / "ds")
    _fails_naming(["grad", MLP, "--inputs-dir", ds, "--save-grads", "/proc/x.npz"], "--save-grads", "/proc/x.npz")
    _fails_naming(["layers", MLP, "--inputs-dir", ds, "--json", "/proc/x.json"], "--json", "/proc/x.json")
    shard = tmp_path / "shard.json"
    r = runner.invoke(app, ["layers", MLP, "--inputs-dir", ds, "--json", str(shard)], env=ENV)
    assert r.exit_code == 0, r.output
    _fails_naming(["merge-stats", str(shard), "--json", "/proc/x.json"], "--json", "/proc/x.json")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
@pytest.mark.parametrize("argv, flag", [(["layers", MLP], "--json"), (["grad", MLP], "--save-grads"),
                                         (["mark", MLP, "--all"], "-o")])
def test_a_full_disk_is_no_usage_error(argv, flag):
    """/dev/full (a full disk) failed with exit code 2, a usage error, where `--json - > /dev/full` exits 1: the path
    was right, the machine could not take it. The one line still names the flag."""
    r = runner.invoke(app, [*argv, flag, "/dev/full"], env=ENV)
    lines = [ln for ln in r.output.splitlines() if ln.startswith("onnxprobe: error:")]
    assert r.exit_code == 1 and len(lines) == 1, r.output
    assert "/dev/full: cannot write it (No space left on device)" in lines[0], lines[0]
