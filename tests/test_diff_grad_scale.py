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
    # the floor: 1e-2 of the largest weight gradient's max|b| (W's own here: the only weight)
    floor = 1e-2 * np.abs(_grad_w(W0, shift, c)).max()
    assert f"criterion: |a-b| <= 0.0001*max(max|b|, {floor:.3g}) + 0.001*|b| (the default for gradients" in head, head
    d = json.loads(out.read_text())
    assert f"0.0001*max(max|b|, {floor:.3g})" in d["criterion"] and d["verdict"] == "fail"


def test_an_explicit_atol_stays_absolute_and_an_rtol_alone_keeps_the_relative_atol(tmp_path):
    shift, c = SCALES["tiny"]
    a, b = _model(tmp_path / "a.onnx", _disagreeing(), shift, c), _model(tmp_path / "b.onnx", W0, shift, c)
    given = _run(a, b, api.Tolerance.from_flags(atol=1e-4))  # the user's rule, as given: it passes these
    assert _w(given).passed is True and "0.0001 + 0.001*|b|" in given.criterion
    assert "max|b|" not in given.criterion
    rtol = _run(a, b, api.Tolerance.from_flags(rtol=1e-2))
    assert _w(rtol).passed is False and "0.0001*max(max|b|, " in rtol.criterion, rtol.criterion


def test_the_relative_rule_round_trips_through_its_dict():
    t = api.Tolerance(atol=1e-4, rtol=1e-3, atol_relative=True, atol_floor=3e-9)
    assert api.Tolerance.from_dict(t.to_dict()) == t and t.to_dict()["atol_relative"] is True
    assert "atol_relative" not in api.Tolerance().to_dict()


def _softmax_model(path, wk: np.ndarray, bk: np.ndarray, primitive: bool) -> str:
    """y = softmax(x Wk + bk) @ V: bk adds one value to every logit of a row (a key bias
    under Softmax): its gradient is 0 in exact arithmetic, float32 noise in each model. ``primitive``: the
    softmax written as exp / sum(exp), which rounds otherwise."""
    inits = [numpy_helper.from_array(wk.astype(np.float32), "Wk"), numpy_helper.from_array(bk.astype(np.float32), "bk"),
             numpy_helper.from_array(np.linspace(-2, 3, 4 * 3).reshape(4, 3).astype(np.float32), "V"),
             numpy_helper.from_array(np.array([1], np.int64), "axis")]
    nodes = [helper.make_node("MatMul", ["x", "Wk"], ["k"], name="mm"),
             helper.make_node("Add", ["k", "bk"], ["z"], name="bias")]
    if primitive:
        nodes += [helper.make_node("Exp", ["z"], ["e"], name="exp"),
                  helper.make_node("ReduceSum", ["e", "axis"], ["den"], name="den", keepdims=1),
                  helper.make_node("Div", ["e", "den"], ["s"], name="sm")]
    else:
        nodes.append(helper.make_node("Softmax", ["z"], ["s"], name="sm", axis=1))
    nodes.append(helper.make_node("MatMul", ["s", "V"], ["y"], name="out"))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 3])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_a_gradient_zero_in_exact_arithmetic_is_judged_at_the_run_s_scale(tmp_path):
    """bk's gradient is 0 in exact arithmetic (softmax(z + c) = softmax(z)): each model computes float32 noise,
    which its own max|b| would judge (noise against noise: FAIL, as a transformer's key bias against torch).
    Judged at 1e-2 of the largest weight gradient's scale it passes; Wk's real gradient is judged as any."""
    wk = (RNG.standard_normal((5, 4)) * 2).astype(np.float32)
    bk = np.array([[0.5], [-1.0], [2.0], [0.25], [3.0], [-0.5]], np.float32)  # one value per row: a shift of its logits
    a, b = _softmax_model(tmp_path / "a.onnx", wk, bk, True), _softmax_model(tmp_path / "b.onnx", wk, bk, False)
    res = _run(a, b)
    rows = {r.pair.b.name: r for r in res.results}
    x = X.astype(np.float64)
    z = x @ wk.astype(np.float64) + bk
    s = np.exp(z - z.max(1, keepdims=True))
    s /= s.sum(1, keepdims=True)
    v = np.linspace(-2, 3, 12).reshape(4, 3)
    ds = np.ones((6, 3)) @ v.T
    dz = s * (ds - (ds * s).sum(1, keepdims=True))
    assert np.abs(dz.sum(1)).max() < 1e-12  # the oracle: bk's gradient is 0
    gw = x.T @ dz
    assert rows["bk_grad"].metrics.b_absmax < 1e-5 * np.abs(gw).max()  # noise, far below Wk's
    assert rows["Wk_grad"].passed is True and rows["bk_grad"].passed is True, (rows["bk_grad"].metrics, res.criterion)
    assert res.verdict()[0] == "pass"


def _key_bias_model(path, quantized: bool) -> str:
    """Attention of x [4, 8] over itself, y = Softmax(q k^T) v with q = x Wq, k = x Wk + bk, v = x Wv: the key bias bk
    adds q bk to every score of a query's row, which Softmax cancels, so dL/dbk is 0 in exact arithmetic and float32
    noise in each model. ``quantized``: x Wv through a QuantizeLinear / DequantizeLinear pair."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array((rng.standard_normal((8, 8)) * 0.3).astype(np.float32), n) for n in ("Wq", "Wk", "Wv")]
    inits += [numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "bk"),
              numpy_helper.from_array(np.float32(0.05), "s"), numpy_helper.from_array(np.int8(0), "zp")]
    nodes = [helper.make_node("MatMul", ["x", "Wq"], ["qm"], name="mq"), helper.make_node("MatMul", ["x", "Wk"], ["km"], name="mk"),
             helper.make_node("Add", ["km", "bk"], ["k"], name="addk"), helper.make_node("MatMul", ["x", "Wv"], ["vm"], name="mv")]
    nodes += [helper.make_node("QuantizeLinear", ["vm", "s", "zp"], ["vq"], name="q"),
              helper.make_node("DequantizeLinear", ["vq", "s", "zp"], ["v"], name="dq")] if quantized else [
              helper.make_node("Identity", ["vm"], ["v"], name="id")]
    nodes += [
              helper.make_node("Transpose", ["k"], ["kt"], name="t", perm=[1, 0]),
              helper.make_node("MatMul", ["qm", "kt"], ["sc"], name="scores"),
              helper.make_node("Softmax", ["sc"], ["p"], name="sm", axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"], name="mo")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


def test_a_quantized_models_gradient_that_is_zero_in_exact_arithmetic_is_noise(tmp_path):
    """diff --grad of a QDQ model against its float original: the key bias's gradient, 0 in exact arithmetic (the
    oracle: numpy float64 of the same attention), is float32 noise on each side; SQNR >= 10 dB judged noise against
    noise and failed the run. The weights' gradients are still judged by their SQNR, and one that differs fails."""
    a, b = _key_bias_model(tmp_path / "q.onnx", True), _key_bias_model(tmp_path / "f.onnx", False)
    x = np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32)
    w = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in onnx.load(b).graph.initializer}
    xd = x.astype(np.float64)
    q, v = xd @ w["Wq"], xd @ w["Wv"]  # (B's: no quantization)
    k = xd @ w["Wk"] + w["bk"]
    sc = q @ k.T
    p = np.exp(sc - sc.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dp = np.ones((4, 8)) @ v.T  # loss = sum(y)
    dsc = p * (dp - (p * dp).sum(-1, keepdims=True))
    dbk = (dsc.T @ q).sum(0)  # dL/dk = dsc^T q, summed over the keys for the bias
    assert np.abs(dbk).max() < 1e-12 * np.abs(dsc.T @ q).max()  # the oracle: 0
    res = api.diff_grad(a, b, selection=api.Selection(all=True), inputs=api.InputSpec(arrays={"x": x}))
    rows = {r.pair.a.name: r for r in res.results}
    bk = rows["bk_grad"]
    assert bk.tolerance.metric == "sqnr" and bk.metrics.max_abs < 1e-5 and bk.passed, (bk.metrics, bk.tolerance)
    assert all(rows[f"{n}_grad"].passed for n in ("Wq", "Wk", "Wv")) and res.verdict()[0] == "pass", res.verdict()
    m = onnx.load(a)  # a gradient that really differs still fails: Wv doubled in A
    m.graph.initializer[2].CopyFrom(numpy_helper.from_array(2 * numpy_helper.to_array(m.graph.initializer[2]), "Wv"))
    onnx.save(m, tmp_path / "q2.onnx")
    assert api.diff_grad(str(tmp_path / "q2.onnx"), b, inputs=api.InputSpec(arrays={"x": x})).verdict()[0] == "fail"
