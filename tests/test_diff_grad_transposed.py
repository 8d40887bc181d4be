"""diff --grad of a layer whose weight one model holds as it is and reads transposed (Gemm transB=1: torch's
legacy export of nn.Linear, F.linear) and the other holds transposed (dynamo's export of torch.addmm(b, x,
W.t()) writes the Gemm's B as an initializer 't' = W^T). A square weight has one shape in both: the two
gradients were paired and compared element by element, one the other's transpose, and two exports of one
module FAILed (cosine 0.03). Such weights are each other's transpose, not one function of the data: left
unpaired with that reason (cause different-function), never a FAIL; the bias still pairs and decides."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

RNG = np.random.default_rng(7)
W = RNG.standard_normal((4, 4)).astype(np.float32)
C = RNG.standard_normal(4).astype(np.float32)
X = RNG.standard_normal((3, 4)).astype(np.float32)


def _gemm(path, w: np.ndarray, trans_b: int, c: np.ndarray = C) -> None:
    m = make_model([helper.make_node("Gemm", ["x", "w", "c"], ["h"], transB=trans_b), helper.make_node("Tanh", ["h"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
                   [numpy_helper.from_array(w, "w"), numpy_helper.from_array(c, "c")])
    onnx.save(m, path)


def _diff(tmp_path, b: str):
    np.save(tmp_path / "x.npy", X)
    js = tmp_path / "d.json"
    r = CliRunner().invoke(app, ["diff", "--grad", str(tmp_path / "a.onnx"), str(tmp_path / b), "--input",
                                 f"x={tmp_path / 'x.npy'}", "--json", str(js)])
    return r, json.loads(js.read_text())


def test_a_weight_held_transposed_is_not_compared_element_by_element(tmp_path):
    _gemm(tmp_path / "a.onnx", W, 1)  # y = tanh(x W^T + c)
    _gemm(tmp_path / "b.onnx", np.ascontiguousarray(W.T), 0)  # the same function, W^T held
    r, got = _diff(tmp_path, "b.onnx")
    pairs = {p["a"]: p for p in got["pairs"]}
    assert "w_grad" not in pairs, r.output
    why = {u["name"]: u for u in got["unmatched_a"]}
    assert why["w_grad"]["cause"] == "different-function" and "transpose" in why["w_grad"]["reason"], why
    assert pairs["c_grad"]["passed"] is True and got["verdict"] == "pass" and r.exit_code == 0, r.output


def test_a_weight_held_alike_still_pairs_and_a_changed_one_fails(tmp_path):
    _gemm(tmp_path / "a.onnx", W, 1)
    _gemm(tmp_path / "same.onnx", W, 1)
    r, got = _diff(tmp_path, "same.onnx")
    assert {p["a"] for p in got["pairs"]} >= {"w_grad", "c_grad"} and r.exit_code == 0, r.output
    w2 = W.copy()
    w2[0, 1] += 0.5
    _gemm(tmp_path / "moved.onnx", np.ascontiguousarray(w2.T), 0)
    r, got = _diff(tmp_path, "moved.onnx")
    assert r.exit_code == 1, r.output  # the bias gradient differs: the layer computes another function
