"""`debug --script` exits 1 when a `diff` line's verdict fails, as `onnxprobe diff` does on the same models: a
script whose table said "outputs FAIL" exited 0, and a CI script that runs one missed the failure."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app


def _perturbed(tmp_path):
    m = onnx.load(str(sample_path("mlp")))
    w = m.graph.initializer[0]
    w.CopyFrom(numpy_helper.from_array((numpy_helper.to_array(w) * 1.5).astype(np.float32), w.name))
    onnx.save(m, tmp_path / "b.onnx")
    return tmp_path / "b.onnx"


def test_a_failing_diff_line_fails_the_script_as_diff_fails_the_command(tmp_path):
    a, b = str(sample_path("mlp")), str(_perturbed(tmp_path))
    (tmp_path / "s.txt").write_text("diff\ninfo\n")
    runner = CliRunner()
    for other, code in ((b, 1), (a, 0)):
        direct = runner.invoke(app, ["diff", a, other])
        assert direct.exit_code == code, direct.output  # the command's own verdict, the oracle
        r = runner.invoke(app, ["debug", a, other, "--script", str(tmp_path / "s.txt")])
        assert r.exit_code == code, r.output
        assert ("FAIL" in r.stdout) == (code == 1) and "error" not in r.stderr, r.output
