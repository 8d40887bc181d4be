"""Loading a model walks its tensors once (``graph.extents.all_tensors``: 3.5 ms a walk on PP-OCRv4 rec), for
every check of them: check_graph's, the external data's and the protection of its files; and the checks of
a whole model make no message (a node's label) for nodes that have nothing wrong. The checks still refuse
what they refused (a negative dim of a weight: checked on the shared walk's tensors)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxprobe.errors import ModelError
from onnxprobe.graph import io, node_check


def _model(dims=(2, 3)) -> onnx.ModelProto:
    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    del w.dims[:]
    w.dims.extend(dims)
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_load_walks_the_tensors_once(tmp_path, monkeypatch):
    path = tmp_path / "m.onnx"
    onnx.save(_model(), path)
    walks = []
    real = io.all_tensors
    monkeypatch.setattr(io, "all_tensors", lambda m: walks.append(1) or real(m))
    model = io.load_model(path)
    assert len(walks) == 1
    assert [t.name for t in model.graph.initializer] == ["w"]


def test_the_shared_walk_still_refuses_a_negative_dim(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_model((2, -3)), path)
    with pytest.raises(ModelError, match=r"tensor 'w' has dimensions \[2, -3\]: a negative size"):
        io.load_model(path)


def test_a_whole_model_makes_no_node_label(monkeypatch):
    said = []
    real = node_check.node_label
    monkeypatch.setattr(node_check, "node_label", lambda n, i: said.append(i) or real(n, i))
    io.check_graph(_model(), "m")
    assert said == []


def test_a_node_found_wanting_is_still_named():
    m = _model()
    m.graph.node[1].attribute.append(helper.make_attribute("alpha", 0.5))
    with pytest.raises(ModelError, match=r"node #1 'Relu_1' \(Relu\) has an attribute 'alpha', which Relu does not take"):
        io.check_graph(m, "m")
