"""A weight written as a Constant node's value_floats is a weight as one written as its value tensor is
(graph.constants reads every form of the op): grad gives it a row and diff --grad compares its gradient;
it had no row, and diff --grad's verdict said the backward pass stopped before every weight."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as H
from onnx import numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

C = [1.5, 2.0, -1.0, 0.5]


def _model(path, form: str, inside_if: bool = False) -> None:
    const = (H.make_node("Constant", [], ["w"], name="cw", value=numpy_helper.from_array(np.array(C, np.float32), "v"))
             if form == "value" else H.make_node("Constant", [], ["w"], name="cw", value_floats=C))
    if inside_if:  # a body's weight: hoisted to the main graph (autodiff.hoist)
        then = H.make_graph([const, H.make_node("Mul", ["x", "w"], ["t"], name="mul")], "then", [],
                            [H.make_tensor_value_info("t", T.FLOAT, [4])])
        other = H.make_graph([H.make_node("Identity", ["x"], ["e"], name="id")], "else", [],
                             [H.make_tensor_value_info("e", T.FLOAT, [4])])
        nodes = [H.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)]
        ins = [H.make_tensor_value_info("x", T.FLOAT, [4]), H.make_tensor_value_info("c", T.BOOL, [])]
    else:
        nodes = [const, H.make_node("Mul", ["x", "w"], ["y"], name="mul")]
        ins = [H.make_tensor_value_info("x", T.FLOAT, [4])]
    g = H.make_graph(nodes, "g", ins, [H.make_tensor_value_info("y", T.FLOAT, [4])])
    onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 17)]), str(path))


@pytest.mark.parametrize("form", ["value", "value_floats"])
def test_a_constant_list_weight_gets_a_gradient_row(tmp_path, form):
    path, js = tmp_path / "m.onnx", tmp_path / "g.json"
    _model(path, form)
    r = CliRunner().invoke(app, ["grad", str(path), "--json", str(js), "--no-cache"])
    assert r.exit_code == 0, r.output
    rows = {row["tensor"]: row for row in json.loads(js.read_text())["gradients"]}
    assert rows["w"]["kind"] == "weight", rows


@pytest.mark.parametrize("form", ["value", "value_floats"])
def test_diff_grad_compares_a_constant_list_weight(tmp_path, form):
    path, js = tmp_path / "m.onnx", tmp_path / "d.json"
    _model(path, form)
    r = CliRunner().invoke(app, ["diff", "--grad", str(path), str(path), "--json", str(js), "--no-cache"])
    d = json.loads(js.read_text())
    assert d["verdict"] == "pass", d["verdict_reason"]
    assert r.exit_code == 0
    assert any(p["a"] == "w_grad" and p["passed"] for p in d["pairs"]), d["pairs"]


def test_a_constant_list_weight_in_an_if_branch_is_hoisted_and_gets_a_row(tmp_path):
    path, js, c = tmp_path / "m.onnx", tmp_path / "g.json", tmp_path / "c.npy"
    _model(path, "value_floats", inside_if=True)
    np.save(c, np.array(True))
    r = CliRunner().invoke(app, ["grad", str(path), "--json", str(js), "--no-cache", "--input", f"c={c}"])
    assert r.exit_code == 0, r.output
    rows = {row["tensor"]: row for row in json.loads(js.read_text())["gradients"]}
    assert rows["w"]["kind"] == "weight", rows
