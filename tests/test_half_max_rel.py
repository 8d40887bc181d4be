"""max_rel of float16 tensors is a float32 (or wider) quotient: capped at float16's largest value, a pair
with max |a-b|/|b| near 1e5 read inf and failed --rtol 1e6. Oracle: numpy float64 over the tensors' values."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
X = np.array([10.0, 2.0], np.float16)
C_A, C_B = np.array([1.0, 1.0], np.float16), np.array([1e-5, 1.0], np.float16)


def _model(path, c):
    m = make_model([helper.make_node("Mul", ["x", "c"], ["y"], name="mul")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2])], [numpy_helper.from_array(c, "c")])
    onnx.save(m, str(path))


def _oracle(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return float((np.abs(a64 - b64) / np.maximum(np.abs(b64), float(np.finfo(np.float16).smallest_subnormal))).max())


def test_host_sums_of_float16_give_the_quotient_past_65504():
    from onnxprobe.stats.host_sums import pair_sums

    a, b = (X * C_A).astype(np.float16), (X * C_B).astype(np.float16)
    want = _oracle(a, b)
    assert want > float(np.finfo(np.float16).max)  # the case: past float16's range
    got = pair_sums(a, b).metrics(0.0).max_rel
    assert abs(got - want) <= 1e-12 * want, (got, want)


def test_diff_of_float16_models_passes_rtol_above_the_quotient(tmp_path):
    _model(tmp_path / "a.onnx", C_A)
    _model(tmp_path / "b.onnx", C_B)
    np.save(tmp_path / "x.npy", X)
    want = _oracle((X * C_A).astype(np.float16), (X * C_B).astype(np.float16))
    r = runner.invoke(app, ["diff", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--input", f"x={tmp_path / 'x.npy'}",
                            "--metric", "max_rel", "--rtol", "1e6", "--all", "--json", "-"])
    assert r.exit_code == 0, r.output
    pair = next(p for p in json.loads(r.stdout)["pairs"] if p["a"] == "y")
    assert pair["passed"] and abs(pair["max_rel"] - want) <= 1e-9 * want, pair
