"""grad --check on a float16 model: onnxruntime has float16 kernels, but finite differences in half precision
drown in its rounding, and --check exited 2 ('computes ... in float16'). The model's float64 copy now promotes
float16 as it promotes float32 (``to_float64``), so the rules are checked in float64: the true gradients pass
and a wrong rule FAILs. Oracle: numpy float64 on the same float16 values, y = tanh(x W), L = sum(y):
dL/dW = x^T (1 - y^2)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe import api
from onnxprobe.autodiff import registry
from onnxprobe.cli.main import app

RNG = np.random.default_rng(16)
W = RNG.uniform(-0.5, 0.5, (6, 4)).astype(np.float16)
X = RNG.uniform(-1, 1, (2, 6)).astype(np.float16)


def _model(path) -> str:
    m = make_model([helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Tanh", ["m"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 6])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 4])], [numpy_helper.from_array(W, "W")])
    onnx.save(m, path)
    return str(path)


def test_a_float16_model_is_checked_in_float64(tmp_path):
    res = api.grad(_model(tmp_path / "m.onnx"), api.Selection(all=True), api.RunConfig(device="cpu"),
                   inputs={"x": X}, check=True, save=True)
    assert res.check_mode == "float64"
    x, w = X.astype(np.float64), W.astype(np.float64)
    np.testing.assert_allclose(res.arrays["W"].astype(np.float64), x.T @ (1 - np.tanh(x @ w) ** 2), rtol=5e-3, atol=5e-3)
    rows = {r.name: r for r in res.rows}
    for name in ("W", "m", "y"):
        assert rows[name].check["ok"] is True, (name, rows[name].check)
    assert not res.failed_checks


def test_a_wrong_rule_in_a_float16_model_fails(tmp_path, monkeypatch):
    rule = registry.RULES["Tanh"]
    monkeypatch.setitem(registry.RULES, "Tanh", dataclasses.replace(
        rule, fn=lambda g: [g.Mul(d, g.scalar(1.1)) if d else d for d in rule.fn(g)]))
    res = api.grad(_model(tmp_path / "m.onnx"), api.Selection(all=True), api.RunConfig(device="cpu"),
                   inputs={"x": X}, check=True)
    rows = {r.name: r for r in res.rows}
    for name in ("W", "m"):
        assert rows[name].check["ok"] is False, (name, rows[name].check)
    assert rows["y"].check["ok"] is True, rows["y"].check


def test_cli_checks_a_float16_model(tmp_path):
    np.save(tmp_path / "x.npy", X)
    r = CliRunner().invoke(app, ["grad", _model(tmp_path / "m.onnx"), "--wrt", "W", "--check", "--device", "cpu",
                                 "--input", f"x={tmp_path / 'x.npy'}", "--json", "-"])
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)["gradients"]
    assert row["check"]["ok"] is True, row
