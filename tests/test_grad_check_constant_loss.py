"""`grad --check` where the loss is constant (the sum of a Softmax, of a LayerNormalization of one scale value,
of a MeanVarianceNormalization): the gradients the loss is constant in are float32 rounding noise, which
finite differences (flat: the loss does not move) read as FAIL ('22 gradient(s) failed the finite-difference
check' on light_squeezenet, blaming the rules). As `diff --grad` does (compare.constant_loss), they are shown
but not judged (row `noise`, JSON `unjudged` with the reason, counted apart in the footer), and the command's
outcome says the loss is constant, with exit code 1; the gradients that are real (the output's and those
between it and the Softmax, a LayerNormalization's scale and bias) are judged, and the LayerNormalization's
scale carries the verdict.

Oracles: numpy float64 (the loss is the same for perturbed tensors, so the true gradient is 0; the
LayerNormalization scale's gradient is its normalized values summed over the rows, its bias's a count of rows).
"""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app

CPU = api.RunConfig(device="cpu", opt_level="off")
RNG = np.random.default_rng(2)
N, OFF = 8, 1e5
CONV_W = RNG.standard_normal((4, 3, 1, 1)).astype(np.float32)
X = RNG.standard_normal((1, 3, N, N)).astype(np.float32)


def _softmax_model(path):
    """x -> Conv (no float64 kernel: the check runs in float32) -> Flatten -> + big - big2 (1e5 each: the
    logits are x's, their gradients float32 noise ~1e-7) -> Softmax -> y."""
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"]), helper.make_node("Flatten", ["c"], ["f"]),
             helper.make_node("Add", ["f", "big"], ["a"]), helper.make_node("Sub", ["a", "big2"], ["z"]),
             helper.make_node("Softmax", ["z"], ["s"], axis=1), helper.make_node("Identity", ["s"], ["y"])]
    inits = [numpy_helper.from_array(CONV_W, "W"), numpy_helper.from_array(np.full(4 * N * N, OFF, np.float32), "big"),
             numpy_helper.from_array(np.full(4 * N * N, OFF, np.float32), "big2")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, N, N])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _softmax_sum64(big, big2) -> float:
    c = np.einsum("oi,nihw->nohw", CONV_W[:, :, 0, 0].astype(np.float64), X.astype(np.float64)).reshape(1, -1)
    z = c + big - big2
    e = np.exp(z - z.max())
    return float((e / e.sum()).sum())


XL = RNG.standard_normal((2, 3, 8)).astype(np.float32)
WL = RNG.standard_normal((8, 8)).astype(np.float32)
BETA = RNG.standard_normal(8).astype(np.float32)


def _norm_model(path, norm: str):
    """x[2,3,8] -> MatMul(W) -> LayerNormalization (scale 1 everywhere, bias beta) or MeanVarianceNormalization
    -> y."""
    inits = [numpy_helper.from_array(WL, "W")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"])]
    if norm == "LayerNormalization":
        inits += [numpy_helper.from_array(np.ones(8, np.float32), "gamma"), numpy_helper.from_array(BETA, "beta")]
        nodes.append(helper.make_node("LayerNormalization", ["h", "gamma", "beta"], ["y"], axis=-1))
    else:
        nodes.append(helper.make_node("MeanVarianceNormalization", ["h"], ["y"], axes=[2]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


def test_softmax_sum_noise_is_not_judged(tmp_path):
    """The oracle: the float64 loss is the same for other offsets, so every gradient before the Softmax is 0;
    the check had read the float32 noise on big / big2 as FAIL (flat)."""
    assert abs(_softmax_sum64(np.full(4 * N * N, OFF), np.full(4 * N * N, OFF))
               - _softmax_sum64(RNG.standard_normal(4 * N * N) * 1e3 + OFF, np.full(4 * N * N, OFF))) < 1e-12
    path = _softmax_model(tmp_path / "sm.onnx")
    res = api.grad(path, api.Selection(all=True), CPU, inputs={"x": X}, check=True)
    rows = {r.name: r for r in res.rows}
    for name in ("W", "big", "big2", "c", "f", "a", "z", "x"):
        assert rows[name].check is None and "constant" in rows[name].unjudged, (name, rows[name].check)
    assert not res.failed_checks
    for name in ("s", "y"):  # dL/dy = 1, real: judged (and right)
        assert rows[name].unjudged is None and rows[name].check["ok"] is True, (name, rows[name].check)
    assert res.constant_loss and "Softmax" in res.constant_loss


def test_softmax_sum_cli_says_the_loss_is_constant(tmp_path):
    path = _softmax_model(tmp_path / "sm.onnx")
    r = CliRunner().invoke(app, ["grad", str(path), "--wrt", "big*", "--check", "--device", "cpu"],
                           env={"COLUMNS": "80"})
    assert r.exit_code == 1, r.output
    assert "failed the finite-difference check" not in r.output and "FAIL" not in r.output, r.output
    assert "constant" in r.output and "--output-grad" in r.output and "Traceback" not in r.output, r.output
    assert "noise" in r.stdout and "2 noise (not judged)" in r.stdout, r.stdout
    assert all(len(line) <= 80 for line in r.stdout.splitlines()), r.stdout
    r = CliRunner().invoke(app, ["grad", str(path), "--wrt", "big*", "--check", "--device", "cpu", "--json", "-"])
    assert r.exit_code == 1
    d = json.loads(r.stdout)
    assert d["constant_loss"] and "Softmax" in d["constant_loss"]
    for row in d["gradients"]:
        assert "constant" in row["unjudged"] and "check" not in row, row
    r = CliRunner().invoke(app, ["grad", str(path), "--wrt", "big*", "--check", "--device", "cpu", "--format", "csv"])
    lines = r.stdout.strip().splitlines()
    head = lines[0].split(",")
    assert all(line.split(",")[head.index("check_ok")] == "" for line in lines[1:]), r.stdout
    assert all("constant" in line.split(",", head.index("unjudged"))[-1] for line in lines[1:]), r.stdout


def test_layernorm_sum_judges_its_scale_and_bias(tmp_path):
    """Constant in W and in everything before the LayerNormalization (noise, not judged); not in gamma (the
    normalized values summed over the rows) nor beta (a count of rows): those are judged, and pass, and the
    verdict stands on them (exit 0)."""
    path = _norm_model(tmp_path / "ln.onnx", "LayerNormalization")
    res = api.grad(path, api.Selection(all=True), CPU, inputs={"x": XL}, check=True, save=True)
    rows = {r.name: r for r in res.rows}
    assert rows["W"].unjudged and rows["W"].check is None
    h = XL.astype(np.float64) @ WL.astype(np.float64)
    n = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(np.asarray(res.arrays["gamma"], np.float64), n.sum((0, 1)), atol=1e-4)
    np.testing.assert_allclose(res.arrays["beta"], np.full(8, 6.0), atol=1e-5)
    for name in ("gamma", "beta", "y"):
        assert rows[name].unjudged is None and rows[name].check["ok"] is True, (name, rows[name].check)
    assert res.constant_loss is None
    r = CliRunner().invoke(app, ["grad", str(path), "--check", "--device", "cpu"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert "noise" in r.stdout and "FAIL" not in r.stdout


def test_mean_variance_normalization_sum_is_no_pass(tmp_path):
    """It sums to 0: every gradient before it is noise, and dL/dy = 1 alone earns no verdict."""
    path = _norm_model(tmp_path / "mvn.onnx", "MeanVarianceNormalization")
    res = api.grad(path, api.Selection(all=True), CPU, inputs={"x": XL}, check=True)
    rows = {r.name: r for r in res.rows}
    for name in ("W", "h", "x"):
        assert rows[name].unjudged and rows[name].check is None, name
    assert rows["y"].check["ok"] is True
    assert res.constant_loss and "MeanVarianceNormalization" in res.constant_loss
    r = CliRunner().invoke(app, ["grad", str(path), "--check", "--device", "cpu"])
    assert r.exit_code == 1 and "constant" in r.output and "Traceback" not in r.output, r.output


def test_a_loss_that_is_not_constant_judges_everything(tmp_path):
    path = _softmax_model(tmp_path / "sm.onnx")
    res = api.grad(path, api.Selection(names=["W", "big"]), CPU, inputs={"x": X}, check=True,
                   spec=api.GradSpec(loss="mse", target=np.zeros((1, 4 * N * N), np.float32)))
    assert res.constant_loss is None and all(r.unjudged is None for r in res.rows)


def test_the_constant_loss_is_said_first(tmp_path):
    """Softmax -> QuantizeLinear -> DequantizeLinear (a QDQ model's output): the constant loss is the outcome,
    said first whatever the chain's gradients earned (the straight-through one of the Softmax's output against
    finite differences of a staircase)."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["z"]), helper.make_node("Softmax", ["z"], ["s"], axis=-1),
             helper.make_node("QuantizeLinear", ["s", "sc", "zp"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "sc", "zp"], ["y"])]
    inits = [numpy_helper.from_array(WL, "W"), numpy_helper.from_array(np.array(1 / 255, np.float32), "sc"),
             numpy_helper.from_array(np.array(0, np.uint8), "zp")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    path = tmp_path / "qdq.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    r = CliRunner().invoke(app, ["grad", str(path), "--check", "--all", "--device", "cpu"])
    assert r.exit_code == 1, r.output
    last = [line for line in r.output.splitlines() if "error:" in line]
    assert len(last) == 1 and "--check judged nothing meaningful" in last[0] and "Softmax" in last[0], r.output


def test_api_grad_check_alone_says_the_loss_is_constant(tmp_path):
    """api.grad_check on api.grad's result (the API's two steps) earns the same outcome as grad(check=True)."""
    path = _norm_model(tmp_path / "mvn.onnx", "MeanVarianceNormalization")
    res = api.grad(path, api.Selection(all=True), CPU, inputs={"x": XL}, save=True)
    assert res.constant_loss is None  # nothing was checked: no verdict to void
    api.grad_check(path, res.plan, {"x": XL}, res)
    assert res.constant_loss and "MeanVarianceNormalization" in res.constant_loss
    assert res.check_mode is not None and {r.name for r in res.rows if r.unjudged} == {"W", "h", "x"}
