"""An If without one of its branches, a Loop or Scan without its body: a broken model (onnxruntime refuses
it), said at load in one line naming the node and the attribute, never 'internal error: KeyError:
else_branch' from the probing pass (expose), grad or the debugger."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()


def _if_without_else(tmp_path):
    vi = helper.make_tensor_value_info
    branch = helper.make_graph([helper.make_node("Relu", ["x"], ["o"], name="r")], "b", [], [vi("o", TensorProto.FLOAT, [2])])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch)], "g",
                          [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])],
                          initializer=[numpy_helper.from_array(np.array(True), "c")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    p = tmp_path / "m.onnx"
    p.write_bytes(m.SerializeToString())
    return str(p)


@pytest.mark.parametrize("argv", [["layers", "{m}", "--all"], ["grad", "{m}", "--all"], ["diff", "{m}", "{m}", "--all"],
                                  ["mark", "{m}", "--all", "-o", "{o}"], ["debug", "{m}", "--all", "--script", "-"]],
                         ids=lambda a: a[0])
def test_if_without_else_branch_is_one_line(tmp_path, argv):
    m = _if_without_else(tmp_path)
    r = runner.invoke(app, [a.format(m=m, o=tmp_path / "o.onnx") for a in argv], input="run\nquit\n", env={"ONNXPROBE_DEBUG": ""})
    assert r.exit_code == 1, r.output
    assert "internal error" not in r.output and "Traceback" not in r.output, r.output
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("onnxprobe: error:")]
    assert len(errors) == 1 and "else_branch" in errors[0] and "'if'" in errors[0], r.stderr
    assert not (tmp_path / "o.onnx").exists()
