"""The debugger over If/Loop/Scan bodies: `where` moves to the reader of a graph input that ran (not one in an
If branch not taken), and the node view labels body inputs and outputs as what they are."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
F, B = TensorProto.FLOAT, TensorProto.BOOL


def debug(path, lines: list[str]) -> str:
    r = runner.invoke(app, ["debug", str(path), "--script", "-"], input="\n".join(lines) + "\n", env=ENV)
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    return r.stdout


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def if_model(else_reads_x: bool = True) -> onnx.ModelProto:
    """y = If(c, then: Relu(x), else: Neg(x) or Neg(z)). onnx sorts a node's attributes by name, so the
    else branch comes first in the walk, as in the exported models where `where` went wrong (silero-vad)."""
    def branch(op, name, src, out):
        return helper.make_graph([helper.make_node(op, [src], [out], name=name)], name, [], [vi(out, F, [2])])

    node = helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch("Relu", "then_relu", "x", "t_out"),
                            else_branch=branch("Neg", "else_neg", "x" if else_reads_x else "z", "e_out"))
    return make_model([node], [vi("x", F, [2]), vi("z", F, [2]), vi("c", B, [])], [vi("y", F, [2])])


@pytest.mark.parametrize("cond", [True, False])
def test_where_on_a_graph_input_moves_to_the_reader_that_ran(tmp_path, cond):
    """The graph input's first reader in the walk is in the else branch; with c true the then branch runs
    (onnx.reference says which branch's value y is), and `where` goes to its reader."""
    p = tmp_path / "if.onnx"
    onnx.save(if_model(), p)
    x = np.array([3, -1], np.float32)
    y = ReferenceEvaluator(onnx.load(str(p))).run(None, {"x": x, "z": x, "c": np.array(cond)})[0]
    ran = "then_relu" if np.array_equal(y, np.maximum(x, 0)) else "else_neg"
    assert ran == ("then_relu" if cond else "else_neg")
    out = " ".join(debug(p, ["input x [3,-1]", "input z [0,0]", f"input c {str(cond).lower()}", "where absmax>2"]).split())
    assert f"a graph input, read first by node {ran} " in out and "did not run" not in out
    assert f"#{1 if cond else 0}/" in out  # the cursor is at that node


def test_where_on_a_graph_input_whose_readers_did_not_run_says_so(tmp_path):
    p = tmp_path / "if.onnx"
    onnx.save(if_model(else_reads_x=False), p)
    out = " ".join(debug(p, ["input x [0,0]", "input z [3,-1]", "input c true", "where absmax>2"]).split())
    assert "z (tensor" in out and "read first by node else_neg (Neg, #0), which did not run on these inputs" in out
