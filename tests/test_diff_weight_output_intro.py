"""diff of a weight given as a graph output (an initializer no node computes) showed "-" in the intro dB
column while a Constant node's output given as an output showed its own error there (QA). Neither reads
anything: as the README says of a layer whose inputs A holds exactly, each introduces its accumulated
difference, in the table and the JSON alike. Oracle: SQNR in numpy float64, 10 log10(sum b^2 / sum (a-b)^2)."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as H
from onnx import numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()
V = np.array([[1.0, 2.0, 3.0]], np.float32)
D = np.float32(0.01)


def model(path, d) -> str:
    """y = x W; B, a weight no node reads, and c, a Constant's output: both model outputs, V + d."""
    nodes = [H.make_node("MatMul", ["x", "W"], ["y"], name="mm"),
             H.make_node("Constant", [], ["c"], name="const", value=numpy_helper.from_array(V + d, "c"))]
    g = H.make_graph(nodes, "g", [H.make_tensor_value_info("x", T.FLOAT, [1, 3])],
                     [H.make_tensor_value_info(n, T.FLOAT, [1, 3]) for n in ("y", "B", "c")],
                     initializer=[numpy_helper.from_array(np.eye(3, dtype=np.float32), "W"), numpy_helper.from_array(V + d, "B")])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def test_a_weight_output_introduces_its_own_difference_as_a_constant_does(tmp_path):
    a, b = model(tmp_path / "a.onnx", 0), model(tmp_path / "b.onnx", D)
    va, vb = V.astype(np.float64), (V + D).astype(np.float64)
    want = 10 * np.log10((vb ** 2).sum() / ((va - vb) ** 2).sum())
    r = runner.invoke(app, ["diff", a, b, "--json", "-"])
    assert r.exit_code == 1, r.output  # B and c differ: FAIL
    rows = {p["a"]: p for p in json.loads(r.stdout)["pairs"]}
    for name in ("B", "c"):
        assert rows[name]["introduced_sqnr_db"] is not None, rows[name]
        np.testing.assert_allclose(rows[name]["introduced_sqnr_db"], want, rtol=1e-4)
        np.testing.assert_allclose(rows[name]["sqnr_db"], want, rtol=1e-4)
    r = runner.invoke(app, ["diff", a, b], env={"COLUMNS": "200", "NO_COLOR": "1"})
    line = next(x for x in r.stdout.splitlines() if x.split()[1:2] == ["B"])
    assert line.split().count(f"{want:.1f}") == 2, line  # SQNR dB and intro dB
