"""A model of opset 8 has its statistics computed on the host (no IsNaN before opset 9): the shape a Loop or
Scan body tensor was given there was that of its values stacked over the iterations ([1, 3, 2] for a Scan-8
body's [2]: batch, iterations, values), where the same model at opset 9, summarised in the graph, gives the
body's own shape ([2]), as every other body tensor is shown (its statistics are over all iterations)."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()


def _loop_model(opset: int) -> onnx.ModelProto:
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "w"], ["s_out"]), helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("s", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2])])
    w = helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])
    return make_model([helper.make_node("Loop", ["n", "", "x"], ["y"], body=body, name="loop")],
                      [helper.make_tensor_value_info("n", TensorProto.INT64, []),
                       helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [w], opset=opset, ir=4)


def test_a_loop_body_tensor_has_its_own_shape_with_statistics_on_the_host(tmp_path):
    shapes = {}
    for opset in (8, 9):
        onnx.save(_loop_model(opset), tmp_path / f"m{opset}.onnx")
        np.save(tmp_path / "n.npy", np.array(3, np.int64))
        np.save(tmp_path / "x.npy", np.array([0.5, -1.0], np.float32))
        r = runner.invoke(app, ["layers", str(tmp_path / f"m{opset}.onnx"), "--all", "--input", f"n={tmp_path / 'n.npy'}",
                                "--input", f"x={tmp_path / 'x.npy'}", "--json", "-"])
        assert r.exit_code == 0, r.output
        rows = {t["name"]: t for t in json.loads(r.stdout)["tensors"]}
        assert rows["s_out"]["count"] == 6 and rows["s_out"]["max"] == 5.0, rows["s_out"]  # 3 iterations of 2
        shapes[opset] = (rows["s_out"]["shape"], rows["y"]["shape"])
    assert shapes[8] == shapes[9] == ([2], [2]), shapes
