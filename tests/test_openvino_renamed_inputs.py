"""A graph input read only by a Dropout (onnx's test_dropout_default_mask): OpenVINO's frontend removes the
Dropout and gives its output name to the input, whose own name is then gone ('x' becomes 'y'). The runner fed
the inputs by their ONNX names, left 'x' out as an input OpenVINO does not take, and OpenVINO ran on an
uninitialised input buffer: `layers --runtime openvino` read y's minimum as -5.6e11 where y is x. Oracle: numpy
(Dropout in inference is the identity; Relu is max(x, 0))."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from conftest import make_model
from onnxprobe import api

pytest.importorskip("openvino")
pytestmark = pytest.mark.openvino
F32 = {"INFERENCE_PRECISION_HINT": "f32"}


def _model(mask: bool):
    nodes = [helper.make_node("Dropout", ["x"], ["d", "m"] if mask else ["d"], name="drop"),
             helper.make_node("Relu", ["d"], ["r"], name="relu"), helper.make_node("Add", ["r", "w"], ["y"], name="add")]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 64])]
    if mask:
        outs.append(helper.make_tensor_value_info("m", TensorProto.BOOL, [3, 64]))
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 64]),
                              helper.make_tensor_value_info("w", TensorProto.FLOAT, [3, 64])], outs)


@pytest.mark.parametrize("mask", [False, True])
def test_an_input_renamed_by_openvino_is_fed(mask):
    rng = np.random.default_rng(0)
    x, w = (rng.normal(size=(3, 64)) * 100).astype(np.float32), rng.normal(size=(3, 64)).astype(np.float32)
    res = api.layers(_model(mask), api.Selection(all=True), inputs=api.InputSpec(arrays={"x": x, "w": w}), runtime="openvino",
                     runtime_options=F32, save=True)
    want = np.maximum(x, 0) + w
    np.testing.assert_allclose(res.arrays["y"], want, rtol=1e-6, atol=1e-6)
    assert res.stats["y"].min == pytest.approx(float(want.min()), rel=1e-6)


def test_diff_against_onnxruntime_passes():
    rng = np.random.default_rng(1)
    x, w = rng.normal(size=(3, 64)).astype(np.float32), rng.normal(size=(3, 64)).astype(np.float32)
    res = api.diff(_model(True), inputs=api.InputSpec(arrays={"x": x, "w": w}), vs_runtime="openvino", runtime_options=F32,
                   selection=api.Selection(all=True))
    y = next(r for r in res.results if r.pair.a.name == "y")
    assert y.metrics is not None and y.metrics.max_abs < 1e-5 and res.verdict()[0] == "pass"


def test_the_worker_refuses_to_run_an_input_without_a_value():
    from onnxprobe.runtime.runners.openvino_worker import Worker

    w = Worker()
    w.load("m", _model(False).SerializeToString())
    with pytest.raises(RuntimeError, match="no value for OpenVINO's input"):
        w.run("m", ["y"], {"w": np.zeros((3, 64), np.float32)}, "CPU", F32, ["y"], [])


def _output_renamed_model():
    """Relu -> Dropout d1 -> Dropout d2 -> Neg y, with d1 a graph output too: OpenVINO, reading the bytes, names that
    Result 'd2' (the next Dropout's output), and 'd1' is nowhere in its model."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Dropout", ["r"], ["d1"], name="drop1"),
             helper.make_node("Dropout", ["d1"], ["d2"], name="drop2"), helper.make_node("Neg", ["d2"], ["y"], name="neg")]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
                       helper.make_tensor_value_info("d1", TensorProto.FLOAT, [2, 3])])


def test_a_graph_output_openvino_renamed_is_read_as_that_output():
    """`layers --runtime openvino` died on the model above ("Model::add_output. Tensor name 'd1' was not found"), and
    `diff --vs-runtime openvino` left that output uncompared; its Result is read as the output it is."""
    x = np.random.default_rng(2).normal(size=(2, 3)).astype(np.float32)
    res = api.layers(_output_renamed_model(), inputs=api.InputSpec(arrays={"x": x}), runtime="openvino", runtime_options=F32,
                     save=True)
    np.testing.assert_allclose(res.arrays["d1"], np.maximum(x, 0), rtol=1e-6, atol=0)
    np.testing.assert_allclose(res.arrays["y"], -np.maximum(x, 0), rtol=1e-6, atol=0)
    d = api.diff(_output_renamed_model(), inputs=api.InputSpec(arrays={"x": x}), vs_runtime="openvino", runtime_options=F32)
    compared = {r.pair.a.name for r in d.results if r.metrics is not None}
    assert {"y", "d1"} <= compared and d.verdict()[0] == "pass", (compared, d.notes)
