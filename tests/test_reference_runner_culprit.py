"""``diff --vs-reference`` on a model onnx.reference cannot run: the one error line names the node that
failed, its op type and the opset (onnx.reference's own message names neither the node nor, at run time,
the op), whether onnx.reference has no implementation for the op or its implementation fails."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

V = helper.make_tensor_value_info


def _model(tail, tail_inputs, inits, opset):
    """x -> Relu -> r -> ``tail`` node (named 'the_culprit') -> y, after a first layer that runs fine."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="first"),
             helper.make_node(tail, ["r"] + tail_inputs, ["y"], name="the_culprit")]
    return make_model(nodes, [V("x", TensorProto.FLOAT, [2, 3, 4, 4])], [V("y", TensorProto.FLOAT, None)], inits,
                      opset=opset, ir=7)




def _bn_spatial0():
    inits = [numpy_helper.from_array(np.ones((3, 4, 4), np.float32), n) for n in ("s", "b", "m", "v")]
    m = _model("BatchNormalization", ["s", "b", "m", "v"], inits, 7)
    m.graph.node[1].attribute.extend([helper.make_attribute("spatial", 0)])
    return m


def _maxroipool():
    m = _model("MaxRoiPool", ["rois"], [numpy_helper.from_array(np.array([[0, 0, 0, 3, 3]], np.float32), "rois")], 11)
    m.graph.node[1].attribute.extend([helper.make_attribute("pooled_shape", [2, 2])])
    return m


@pytest.mark.parametrize("build,op,opset", [(_maxroipool, "MaxRoiPool", 11), (_bn_spatial0, "BatchNormalization", 7)])
def test_vs_reference_error_names_node_op_and_opset(build, op, opset, tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(build(), p)
    r = CliRunner().invoke(app, ["diff", str(p), "--vs-reference"])
    assert r.exit_code != 0
    lines = [ln for ln in r.output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, r.output
    assert "Traceback" not in r.output and "internal error" not in r.output
    assert "the_culprit" in lines[0] and op in lines[0] and f"opset {opset}" in lines[0], lines[0]
    assert "first" not in lines[0].replace("the_culprit", ""), lines[0]


def test_vs_reference_op_it_lacks_names_the_listed_node_without_an_input_hint(tmp_path):
    """An unnamed com.microsoft node (a QOperator model's QLinearMul) that onnx.reference has no implementation
    of: the error named it '(unnamed)' where every listing says 'Gelu_1', and blamed the dynamic dimensions
    set to 1, which have nothing to do with an op the evaluator does not know (it fails to load the model)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="first"),
             helper.make_node("Gelu", ["r"], ["y"], domain="com.microsoft")]
    m = make_model(nodes, [V("x", TensorProto.FLOAT, ["batch", 4])], [V("y", TensorProto.FLOAT, None)])
    m.opset_import.extend([helper.make_opsetid("com.microsoft", 1)])
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    listed = CliRunner().invoke(app, ["inspect", str(p), "--nodes"])
    assert "Gelu_1" in listed.output, listed.output
    r = CliRunner().invoke(app, ["diff", str(p), "--vs-reference"])
    assert r.exit_code == 1, r.output
    line = [ln for ln in r.output.strip().splitlines() if ln.startswith("onnxprobe: error:")][0]
    assert "'Gelu_1'" in line and "com.microsoft.Gelu" in line, line
    assert "unnamed" not in line and "--shape" not in line, line
    # a whole sentence: onnx's own first line ends 'and domain 'com.microsoft' in', the ops it has on the next lines
    assert line.endswith("onnx.reference has no implementation of that op"), line
