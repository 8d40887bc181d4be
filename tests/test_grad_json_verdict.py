"""`grad --check --json`: the report had no verdict. The command's outcome (pass, a gradient failing the
finite-difference check, a check that judged nothing) was only its exit code and an error line on stderr,
while `diff --json` carries "verdict" and "verdict_reason": a script reading the JSON could not tell a
check that passed from one that compared nothing. The JSON now has both keys, the command's own (the
error line is the reason), and none without --check. QA.

Oracle: numpy float64 (the gradient of sum(tanh(x W)) with respect to W, which the check's verdict rests on)."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from test_grad_check_constant_loss import _softmax_model
from test_grad_check_straight_through import DY, _minimal
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.report.grad import grad_dict

runner = CliRunner()
RNG = np.random.default_rng(7)
X = RNG.standard_normal((2, 4)).astype(np.float32)
W = (RNG.standard_normal((4, 3)) * 0.5).astype(np.float32)


def _tanh_model(path):
    nodes = [helper.make_node("MatMul", ["x", "W"], ["z"], name="mm"), helper.make_node("Tanh", ["z"], ["y"], name="t")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [numpy_helper.from_array(W, "W")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


def _run(tmp_path, args):
    out = tmp_path / "g.json"
    r = runner.invoke(app, ["grad", *args, "--device", "cpu", "--json", str(out)])
    return r, json.loads(out.read_text())


def test_a_check_that_passed_says_pass(tmp_path):
    np.save(tmp_path / "x.npy", X)
    r, d = _run(tmp_path, [_tanh_model(tmp_path / "m.onnx"), "--check", "--input", f"x={tmp_path / 'x.npy'}", "--wrt", "W"])
    assert r.exit_code == 0, r.output
    assert d["verdict"] == "pass" and d["verdict_reason"], d
    x, w = X.astype(np.float64), W.astype(np.float64)
    want = x.T @ (1 - np.tanh(x @ w) ** 2)  # d sum(tanh(x W)) / dW
    (row,) = [g for g in d["gradients"] if g["tensor"] == "W"]
    assert row["check"]["ok"] is True and abs(row["norm"] - np.linalg.norm(want)) < 1e-5 * np.linalg.norm(want)


def test_a_check_that_compared_nothing_is_an_error_in_the_json(tmp_path):
    np.save(tmp_path / "dy.npy", DY)
    r, d = _run(tmp_path, [str(_minimal(tmp_path / "q.onnx")), "--wrt", "W", "--check", "--output-grad", str(tmp_path / "dy.npy")])
    assert r.exit_code == 1 and "checked nothing" in r.stderr, r.output
    assert d["verdict"] == "error" and d["verdict_reason"] in r.stderr, (d.get("verdict"), d.get("verdict_reason"), r.stderr)


def test_a_constant_loss_is_an_error_in_the_json(tmp_path):
    r, d = _run(tmp_path, [str(_softmax_model(tmp_path / "s.onnx")), "--check"])
    assert r.exit_code == 1 and "judged nothing meaningful" in r.stderr, r.output
    assert d["verdict"] == "error" and d["verdict_reason"] in r.stderr, (d.get("verdict"), r.stderr)


def test_a_failed_gradient_is_a_fail_and_no_check_no_verdict(tmp_path):
    np.save(tmp_path / "x.npy", X)
    path = _tanh_model(tmp_path / "m.onnx")
    res = api.grad(path, config=api.RunConfig(device="cpu"), inputs={"x": X}, check=True)
    assert res.verdict()[0] == "pass"
    (row,) = [r for r in res.rows if r.name == "W"]
    row.check["ok"] = False  # as a wrong rule would leave it: the verdict follows the rows
    assert res.verdict()[0] == "fail" and "W" in res.verdict()[1]
    d = grad_dict(res)
    assert d["verdict"] == "fail" and "W" in d["verdict_reason"]
    r, d = _run(tmp_path, [path, "--input", f"x={tmp_path / 'x.npy'}"])
    assert r.exit_code == 0 and "verdict" not in d and "verdict_reason" not in d, d
