"""`diff A B --op Relu --range 0:1` (no Relu among nodes 0..1) or `--name W` of a weight selected nothing, and
diff compared the model outputs alone and passed, silently: `layers` refuses such a selection ("matches no
tensor"), and the same flags mean the same in every command. diff now refuses it too (exit 2, one line),
on one input and on a dataset."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
V = helper.make_tensor_value_info


def _model(tmp_path) -> str:
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32), "W")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"), helper.make_node("Abs", ["m"], ["a"], name="abs"),
             helper.make_node("Relu", ["a"], ["y"], name="relu")]
    path = tmp_path / "m.onnx"
    onnx.save(make_model(nodes, [V("x", TensorProto.FLOAT, [2, 4])], [V("y", TensorProto.FLOAT, [2, 4])], [w]), path)
    return str(path)


@pytest.mark.parametrize("flags", [["--op", "Relu", "--range", "0:1"], ["--name", "W"]])
def test_diff_refuses_a_selection_that_matches_no_tensor(tmp_path, flags):
    m = _model(tmp_path)
    lay = runner.invoke(app, ["layers", m, *flags])
    assert lay.exit_code == 2 and "matches no tensor" in lay.stderr, lay.output
    r = runner.invoke(app, ["diff", m, m, "--device", "cpu", *flags])
    err = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and r.stdout.strip() == "", r.output
    assert len(err) == 1 and "matches no tensor" in err[0], r.stderr
    d = tmp_path / "data"
    d.mkdir()
    np.savez(d / "b0.npz", x=np.ones((2, 4), np.float32))
    r = runner.invoke(app, ["diff", m, m, "--device", "cpu", "--inputs-dir", str(d), *flags])
    assert r.exit_code == 2 and "matches no tensor" in r.stderr, r.output


def test_a_selection_that_matches_still_runs(tmp_path):
    m = _model(tmp_path)
    r = runner.invoke(app, ["diff", m, m, "--device", "cpu", "--op", "Relu", "--range", "1:2"])
    assert r.exit_code == 0 and " y " in r.stdout, r.output
    r = runner.invoke(app, ["diff", m, m, "--device", "cpu", "--name", "m"])
    assert r.exit_code == 0 and " m " in r.stdout, r.output


@pytest.mark.parametrize("flags", [["--name", "W", "--include-constants"], ["--name", "x"]])
def test_diff_refuses_a_selection_of_weights_or_inputs_alone(tmp_path, flags):
    """`layers --name W --include-constants` shows the weight W; diff compares what nodes compute, not a weight
    as stored nor the feeds (the same on both sides), and compared the outputs alone, silently."""
    m = _model(tmp_path)
    lay = runner.invoke(app, ["layers", m, *flags])
    assert lay.exit_code == 0 and (" W " in lay.stdout or " x " in lay.stdout), lay.output
    r = runner.invoke(app, ["diff", m, m, "--device", "cpu", *flags])
    err = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and r.stdout.strip() == "", r.output
    assert len(err) == 1 and "diff compares what nodes compute" in err[0], r.stderr
