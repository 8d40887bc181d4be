"""grad --check judges the gradients it shows. In float64 mode the check recomputes the gradients with a
float64 copy of the backward graph and compares those with finite differences; a shown (float32) gradient
that overflowed to Inf, or became NaN, where the float64 one is finite is not what was checked, and must
not read "ok". Oracle: dL/dw = sum(x) = 6e38, past float32's largest value (3.4e38), while the loss
sum(x * w) = 3e38 is finite."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()


def _overflowing(tmp_path):
    m = make_model([helper.make_node("Mul", ["x", "w"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1])],
                   [numpy_helper.from_array(np.array([0.5], np.float32), "w")])
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    x = tmp_path / "x.npy"
    np.save(x, np.full((2, 1), 3e38, np.float32))
    return path, x


def test_an_overflowed_gradient_does_not_pass_the_float64_check(tmp_path):
    path, x = _overflowing(tmp_path)
    r = runner.invoke(app, ["grad", str(path), "--wrt", "w", "--input", f"x={x}", "--check", "--format", "json"])
    rows = json.loads(r.stdout)["rows"] if isinstance(json.loads(r.stdout), dict) else json.loads(r.stdout)
    (row,) = [row for row in rows if row["tensor"] == "w"]
    assert row["inf"] == 1
    assert row["check_ok"] is not True, row
    assert r.exit_code == 1, r.output


def test_a_finite_gradient_still_passes(tmp_path):
    path, _ = _overflowing(tmp_path)
    x = tmp_path / "small.npy"
    np.save(x, np.full((2, 1), 3.0, np.float32))
    r = runner.invoke(app, ["grad", str(path), "--wrt", "w", "--input", f"x={x}", "--check", "--format", "json"])
    assert r.exit_code == 0, r.output
