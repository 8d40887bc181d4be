"""A tensor that onnxruntime's optimiser removed because its node returns its input unchanged (PP-OCRv4
rec's Mul by a constant [1.]) holds the values of a compared tensor: its reason says so, cause 'copy',
where it read 'no counterpart'. A node by any other constant computes another function and keeps
'no counterpart'. The oracle: the arithmetic (x * 1 == x, x + 0 == x, x * 2 != x)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api

V = (lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]))


def _models(op: str, value: float, const_first: bool):
    ins = ["c", "r"] if const_first else ["r", "c"]
    a = make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node(op, ins, ["m"], name="arith"),
                    helper.make_node("Neg", ["m"], ["y"], name="neg")], [V("x")], [V("y")],
                   [numpy_helper.from_array(np.array([value], np.float32), "c")])
    b = make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Neg", ["r"], ["y"], name="neg")],
                   [V("x")], [V("y")])
    return a, b


@pytest.mark.parametrize("op, value, const_first, copy", [
    ("Mul", 1.0, False, True), ("Mul", 1.0, True, True), ("Div", 1.0, False, True), ("Add", 0.0, True, True),
    ("Sub", 0.0, False, True), ("Mul", 2.0, False, False), ("Div", 1.0, True, False), ("Sub", 0.0, True, False)])
def test_a_node_that_returns_its_input_holds_a_compared_tensors_values(tmp_path, op, value, const_first, copy):
    a, b = _models(op, value, const_first)
    onnx.save(a, str(tmp_path / "a.onnx"))
    onnx.save(b, str(tmp_path / "b.onnx"))
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True),
                   config=api.RunConfig(device="cpu", cache=False), inputs=api.InputSpec(arrays={"x": x}))
    (u,) = [u for u in res.matching.unmatched_a if u.obs.name == "m"]
    if copy:
        assert u.cause == "copy" and "'r'" in u.reason, u.reason
    else:
        assert u.cause != "copy", u.reason
