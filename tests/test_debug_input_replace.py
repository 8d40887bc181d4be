"""The debugger's `input NAME ...`: a file or a value replaces an earlier `input NAME random DIMS` (its
shape held the new value to the old dims: '--shape 5 disagrees with the value given'), `random` without
DIMS goes back to the model's own shape, and a bad DIMS is named as the command the user wrote, not as
a --shape flag they never gave."""

from __future__ import annotations

import shlex

import numpy as np
import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def session(tmp_path, lines, model=None):
    if model is None:
        model = tmp_path / "dyn.onnx"
        g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    f = tmp_path / "s.txt"
    f.write_text("\n".join(lines) + "\n")
    r = runner.invoke(app, ["debug", str(model), "--script", str(f)], env=ENV)
    assert "Traceback" not in r.output
    return r


def echoes(text: str) -> list[str]:
    """The shape of each `input x ...` line: 'float32 [N]'."""
    return [line.split(": ", 1)[1].split("  ")[0] for line in text.splitlines() if line.startswith("input x ←")]


def test_a_file_a_value_or_an_npz_replaces_an_earlier_random_shape(tmp_path):
    v = np.array([-1.0, 2.0, 3.5], np.float32)
    np.save(tmp_path / "v.npy", v)
    np.savez(tmp_path / "all.npz", x=np.ones(4, np.float32))
    r = session(tmp_path, ["input x random 5", "input x [1, 2]", "input x random 5", f"input x {tmp_path / 'v.npy'}",
                           "input x random 5", f"inputs {shlex.quote(str(tmp_path / 'all.npz'))}", "inputs", "input x random 5", "input x random"])
    assert r.exit_code == 0, r.output
    assert echoes(r.stdout) == ["float32 [5]", "float32 [2]", "float32 [5]", "float32 [3]", "float32 [5]", "float32 [5]",
                                "float32 [1]"], r.stdout  # random without DIMS: the model's 'n', set to 1 as at the start
    line = [x for x in r.stdout.splitlines() if x.startswith("input x ←")][3]
    assert f"min {v.min():g}" in line and f"max {v.max():g}" in line, line
    assert f"from {tmp_path / 'all.npz'}" in r.stdout and "disagrees" not in r.output


def test_bad_dims_are_named_as_the_command_written(tmp_path):
    for line in ("input x random -5", "input x random 2xq"):
        r = session(tmp_path, [line])
        err = [x for x in r.stderr.splitlines() if "error:" in x]  # the start's note on 'n' aside
        assert r.exit_code == 1 and len(err) == 1 and f"{line}:" in err[0] and "--shape" not in err[0], r.output
    for line, want in (("input image random 5", "1 dimension given, the model expects 4"),
                       ("input image random 1x3x16x16", "dimension 2 is fixed to 32 in the model, got 16")):
        r = session(tmp_path, [line], model=sample_path("cnn"))
        err = r.stderr.strip().splitlines()
        assert r.exit_code == 1 and len(err) == 1 and f"{line}: {want}" in err[0] and "--shape" not in err[0], r.output
