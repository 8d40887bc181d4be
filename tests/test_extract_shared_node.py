"""A cut input written by a node the cut needs for another of its outputs (one Split output cut at, the
other computed): the extracted model read the input and had the node write it too, which onnx's checker
refuses (SSA), so extract failed with 'This is a bug in onnxprobe'. Oracle: onnxruntime runs the original
model, unoptimised, with the tensors exposed by hand; the cut, fed those values, must give the same bits."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app


def _session(m):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _split_model(path):
    nodes = [helper.make_node("Split", ["x"], ["a", "b"], axis=0, num_outputs=2, name="split"),
             helper.make_node("Relu", ["a"], ["ra"], name="relu"), helper.make_node("Add", ["ra", "b"], ["y"], name="add")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    onnx.save(m, str(path))
    return m


def test_a_cut_input_another_output_of_a_needed_node_writes(tmp_path):
    m = _split_model(tmp_path / "split.onnx")
    out = tmp_path / "cut.onnx"
    r = CliRunner().invoke(app, ["extract", str(tmp_path / "split.onnx"), "-o", str(out), "--from", "a,x", "--to", "y"])
    assert r.exit_code == 0, r.output
    sub = onnx.load(str(out))
    onnx.checker.check_model(sub, full_check=True)
    assert [i.name for i in sub.graph.input] == ["a", "x"] and [o.name for o in sub.graph.output] == ["y"]
    assert [n.name for n in sub.graph.node] == ["split", "relu", "add"]
    # the original's values, exposed by hand, with an `a` unlike what Split gives: the cut must read the fed one
    exposed = onnx.ModelProto()
    exposed.CopyFrom(m)
    exposed.graph.output.extend([onnx.ValueInfoProto(name="a")])
    x = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
    y, a = _session(exposed).run(["y", "a"], {"x": x})
    (got,) = _session(sub).run(["y"], {"a": a, "x": x})
    assert got.tobytes() == y.tobytes()
    other = -np.abs(a) - 1  # Relu of it is 0: y is then b alone
    (got,) = _session(sub).run(["y"], {"a": other, "x": x})
    assert got.tobytes() == x[2:].tobytes()
