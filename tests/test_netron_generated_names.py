"""The Netron attachment put a branch tensor's statistics on a real main-graph node: the branch's node is unnamed,
onnxprobe shows it as 'Neg_1', and the model has a Sigmoid really named 'Neg_1' (Netron then showed the branch
Neg's max 4 on the Sigmoid, whose own output's max is 0.98). A node is a target only where it bears that name; else
the value, the metric named with its key. Oracle: the values computed by hand."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper

from conftest import make_model
from onnxprobe import api


def test_metrics_go_on_a_node_only_where_it_bears_the_name(tmp_path):
    def vi(n, s=(4,), t=T.FLOAT):
        return helper.make_tensor_value_info(n, t, list(s))

    def branch(g, op):
        return helper.make_graph([helper.make_node(op, ["x"], ["o"])], g, [], [vi("o")])

    m = make_model([helper.make_node("If", ["c"], ["o1"], name="if1", then_branch=branch("t", "Neg"), else_branch=branch("e", "Abs")),
                    helper.make_node("Sigmoid", ["o1"], ["y"], name="Neg_1")], [vi("x"), vi("c", (), T.BOOL)], [vi("y")])
    onnx.save(m, tmp_path / "m.onnx")
    x = np.array([1, -2, 3, -4], np.float32)
    res = api.layers(tmp_path / "m.onnx", api.Selection(all=True), inputs=api.InputSpec(arrays={"x": x, "c": np.array(True)}))
    att = api.netron(res, tmp_path / "m.onnx")
    on_sigmoid = [mt for mt in att["metrics"] if mt["target"] == "Neg_1"]
    assert not on_sigmoid, on_sigmoid
    (branch_max,) = [mt for mt in att["metrics"] if mt["name"] == "onnxprobe if1/then_branch/o max"]
    assert branch_max["target"] == "o" and branch_max["value"] == float((-x).max())
    (y_max,) = [mt for mt in att["metrics"] if mt["target"] == "y" and mt["name"] == "onnxprobe max"]
    assert abs(y_max["value"] - float(1 / (1 + np.exp(-(-x).max())))) < 1e-6
