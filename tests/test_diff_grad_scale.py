"""`diff --grad`'s default criterion follows each gradient's own scale: a saturated Sigmoid's gradients of
~1e-9 that disagree (cosine ~0.9) fail, and float32 rounding differences pass, whatever the magnitude.

The absolute atol 1e-4 of the float default could not fail on values that are all far below it (PP-OCRv4
det against its onnxruntime-optimised copy: pairs of cosine 0.92 read "pass"). Oracle: the gradients of
y = c * sigmoid(x W) by hand in numpy float64; nothing is compared with onnxprobe's own output.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app

runner = CliRunner()
RNG = np.random.default_rng(11)
X = RNG.random((6, 5)).astype(np.float32)
W0 = (RNG.standard_normal((5, 4)) * 0.3).astype(np.float32)
# (shift of x W, output scale c): gradients of ~1e-9 (as a saturated Sigmoid's; not by saturating one:
# onnxruntime's Sigmoid rounds its tail to multiples of ~6e-8, 0 at -20, which leaves rounding noise), and
# of ~1e3
SCALES = {"tiny": (-3.0, 1e-7), "large": (-3.0, 1e4)}


def _model(path, w: np.ndarray, shift: float, c: float, primitive: bool = False) -> str:
    """y = c * sigmoid(x W + shift); ``primitive``: the sigmoid as 1 / (1 + exp(-z)), which rounds otherwise."""
    inits = [numpy_helper.from_array(w.astype(np.float32), "W"), numpy_helper.from_array(np.float32(shift), "shift"),
             numpy_helper.from_array(np.float32(c), "c"), numpy_helper.from_array(np.float32(1), "one")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"], name="mm"), helper.make_node("Add", ["xw", "shift"], ["z"], name="add")]
    if primitive:
        nodes += [helper.make_node("Neg", ["z"], ["nz"], name="neg"), helper.make_node("Exp", ["nz"], ["e"], name="exp"),
                  helper.make_node("Add", ["e", "one"], ["den"], name="den"),
                  helper.make_node("Reciprocal", ["den"], ["s"], name="sig")]
    else:
        nodes.append(helper.make_node("Sigmoid", ["z"], ["s"], name="sig"))
    nodes.append(helper.make_node("Mul", ["s", "c"], ["y"], name="scale"))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 4])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def _grad_w(w: np.ndarray, shift: float, c: float) -> np.ndarray:
    """d sum(y) / dW in float64: x^T (c s (1 - s))."""
    z = X.astype(np.float64) @ w.astype(np.float64) + shift
    s = 1 / (1 + np.exp(-z))
    return X.astype(np.float64).T @ (c * s * (1 - s))


def _cos(a, b) -> float:
    return float(np.sum(a * b) / np.sqrt(np.sum(a * a) * np.sum(b * b)))


def _disagreeing() -> np.ndarray:
    """W with two columns moved: the gradient's cosine against W0's is ~0.9 at either scale."""
    w = W0.copy()
    w[:, 0] += 0.35
    w[:, 2] -= 0.2
    return w


def _run(a, b, tolerance=None):
    return api.diff_grad(a, b, tolerance=tolerance, inputs=api.InputSpec(arrays={"x": X}))


def _w(res):
    return next(r for r in res.results if r.pair.b.name == "W_grad")


@pytest.mark.parametrize("scale", list(SCALES))
def test_a_gradient_disagreement_fails_whatever_its_magnitude(tmp_path, scale):
    shift, c = SCALES[scale]
    w = _disagreeing()
    ga, gb = _grad_w(w, shift, c), _grad_w(W0, shift, c)
    assert 0.8 < _cos(ga, gb) < 0.95  # the oracle: these gradients disagree
    if scale == "tiny":  # the absolute atol 1e-4 could not tell them apart
        assert np.abs(gb).max() < 1e-7 and np.abs(ga - gb).max() < 1e-6
    res = _run(_model(tmp_path / "a.onnx", w, shift, c), _model(tmp_path / "b.onnx", W0, shift, c))
    r = _w(res)
    assert abs(r.metrics.cosine - _cos(ga, gb)) < 1e-3  # what was measured is the oracle's gradients
    assert r.passed is False and r in res.outputs_failed and res.verdict()[0] == "fail"


@pytest.mark.parametrize("scale", list(SCALES))
def test_float32_rounding_differences_pass_whatever_the_magnitude(tmp_path, scale):
    shift, c = SCALES[scale]
    res = _run(_model(tmp_path / "a.onnx", W0, shift, c, primitive=True), _model(tmp_path / "b.onnx", W0, shift, c))
    r = _w(res)
    g = _grad_w(W0, shift, c)
    assert abs(r.metrics.b_absmax - np.abs(g).max()) <= 1e-4 * np.abs(g).max()  # B's gradient is the oracle's
    assert not r.metrics.exact  # the two sigmoids round differently: something was compared, not copied
    assert r.passed is True and res.verdict()[0] == "pass", (r.metrics, res.criterion)


def test_the_criterion_says_the_atol_is_relative_to_each_gradient(tmp_path):
    shift, c = SCALES["tiny"]
    a, b = _model(tmp_path / "a.onnx", _disagreeing(), shift, c), _model(tmp_path / "b.onnx", W0, shift, c)
    out = tmp_path / "r.json"
    x = tmp_path / "x.npy"
    np.save(x, X)
    got = runner.invoke(app, ["diff", "--grad", a, b, "--input", f"x={x}", "--json", str(out)])
    assert got.exit_code == 1, got.output
    head = " ".join(got.stdout.split("loss sum:")[0].split())  # the header, its wrapped lines joined
    assert "criterion: |a-b| <= 0.0001*max|b| + 0.001*|b| (the default for gradients" in head, head
    d = json.loads(out.read_text())
    assert "0.0001*max|b|" in d["criterion"] and d["verdict"] == "fail"


def test_an_explicit_atol_stays_absolute_and_an_rtol_alone_keeps_the_relative_atol(tmp_path):
    shift, c = SCALES["tiny"]
    a, b = _model(tmp_path / "a.onnx", _disagreeing(), shift, c), _model(tmp_path / "b.onnx", W0, shift, c)
    given = _run(a, b, api.Tolerance.from_flags(atol=1e-4))  # the user's rule, as given: it passes these
    assert _w(given).passed is True and "0.0001 + 0.001*|b|" in given.criterion
    assert "max|b|" not in given.criterion
    rtol = _run(a, b, api.Tolerance.from_flags(rtol=1e-2))
    assert _w(rtol).passed is False and "0.0001*max|b| + 0.01*|b|" in rtol.criterion, rtol.criterion


def test_the_relative_rule_round_trips_through_its_dict():
    t = api.Tolerance(atol=1e-4, rtol=1e-3, atol_relative=True)
    assert api.Tolerance.from_dict(t.to_dict()) == t and t.to_dict()["atol_relative"] is True
    assert "atol_relative" not in api.Tolerance().to_dict()
