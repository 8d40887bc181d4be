"""An If whose branches both write a tensor 'm' (keyed 'if1/then_branch/m' and 'if1/else_branch/m') and a main-graph
tensor literally named 'if1/then_branch/m': the two tensors had one key, and `layers` showed the branch tensor with
the other's statistics, `diff` passed a branch pair that fails (B's weight x1.01). The model is refused in one line
naming the clash, rather than read with numbers of the wrong tensor. Models without such a clash are unaffected."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import ModelError


def _model(path, k=1.0):
    def vi(n, s=(4,), t=T.FLOAT):
        return helper.make_tensor_value_info(n, t, list(s))

    def branch(g, op, c):
        return helper.make_graph([helper.make_node("Mul", ["x", "w"], ["m"], name="mm"), helper.make_node(op, ["m"], ["o"], name="n")],
                                 g, [], [vi("o")], [numpy_helper.from_array(np.full(4, c * k, np.float32), "w")])

    nodes = [helper.make_node("If", ["c"], ["o1"], name="if1", then_branch=branch("t", "Neg", 2.0), else_branch=branch("e", "Abs", 3.0)),
             helper.make_node("Relu", ["x"], ["if1/then_branch/m"], name="literal"),
             helper.make_node("Add", ["o1", "if1/then_branch/m"], ["y"], name="add")]
    m = helper.make_model(helper.make_graph(nodes, "slash", [vi("x"), vi("c", (), T.BOOL)], [vi("y")]),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return str(path)


def test_a_tensor_named_as_a_body_tensors_key_is_refused_in_one_line(tmp_path):
    a, b = _model(tmp_path / "a.onnx"), _model(tmp_path / "b.onnx", 1.01)
    with pytest.raises(ModelError, match="'if1/then_branch/m'.*cannot be told apart"):
        api.layers(a, api.Selection(all=True))
    runner = CliRunner()
    for args in (["layers", a, "--all"], ["diff", a, b, "--all"]):
        r = runner.invoke(app, args)
        assert r.exit_code == 1 and len(r.stderr.strip().splitlines()) == 1 and "cannot be told apart" in r.stderr, r.output
    assert runner.invoke(app, ["inspect", a]).exit_code == 0  # what the model holds is still shown
    assert api.layers(sample_path("control_flow"), api.Selection(all=True)).stats  # shared names without a clash
