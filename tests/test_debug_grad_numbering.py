"""The debugger after `grad` speaks of the model as loaded: its node numbers and names, its tensors.

`grad` on a model below the opset its gradients need computes them on a copy converted to opset 17, and the
session used to switch to that copy: the converter's Constant before the Unsqueeze moved every later node one
number on (`node #2` was the Unsqueeze, `Mul_2` was gone, now `Mul_3`), `--range 1:2` took the copy's nodes,
and the converter's node was listed as the model's. The same when the backward model prunes a node the loss
does not need (a second output): the nodes after it moved one number back and its tensor vanished
(`show y2`: no tensor named 'y2'). Oracles: the listing before `grad`, and numpy float64 for the values.
"""

from __future__ import annotations

import re

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
W = np.arange(4, dtype=np.float32).reshape(1, 1, 1, 2, 2) / 10


def _opset9(tmp_path):
    """MaxPool's gradient needs opset 11: grad converts this opset-9 model, and the converter writes the
    Unsqueeze's axes as a Constant node before it. The nodes after the pool have no names: the model shows
    them by their numbers (Unsqueeze_1, Mul_2, Relu_3)."""
    m = make_model([helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
                    helper.make_node("Unsqueeze", ["p"], ["u"], axes=[0]),
                    helper.make_node("Mul", ["u", "w"], ["m"]),
                    helper.make_node("Relu", ["m"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1, 2, 2])],
                   [numpy_helper.from_array(W, "w")], opset=9, ir=4)
    onnx.save(m, tmp_path / "m9.onnx")
    x = np.random.default_rng(3).permutation(16).astype(np.float32).reshape(1, 1, 4, 4) - 8
    np.save(tmp_path / "x.npy", x)
    return tmp_path / "m9.onnx", x


def _rows(text: str) -> list[tuple[str, str, str]]:
    """(#, node, op) of a `nodes` listing."""
    return [r for r in re.findall(r"^\s*(\d+)\s+(\S+)\s+(\S+)\s", text, re.M) if r[1] != "of"]


def _script(tmp_path, model, lines: list[str]) -> list[str]:
    """Each line's output of a `debug --script` run (--echo: '> line' before each)."""
    r = runner.invoke(app, ["debug", str(model), "--input", f"x={tmp_path / 'x.npy'}", "--device", "cpu", "--echo",
                            "--script", "-"], env=ENV, input="\n".join(lines) + "\n")
    assert r.exit_code == 0, r.output
    parts = r.stdout.split("> ")[1:]
    assert len(parts) == len(lines), r.stdout
    return parts


def test_a_converted_copy_keeps_the_models_numbers_and_names(tmp_path):
    model, x = _opset9(tmp_path)
    out = _script(tmp_path, model, ["nodes", "grad --all", "nodes", "node Mul_2", "node #1", "goto Relu_3",
                                    "probe clear", "probe add --range 1:2", "probe list", "show m", "show x_grad"])
    before, after = _rows(out[0]), _rows(out[2])
    assert before == [("0", "pool", "MaxPool"), ("1", "Unsqueeze_1", "Unsqueeze"), ("2", "Mul_2", "Mul"), ("3", "Relu_3", "Relu")]
    assert "converted to opset 17" in out[1], out[1]
    assert after[:4] == before, out[2]
    # the converter's Constant is marked as the conversion's, after the model's nodes; backward nodes name the model's
    assert [r[1] for r in after if r[2] == "Constant" and not r[1].startswith("onnxprobe.grad/")] == [
        "onnxprobe.converted/Constant_1"], out[2]
    assert "onnxprobe.grad/Mul_2/" in out[2] and "Mul_3" not in out[2] and "Relu_4" not in out[2], out[2]
    assert out[3].splitlines()[1].startswith("#2/") and "Mul_2  Mul" in out[3], out[3]
    assert "Unsqueeze_1  Unsqueeze" in out[4] and "_v_" not in out[4], out[4]
    assert "Relu_3  Relu" in out[5], out[5]
    assert "2 probes" in out[8], out[8]
    assert re.search(r"^\s*1\s+Unsqueeze_1\s+Unsqueeze\s+u\b", out[8], re.M) and re.search(r"^\s*2\s+Mul_2\s+Mul\s+m\b", out[8], re.M), out[8]
    assert "from node Mul_2 (Mul)" in out[9], out[9]
    # values: numpy float64. m = maxpool(x)[None] * w; dL/dx (sum of relu(m)) = w where m > 0, at each window's max
    x64 = x.astype(np.float64)[0, 0]
    pooled = x64.reshape(2, 2, 2, 2).max(axis=(1, 3))
    m = pooled * W.astype(np.float64)[0, 0, 0]
    assert f"max {m.max():.5g}" in out[9].replace("\n", " "), out[9]
    want = np.zeros((4, 4))
    for i in range(2):
        for j in range(2):
            k = np.argmax(x64[2 * i:2 * i + 2, 2 * j:2 * j + 2])
            want[2 * i + k // 2, 2 * j + k % 2] = W[0, 0, 0, i, j] * (m[i, j] > 0)
    assert f"max {want.max():.5g}" in out[10].replace("\n", " ") and f"mean {want.mean():.5g}" in out[10].replace("\n", " "), out[10]


def test_a_node_the_backward_model_prunes_keeps_its_number_and_its_tensor(tmp_path):
    """y2 = -x is a second output the loss (of y1) does not need: the backward model drops its node."""
    w = np.array([[0.5, -1.0, 2.0, 0.25]], np.float32)
    m = make_model([helper.make_node("Neg", ["x"], ["y2"]), helper.make_node("Relu", ["x"], ["h"]),
                    helper.make_node("Mul", ["h", "w"], ["y1"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                   [helper.make_tensor_value_info("y1", TensorProto.FLOAT, [2, 4]),
                    helper.make_tensor_value_info("y2", TensorProto.FLOAT, [2, 4])], [numpy_helper.from_array(w, "w")])
    onnx.save(m, tmp_path / "two.onnx")
    x = np.array([[-1.5, 2.0, 0.5, -0.25], [3.0, -2.0, 1.0, 4.0]], np.float32)
    np.save(tmp_path / "x.npy", x)
    out = _script(tmp_path, tmp_path / "two.onnx", ["nodes", "grad", "nodes", "node #1", "show y2", "show w_grad"])
    assert _rows(out[2])[:3] == _rows(out[0]) == [("0", "Neg_0", "Neg"), ("1", "Relu_1", "Relu"), ("2", "Mul_2", "Mul")], out[2]
    assert "Relu_1  Relu" in out[3], out[3]
    assert "from node Neg_0 (Neg)" in out[4] and f"min {(-x).min():.5g}" in out[4], out[4]
    assert f"max {np.maximum(x, 0).astype(np.float64).sum(0).max():.5g}" in out[5].replace("\n", " "), out[5]


def test_diff_of_two_converted_backward_models_numbers_rows_as_the_session(tmp_path):
    """`diff` of two models with backward graphs runs the converted copies; its rows took the copy's numbers
    (u at 2, m at 3) where `nodes` and `node` say 1 and 2."""
    import json

    model, _ = _opset9(tmp_path)
    r = runner.invoke(app, ["debug", str(model), str(model), "--input", f"x={tmp_path / 'x.npy'}", "--device", "cpu",
                            "--script", "-"], env=ENV, input="grad --all\ngrad --all --model b\ndiff --all --json -\n")
    assert r.exit_code == 0, r.output
    text = r.stdout[r.stdout.index("{"):]
    rows = {d["a"]: (d["index"], d["node_a"], d["node_b"]) for d in json.loads(text)["pairs"]}
    assert rows["u"] == (1, "Unsqueeze_1", "Unsqueeze_1") and rows["m"] == (2, "Mul_2", "Mul_2"), rows
    assert rows["y"][0] == 3 and rows["x_grad"][0] > 3, rows
    assert [v[0] for v in rows.values()] == sorted(v[0] for v in rows.values()), rows
