"""A float16 model on OpenVINO's CPU plugin (no float16 arithmetic): it computes the float16 tensors in a
wider type, skipping the float16 rounding between fused ops, which a note says, as onnxruntime's does for
its float16 ops without a float16 kernel. Oracle: onnx.reference (float16 rounding after every op)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api

pytest.importorskip("openvino")
pytestmark = pytest.mark.openvino
NOTE = "float16 rounding between"


def _model(elem: int, np_type):
    # a = x*300 + 65000 is rounded to float16's spacing of 32 there; y = a - 65000 is then a multiple of 32
    return make_model([helper.make_node("Mul", ["x", "w"], ["m"], name="mul"), helper.make_node("Add", ["m", "b"], ["a"], name="add"),
                       helper.make_node("Sub", ["a", "b"], ["y"], name="sub")],
                      [helper.make_tensor_value_info("x", elem, [64])], [helper.make_tensor_value_info("y", elem, [64])],
                      [numpy_helper.from_array(np.array([300], np_type), "w"), numpy_helper.from_array(np.array([65000], np_type), "b")])


def test_a_float16_model_computed_wider_says_so():
    x = np.random.default_rng(0).random(64).astype(np.float16)
    res = api.layers(_model(TensorProto.FLOAT16, np.float16), api.Selection(all=True), inputs={"x": x}, runtime="openvino",
                     runtime_options={"INFERENCE_PRECISION_HINT": "f32"})
    ref = api.layers(_model(TensorProto.FLOAT16, np.float16), api.Selection(all=True), inputs={"x": x}, runtime="reference")
    if res.stats["y"].min == ref.stats["y"].min:
        pytest.skip("OpenVINO computed float16 here as the model does")
    assert any(NOTE in n for n in res.notes), res.notes


def test_a_float32_model_gets_no_such_note():
    res = api.layers(_model(TensorProto.FLOAT, np.float32), api.Selection(all=True), runtime="openvino")
    assert not any(NOTE in n for n in res.notes), res.notes
