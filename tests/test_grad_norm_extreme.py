"""A gradient of float64 values near 1e-300, all equal, read |grad| 0 and |g|/|t| 0 beside its min, max and
mean of 1e-300: the in-graph row keeps such a tensor about its shift (unit 1, no spread), and the norm
squared the shift (6e-600 underflows to 0). Its norm is now taken at the values' scale. Oracle: math.hypot
of the analytic gradient (d sum(x*c + a) / dx = c everywhere)."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.stats.tensor_stats import TensorStats


def _scaled(tmp_path, c: float) -> str:
    m = make_model([helper.make_node("Mul", ["x", "c"], ["m"], name="mul"), helper.make_node("Add", ["m", "a"], ["y"], name="add")],
                   [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2, 3])],
                   [numpy_helper.from_array(np.array(c), "c"), numpy_helper.from_array(np.array(0.0), "a")])
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    return path


@pytest.mark.parametrize("c", [1e-300, 3e-200, 1e-130, 2.5e150, 1e160])
def test_the_norm_of_a_constant_gradient_at_an_extreme_scale(tmp_path, c):
    r = api.grad(_scaled(tmp_path, c), api.Selection(all=True))
    row = next(row for row in r.rows if row.name == "x")
    assert row.stats.min == row.stats.max == c
    assert row.norm == pytest.approx(math.hypot(*[c] * 6), rel=1e-12, abs=0)
    out = CliRunner().invoke(app, ["grad", _scaled(tmp_path, c), "--all", "--format", "csv", "--columns", "tensor,norm"])
    assert out.exit_code == 0, out.output
    assert float(dict(line.split(",") for line in out.stdout.splitlines()[1:])["x"]) == pytest.approx(math.hypot(*[c] * 6), rel=1e-12, abs=0)


def test_the_norm_of_shifted_stats_at_an_extreme_scale():
    # the row as the graph keeps it: shift c, no spread, unit 1
    for c in (1e-300, -1e-300, 1e-160, 1e160):
        t = TensorStats(count=6, nan=0, inf=0, min=c, max=c, shift=c, s1=0.0, s2=0.0, sumabs=6 * abs(c), unit=1.0)
        assert t.norm == pytest.approx(math.hypot(*[c] * 6), rel=1e-12, abs=0), c
