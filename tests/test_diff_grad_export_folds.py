"""diff --grad of two exports of one module where one exporter folded what the other keeps (GPT-2 tiny,
legacy against dynamo): a zero bias dynamo's optimizer dropped (adding zeros), and the tied output layer's
transposed embedding that legacy holds as an initializer ('onnx::MatMul_591') and dynamo computes
(Transpose of the embedding). Every real weight agreed, and the verdict was an error ('3 of the weight
gradients could not be compared'). Such weights have no counterpart to compare: cause folded, with the
reason, and the verdict is about the rest; a nonzero bias one model lacks still counts as missing."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

RNG = np.random.default_rng(11)
E = RNG.standard_normal((10, 4)).astype(np.float32)
W = RNG.standard_normal((4, 4)).astype(np.float32)
IDS = np.array([[1, 3, 5], [7, 9, 0]], np.int64)


def _model(path, bias: np.ndarray | None, held_transpose: bool) -> None:
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["h"]),
             helper.make_node("MatMul", ["h", "w"], ["m"])]
    inits = [numpy_helper.from_array(E, "emb"), numpy_helper.from_array(W, "w")]
    if bias is not None:
        nodes.append(helper.make_node("Add", ["m", "bias"], ["mb"]))
        inits.append(numpy_helper.from_array(bias, "bias"))
    nodes.append(helper.make_node("Tanh", ["mb" if bias is not None else "m"], ["t"]))
    if held_transpose:  # legacy: the transposed copy folded into an initializer
        inits.append(numpy_helper.from_array(np.ascontiguousarray(E.T), "onnx::MatMul_9"))
        nodes.append(helper.make_node("MatMul", ["t", "onnx::MatMul_9"], ["y"]))
    else:  # dynamo: computed from the embedding
        nodes += [helper.make_node("Transpose", ["emb"], ["val_7"], perm=[1, 0]), helper.make_node("MatMul", ["t", "val_7"], ["y"])]
    m = make_model(nodes, [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 10])], inits)
    onnx.save(m, path)


def _diff(tmp_path, a, b):
    np.save(tmp_path / "ids.npy", IDS)
    js = tmp_path / "d.json"
    r = CliRunner().invoke(app, ["diff", "--grad", str(a), str(b), "--input", f"ids={tmp_path / 'ids.npy'}", "--json", str(js)])
    assert js.exists(), r.output
    return r, json.loads(js.read_text())


def test_a_dropped_zero_bias_and_a_folded_transpose_are_not_missing_weights(tmp_path):
    _model(tmp_path / "a.onnx", np.zeros(4, np.float32), True)
    _model(tmp_path / "b.onnx", None, False)
    r, got = _diff(tmp_path, tmp_path / "a.onnx", tmp_path / "b.onnx")
    assert got["verdict"] == "pass" and r.exit_code == 0, r.output
    assert {p["a"] for p in got["pairs"] if p["is_output"]} == {"w_grad"}, r.output
    why = {u["name"]: u for u in got["unmatched_a"]}
    assert why["bias_grad"]["cause"] == "folded" and "zeros" in why["bias_grad"]["reason"], why
    assert why["onnx::MatMul_9_grad"]["cause"] == "folded" and "val_7" in why["onnx::MatMul_9_grad"]["reason"], why


def test_a_nonzero_bias_the_other_lacks_is_still_missing(tmp_path):
    _model(tmp_path / "a.onnx", np.full(4, 0.5, np.float32), True)
    _model(tmp_path / "b.onnx", None, False)
    r, got = _diff(tmp_path, tmp_path / "a.onnx", tmp_path / "b.onnx")
    why = {u["name"]: u for u in got["unmatched_a"]}
    assert why["bias_grad"]["cause"] == "no-counterpart" and r.exit_code == 1, r.output
