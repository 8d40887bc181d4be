"""diff feeds both models the same inputs, made against A's declared shapes: a dimension A leaves dynamic
and B fixes (x [N, 4] against [1, 4]) is refused for every way of giving the feed, naming B, as the
swapped order was (B ran on a 3x4 input and the table FAILed on nothing; QA)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError

runner = CliRunner()


def _relu(path, dims):
    m = make_model([helper.make_node("Relu", ["x"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)])
    onnx.save(m, str(path))
    return str(path)


@pytest.fixture()
def pair(tmp_path):
    return _relu(tmp_path / "dyn.onnx", ["N", 4]), _relu(tmp_path / "fixed.onnx", [1, 4]), tmp_path


@pytest.mark.parametrize("how", ["shape", "input", "inputs"])
def test_a_dimension_only_b_fixes_is_refused(pair, how):
    dyn, fixed, tmp = pair
    x = np.ones((3, 4), np.float32)
    np.save(tmp / "x.npy", x)
    np.savez(tmp / "in.npz", x=x)
    args = {"shape": ["--shape", "x=3x4"], "input": ["--input", f"x={tmp / 'x.npy'}"],
            "inputs": ["--inputs", str(tmp / "in.npz")]}[how]
    r = runner.invoke(app, ["diff", dyn, fixed, *args])
    assert r.exit_code == 2, r.output
    assert r.stderr.strip().splitlines() == ["onnxprobe: error: input x: shape [3, 4], but B fixes dimension 0 to 1: give "
                                             "the sizes B takes, --shape x=1x4 (a dynamic dimension of A that no shape or "
                                             "value gives is 1)"]


def test_a_dimension_only_b_fixes_left_to_its_default_names_the_shape_that_fits(tmp_path):
    """A's [batch, seq] left at 1x1 (no --shape) against B's fixed 2x8: the error read as if the user had given
    [1, 1], and named no way out; it names the one shape both take, which then runs."""
    dyn, fixed = _relu(tmp_path / "dyn.onnx", ["batch", "seq"]), _relu(tmp_path / "fixed.onnx", [2, 8])
    r = runner.invoke(app, ["diff", dyn, fixed])
    assert r.exit_code == 2 and "shape [1, 1], but B fixes dimension 0 to 2: give the sizes B takes, --shape x=2x8" in r.stderr, r.output
    r = runner.invoke(app, ["diff", dyn, fixed, "--shape", "x=2x8"])
    assert r.exit_code == 0, r.output


def test_the_api_and_grad_refuse_it_too(pair):
    dyn, fixed, _ = pair
    with pytest.raises(UsageError, match="B fixes dimension 0 to 1"):
        api.diff(dyn, fixed, inputs={"x": np.ones((3, 4), np.float32)})
    with pytest.raises(UsageError, match="B fixes dimension 0 to 1"):
        api.diff_grad(dyn, fixed, inputs={"x": np.ones((3, 4), np.float32)})


def test_shapes_both_models_take_run(pair):
    dyn, fixed, _ = pair
    res = api.diff(dyn, fixed, inputs={"x": np.full((1, 4), -2.0, np.float32)})
    assert res.verdict()[0] == "pass"
