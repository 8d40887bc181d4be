"""A probed run that fails is told apart: the model itself fails on those inputs (its own error, never one
that names a statistics node onnxprobe added inside a Loop body), or only the probed copy does (said so)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.errors import ExecutionError
from onnxprobe.runtime.runners.ort import OrtRunner


def sliding_loop():
    """Loop(trip_count): y += x[i:i+1] for a constant x of 5 values; scan_out stacks y. Past 5 trips the
    slice is empty, y becomes [0]-shaped and onnxruntime refuses the Loop's inconsistent scan output."""
    x = numpy_helper.from_array(np.arange(1, 6, dtype=np.float32), "x")
    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Constant", [], ["xc"], value=x),
         helper.make_node("Constant", [], ["onec"], value=one),
         helper.make_node("Add", ["i", "onec"], ["end"]),
         helper.make_node("Unsqueeze", ["i", "axes"], ["start1"]),
         helper.make_node("Unsqueeze", ["end", "axes"], ["end1"]),
         helper.make_node("Slice", ["xc", "start1", "end1"], ["piece"]),
         helper.make_node("Add", ["y_in", "piece"], ["y_out"]),
         helper.make_node("Identity", ["y_out"], ["scan_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_in", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), helper.make_tensor_value_info("y_out", TensorProto.FLOAT, [1]),
         helper.make_tensor_value_info("scan_out", TensorProto.FLOAT, [1])],
        initializer=[numpy_helper.from_array(np.array([0], np.int64), "axes")])
    return make_model([helper.make_node("Loop", ["trip", "cond", "y"], ["res_y", "res_scan"], name="loop", body=body)],
                      [helper.make_tensor_value_info("trip", TensorProto.INT64, []), helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                       helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
                      [helper.make_tensor_value_info("res_y", TensorProto.FLOAT, [1]),
                       helper.make_tensor_value_info("res_scan", TensorProto.FLOAT, ["n", 1])], opset=13)


def feeds(trips: int) -> dict:
    return {"trip": np.array(trips, np.int64), "cond": np.array(True), "y": np.zeros(1, np.float32)}


def test_a_model_that_fails_on_its_inputs_gets_its_own_error_not_a_probes():
    with pytest.raises(ExecutionError) as e:
        api.layers(sliding_loop(), api.Selection(all=True), inputs=feeds(6))
    msg = str(e.value)
    assert msg.startswith("the model fails on these inputs as it is, without onnxprobe's probes: "), msg
    assert "onnxprobe/" not in msg and "\n" not in msg, msg
    # inputs it takes run, and the Loop's body tensors are summarised over its iterations (numpy oracle)
    res = api.layers(sliding_loop(), api.Selection(all=True), inputs=feeds(3))
    scan = res.stats["res_scan"]
    assert scan.count == 3 and scan.min == 1 and scan.max == 6 and scan.mean == pytest.approx(np.mean([1, 3, 6]))


def test_a_probed_copy_that_fails_where_the_model_runs_says_so(monkeypatch):
    plain = OrtRunner.execute
    nodes = len(sliding_loop().graph.node)

    def failing_copy(self, model, *args, **kw):
        if len(model.graph.node) > nodes:  # the probed copy, not the model as it is
            raise ExecutionError("onnxruntime: broken statistics node")
        return plain(self, model, *args, **kw)

    monkeypatch.setattr(OrtRunner, "execute", failing_copy)
    with pytest.raises(ExecutionError) as e:
        api.layers(sliding_loop(), api.Selection(all=True), inputs=feeds(3))
    assert "broken statistics node" in str(e.value) and "the model itself runs on these inputs" in str(e.value)
