"""|tensor| beside each gradient (``GradRow.value_norm``, the report's value_norm and |g|/|t|) is one rule for weights,
inputs and activations: an input holding NaN read nan while the same values as an activation read the norm of their
finite part, and an activation of infinities alone read 0. Oracle: numpy float64's norm of the tensor itself (NaN
where it holds a NaN, inf where an infinity), the tensors computed by onnx.reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from conftest import make_model
from onnxprobe import api


def _model():
    nodes = [helper.make_node("Log", ["x"], ["lg"], name="log"), helper.make_node("Div", ["x", "z"], ["dv"], name="div"),
             helper.make_node("Mul", ["x", "w"], ["m"], name="mul"), helper.make_node("Add", ["lg", "dv"], ["s"], name="add"),
             helper.make_node("Add", ["s", "m"], ["y"], name="add2")]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                      [numpy_helper.from_array(np.zeros((2, 3), np.float32), "z"),
                       numpy_helper.from_array(np.full((2, 3), 1e30, np.float32), "w")])


@pytest.mark.parametrize("x", [np.array([[-1, 0, 1], [2, np.nan, np.inf]], np.float32),
                               np.array([[1, 2, 3], [4, 5, 6]], np.float32)])
def test_value_norms_follow_one_rule(x):
    m = _model()
    r = api.grad(m, api.Selection(all=True), inputs={"x": x})
    ref = ReferenceEvaluator(m)
    names = ["lg", "dv", "m", "s", "y"]
    with np.errstate(all="ignore"):
        values = dict(zip(names, ref.run(names, {"x": x}))) | {"x": x, "z": np.zeros((2, 3)), "w": np.full((2, 3), 1e30)}
        want = {k: float(np.sqrt(np.sum(np.asarray(v, np.float64) ** 2))) for k, v in values.items()}
    got = {row.name: row.value_norm for row in r.rows}
    assert set(got) <= set(want), got
    for k, v in got.items():
        if math.isnan(want[k]):
            assert math.isnan(v), (k, v)
        else:
            assert v == pytest.approx(want[k], rel=1e-6), (k, v, want[k])
