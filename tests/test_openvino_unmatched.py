"""Why a tensor of a diff on OpenVINO stayed unmatched: OpenVINO is blamed only for tensors of the model it
runs, and a fused-away tensor gets the reason that says what happened to it. Skipped without the openvino
extra."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from onnxprobe import api

pytest.importorskip("openvino")
pytestmark = pytest.mark.openvino


def _model(nodes, out: str) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_a_tensor_the_other_model_lacks_has_no_counterpart_not_an_openvino_reason(tmp_path):
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(_model([helper.make_node("Relu", ["x"], ["ra"], name="relu"), helper.make_node("Neg", ["ra"], ["ya"], name="neg")], "ya"), a)
    onnx.save(_model([helper.make_node("Sigmoid", ["x"], ["sb"], name="sig"), helper.make_node("Abs", ["sb"], ["yb"], name="abs")], "yb"), b)
    res = api.diff(a, b, runtime="openvino", selection=api.Selection(all=True))
    items = res.matching.unmatched_a + res.matching.unmatched_b
    assert {u.obs.name for u in items} >= {"ra", "sb"}
    for u in items:  # neither model has the other's tensors: OpenVINO hid nothing
        assert u.cause == "no-counterpart" and "OpenVINO" not in u.reason, (u.obs.name, u.reason)


def test_a_dropouts_input_read_elsewhere_too_is_named_as_fused_into_the_dropouts_name(tmp_path):
    """OpenVINO removes a Dropout and gives its output name to the producer, whatever else reads the
    producer's output: the reason says so (not a vague 'fused or folded')."""
    p = tmp_path / "fan.onnx"
    onnx.save(_model([helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Dropout", ["r"], ["d"], name="drop"),
                      helper.make_node("Sigmoid", ["r"], ["s"], name="sig"), helper.make_node("Add", ["d", "s"], ["y"], name="add")], "y"), p)
    res = api.layers(p, api.Selection(all=True), runtime="openvino")
    assert set(res.unobserved) == {"r"}
    assert "Dropout 'drop'" in res.unobserved["r"] and "'d' now stands for this tensor" in res.unobserved["r"], res.unobserved

