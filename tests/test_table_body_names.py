"""Rows of sibling If bodies' tensors, which share a name ('o') and whose nodes may share one ('n'), read apart at
every width: the table showed the key ('if1/then_branch/o') only where it had room for every cell whole, and the
bare 'o' in both rows otherwise (38-68 and 88-107 columns on a helper's model). A name without a body's mark
beside one with it ('if1' beside '↳ n') was cut by the mark's two cells too ('if')."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app


def _model(path):
    f = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [3])  # noqa: E731

    def body(op):
        return helper.make_graph([helper.make_node(op, ["x"], ["o"], name="n"), helper.make_node("Abs", ["o"], ["p"], name="m")],
                                 "b", [], [f("p")])

    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="rs"),
             helper.make_node("Greater", ["s", "z"], ["c"], name="gt"),
             helper.make_node("If", ["c"], ["y"], name="if1", then_branch=body("Relu"), else_branch=body("Relu"))]
    m = make_model(nodes, [f("x")], [f("y")], initializers=[helper.make_tensor("z", TensorProto.FLOAT, [], [0.0])])
    onnx.save(m, path)
    return path


@pytest.mark.parametrize("width", [36, 40, 48, 56, 64, 72, 80, 96, 104, 120])
def test_sibling_bodies_rows_read_apart(tmp_path, width):
    p = _model(tmp_path / "if.onnx")
    r = CliRunner().invoke(app, ["layers", str(p), "--all"], env={"COLUMNS": str(width), "NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert all(len(x) <= width for x in lines), r.stdout
    body_rows = [x for x in lines if "↳" in x]
    assert len(body_rows) == 4, r.stdout  # n and m in each branch
    # the rows of 'n' (Relu) in the two branches: the same node name, op and tensor name
    relus = [x for x in body_rows if "Relu" in x]
    assert len(relus) == 2 and relus[0] != relus[1], r.stdout
    assert any("then" in x for x in relus) and any("else" in x for x in relus), r.stdout
    assert any(x.split()[:2] == ["4", "if1"] or x.split()[:2] == ["6", "if1"] for x in lines), r.stdout
