"""Edges of diff's metrics, against numpy float64: the host's allclose excess and max relative error in
float64, max_rel where b is tiny or zero, the threshold of the absolute metrics, no RuntimeWarning from the
metric code, the per-sample SQNR line of a dataset diff and the depth sparkline."""

from __future__ import annotations

import json
import warnings

import numpy as np
import onnx
from conftest import make_model
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app
from onnxprobe.stats.metrics import Tolerance
from onnxprobe.stats.pooled import pair_sums


def _affine(path, w: float, c: float, dtype=TensorProto.FLOAT, np_dt=np.float32, dim="N") -> str:
    """x -> Mul(w) -> Add(c) -> Neg -> out, x of one dynamic dimension (QA's models)."""
    nodes = [helper.make_node("Mul", ["x", "w"], ["m"], name="mul"), helper.make_node("Add", ["m", "c"], ["y"], name="add"),
             helper.make_node("Neg", ["y"], ["out"], name="neg")]
    m = make_model(nodes, [helper.make_tensor_value_info("x", dtype, [dim])], [helper.make_tensor_value_info("out", dtype, [dim])],
                   [numpy_helper.from_array(np.array(w, np_dt), "w"), numpy_helper.from_array(np.array(c, np_dt), "c")])
    onnx.save(m, str(path))
    return str(path)


def _oracle(a: np.ndarray, b: np.ndarray, rtol: float) -> tuple[float, float]:
    """numpy float64: max(|a-b| - rtol |b|), and max |a-b| / |b| (0 where both are 0, inf where only b is)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    d, absb = np.abs(a64 - b64), np.abs(b64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(d == 0, 0.0, d / absb)
    return float((d - rtol * absb).max()), float(rel.max())


def test_host_excess_and_max_rel_are_float64():
    # a pair 2^-10 apart at b = 1: one float64 ulp-ish over rtol, which float32(rtol) rounds up to 2^-10
    rtol = 0.0009765624999
    b = np.ones(8, np.float32)
    a = b + np.float32(2.0 ** -10)
    s = pair_sums(a, b, rtol)
    m = s.metrics(rtol)
    want_excess, want_rel = _oracle(a, b, rtol)
    assert want_excess > 0 and m.allclose_excess == want_excess
    assert not Tolerance("allclose", atol=0.0, rtol=rtol).passes(m)
    rng = np.random.default_rng(0)
    b = rng.normal(size=5000).astype(np.float32)
    a = (b * (1 + rng.normal(scale=1e-3, size=5000))).astype(np.float32)
    m = pair_sums(a, b, 1e-3).metrics(1e-3)
    want_excess, want_rel = _oracle(a, b, 1e-3)
    assert m.allclose_excess == want_excess and m.max_rel == want_rel  # float64 exactly, not float32's rounding


def test_host_path_diff_judges_in_float64(tmp_path):
    # A = 1 + 2^-10 where B = 1 (x = 0): allclose with atol 0 and rtol just under 2^-10 fails
    a = _affine(tmp_path / "a.onnx", 1.0, 1.0 + 2.0 ** -10)
    b = _affine(tmp_path / "b.onnx", 1.0, 1.0)
    np.savez(tmp_path / "s.npz", x=np.zeros(4, np.float32))
    out = tmp_path / "r.json"
    r = CliRunner().invoke(app, ["diff", a, b, "--inputs-dir", str(tmp_path / "s.npz"), "--atol", "0",
                                 "--rtol", "0.0009765624999", "--separate-runs", "--json", str(out)])
    d = json.loads(out.read_text())
    assert d["pairs"][-1]["passed"] is False and r.exit_code == 1, r.output


def test_one_sample_is_said_in_the_singular(tmp_path):
    a = _affine(tmp_path / "a.onnx", 2.0, 0.5)
    b = _affine(tmp_path / "b.onnx", 2.0, 0.0)
    (tmp_path / "ds").mkdir()
    np.savez(tmp_path / "ds" / "s0.npz", x=np.full(5, 3.0, np.float32))
    r = CliRunner().invoke(app, ["diff", a, b, "--inputs-dir", str(tmp_path / "ds")])
    assert "pooled over 1 sample:" in r.output, r.output
