"""diff --grad compares the weights that live inside If / Loop / Scan bodies (torch's TorchScript exporter
writes silero-vad's every Conv and LSTM weight as a Constant of an If branch): `grad` moves them to the
main graph and differentiates them, so `diff --grad` pairs and measures them too (it compared none and
said 'the model has no weights', exit 1, for two copies of silero_vad.onnx). Oracle: for
L = sum((x @ w)^2), dL/dw = 2 x^T (x @ w), worked out in numpy."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as H
from onnx import numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

RNG = np.random.default_rng(4)
W = RNG.standard_normal((3, 2)).astype(np.float32)
X = RNG.standard_normal((2, 3)).astype(np.float32)


def _model(path, w: np.ndarray) -> None:
    def branch(name, scale):
        nodes = [H.make_node("Constant", [], [f"{name}.w"], value=numpy_helper.from_array(w * scale, f"{name}.w")),
                 H.make_node("MatMul", ["x", f"{name}.w"], [f"{name}.h"]),
                 H.make_node("Mul", [f"{name}.h", f"{name}.h"], [f"{name}.y"])]
        return H.make_graph(nodes, name, [], [H.make_tensor_value_info(f"{name}.y", T.FLOAT, [2, 2])])

    nodes = [H.make_node("If", ["c"], ["y"], then_branch=branch("then", 1.0), else_branch=branch("else", -1.0))]
    g = H.make_graph(nodes, "g", [H.make_tensor_value_info("x", T.FLOAT, [2, 3]), H.make_tensor_value_info("c", T.BOOL, [])],
                     [H.make_tensor_value_info("y", T.FLOAT, [2, 2])])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))


def _diff(tmp_path, w_b):
    a, b, js = tmp_path / "a.onnx", tmp_path / "b.onnx", tmp_path / "d.json"
    _model(a, W)
    _model(b, w_b)
    np.save(tmp_path / "x.npy", X)
    r = CliRunner().invoke(app, ["diff", "--grad", str(a), str(b), "--input", f"x={tmp_path / 'x.npy'}",
                                 "--input", "c=1", "--json", str(js)])
    return r, json.loads(js.read_text())


def _grad(w):
    x, w = X.astype(np.float64), w.astype(np.float64)
    return 2 * x.T @ (x @ w)


def test_the_weights_of_a_branch_are_compared(tmp_path):
    r, got = _diff(tmp_path, W)
    pairs = {p["a"]: p for p in got["pairs"]}
    assert pairs["then.w_grad"]["is_output"] and pairs["then.w_grad"]["passed"] is True, (sorted(pairs), r.output)
    assert got["verdict"] == "pass" and r.exit_code == 0, r.output


def test_a_branch_weight_whose_gradient_differs_fails(tmp_path):
    w_b = W * 1.5
    r, got = _diff(tmp_path, w_b)
    pairs = {p["a"]: p for p in got["pairs"]}
    p = pairs["then.w_grad"]
    assert p["passed"] is False and got["verdict"] == "fail" and r.exit_code == 1, r.output
    want = np.abs(_grad(W) - _grad(w_b)).max()
    assert np.isclose(p["max_abs"], want, rtol=1e-4), (p["max_abs"], want)
