"""grad of a loss that is a constant of the model: the selected output is a weight given as an output (no node
computes it), or is computed from Constant nodes alone (it depends on no input and no weight). The error was
"none of the selected tensors gets a gradient", not saying why (QA). It now says in one line that the loss is
a constant, naming the output. Oracle: the loss's value, the output summed in numpy float64."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as H
from onnx import numpy_helper
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
B = np.array([[1.0, -2.0, 4.0]], np.float32)


def model(path) -> str:
    """y = x W; B, a weight no node reads, given as an output; rc = Relu(c), c a Constant."""
    w = numpy_helper.from_array(np.eye(3, dtype=np.float32), "W")
    nodes = [H.make_node("MatMul", ["x", "W"], ["y"], name="mm"),
             H.make_node("Constant", [], ["c"], name="const", value=numpy_helper.from_array(B, "c")),
             H.make_node("Relu", ["c"], ["rc"], name="relu")]
    g = H.make_graph(nodes, "g", [H.make_tensor_value_info("x", T.FLOAT, [1, 3])],
                     [H.make_tensor_value_info(n, T.FLOAT, [1, 3]) for n in ("y", "B", "rc")],
                     initializer=[w, numpy_helper.from_array(B, "B")])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


@pytest.mark.parametrize("output,flags", [("B", []), ("B", ["--all"]), ("rc", ["--op", "MatMul"])])
def test_a_constant_loss_is_said_to_be_one(tmp_path, output, flags):
    p = model(tmp_path / "m.onnx")
    r = runner.invoke(app, ["grad", p, "--device", "cpu", "--loss-output", output, *flags], env=ENV)
    assert r.exit_code == 1, r.output
    errors = [line for line in r.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, r.stderr
    assert "the loss is a constant" in errors[0] and repr(output) in errors[0], errors[0]
    assert "depends on no input" in errors[0], errors[0]


@pytest.mark.parametrize("output", ["B", "rc"])
def test_the_plan_says_why_the_loss_is_constant(tmp_path, output):
    p = model(tmp_path / "m.onnx")
    res = api.grad(p, api.Selection(ops=("MatMul",)), spec=api.grad_spec(output=output))
    assert res.rows == [] and res.plan.constant_output is not None and output in res.plan.constant_output
    want = np.maximum(B, 0) if output == "rc" else B
    assert res.loss == pytest.approx(want.astype(np.float64).sum())


def test_a_loss_that_reads_an_input_or_a_weight_is_no_constant(tmp_path):
    p = model(tmp_path / "m.onnx")
    assert api.grad(p, spec=api.grad_spec(output="y")).plan.constant_output is None


def test_a_constant_loss_with_gradients_is_said_to_be_one(tmp_path):
    """--loss-output rc --all: rc comes from a Constant alone, yet the Constant chain (c, rc) gets gradients,
    which were shown with no word that the loss is a constant. One note says it, and the JSON field
    constant_output holds the reason (null for a loss that reads an input). Oracle: the graph (rc = Relu(c), c a
    Constant) and the loss's value, rc summed in numpy float64."""
    import json

    p = model(tmp_path / "m.onnx")
    r = runner.invoke(app, ["grad", p, "--device", "cpu", "--loss-output", "rc", "--all", "--json", "-"], env=ENV)
    assert r.exit_code == 0, r.output
    said = [line for line in r.stderr.splitlines() if "the loss is a constant" in line]
    assert len(said) == 1 and "'rc'" in said[0] and "note:" in said[0], r.stderr
    d = json.loads(r.stdout)
    assert {g["tensor"] for g in d["gradients"]} == {"c", "rc"}
    assert d["loss"]["value"] == pytest.approx(np.maximum(B, 0).astype(np.float64).sum())
    assert "depends on no input" in d["constant_output"] and "'rc'" in d["constant_output"]
    assert any("the loss is a constant" in n for n in d["notes"])
    r = runner.invoke(app, ["grad", p, "--device", "cpu", "--loss-output", "y", "--all", "--json", "-"], env=ENV)
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["constant_output"] is None and not any("the loss is a constant" in n for n in d["notes"])
