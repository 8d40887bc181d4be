"""A float16 model converted with its inputs and outputs kept float32 (onnxruntime's
``convert_float_to_float16(keep_io_types=True)``) renames each graph output's producer output
(``graph_output_cast_0``) and widens it to float32 under the output's name: the float16 tensor holds exactly
the values of the float32 one that is compared, so its cause is 'copy' (it read 'no counterpart', or
'computed inside B's Tanh', the very node that computes it). A widening Cast above an unmatched tensor
likewise. A narrowing Cast (float32 -> float16) changes the values: no copy. The oracle: float16 -> float32
is exact, float32 -> float16 is not (numpy)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from conftest import make_model
from onnxprobe import api

F16, F32 = TensorProto.FLOAT16, TensorProto.FLOAT


def V(n, t=F32):
    return helper.make_tensor_value_info(n, t, [2, 3])


def _diff(tmp_path, a, b):
    onnx.save(a, str(tmp_path / "a.onnx"))
    onnx.save(b, str(tmp_path / "b.onnx"))
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    return api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True),
                    config=api.RunConfig(device="cpu", cache=False), inputs=api.InputSpec(arrays={"x": x}))


def _unmatched(res, name):
    (u,) = [u for u in res.matching.unmatched_a if u.obs.name == name]
    return u


def test_the_producer_output_a_keep_io_types_conversion_widens_is_a_copy(tmp_path):
    x = np.float16(np.float32(0.1))
    assert np.float32(x).astype(np.float16) == x  # the oracle: widening keeps every float16 value
    a = make_model([helper.make_node("Cast", ["x"], ["graph_input_cast_0"], to=F16, name="graph_input_cast0"),
                    helper.make_node("Tanh", ["graph_input_cast_0"], ["graph_output_cast_0"], name="tanh"),
                    helper.make_node("Cast", ["graph_output_cast_0"], ["y"], to=F32, name="graph_output_cast0")],
                   [V("x")], [V("y")])
    b = make_model([helper.make_node("Tanh", ["x"], ["y"], name="tanh")], [V("x")], [V("y")])
    res = _diff(tmp_path, a, b)
    assert [(p.a.name, p.b.name) for p in res.matching.pairs if p.a.name == "y"] == [("y", "y")]
    u = _unmatched(res, "graph_output_cast_0")
    assert u.cause == "copy" and "'y'" in u.reason, (u.cause, u.reason)


def test_a_widening_cast_of_a_compared_tensor_is_a_copy(tmp_path):
    a = make_model([helper.make_node("Cast", ["x"], ["h"], to=F16, name="c16"),
                    helper.make_node("Relu", ["h"], ["r"], name="relu"),
                    helper.make_node("Cast", ["r"], ["w"], to=F32, name="c32"),
                    helper.make_node("Neg", ["w"], ["y"], name="neg")], [V("x")], [V("y")])
    b = make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Neg", ["r"], ["y"], name="neg")],
                   [V("x")], [V("y")])
    res = _diff(tmp_path, a, b)
    assert {("r", "r"), ("y", "y")} <= {(p.a.name, p.b.name) for p in res.matching.pairs}
    u = _unmatched(res, "w")
    assert u.cause == "copy" and "'r'" in u.reason, (u.cause, u.reason)


def test_a_narrowing_cast_is_no_copy(tmp_path):
    assert np.float32(0.1).astype(np.float16).astype(np.float32) != np.float32(0.1)  # the oracle: it rounds
    a = make_model([helper.make_node("Tanh", ["x"], ["t"], name="tanh_a"),
                    helper.make_node("Cast", ["t"], ["y"], to=F16, name="c16")], [V("x")], [V("y", F16)])
    b = make_model([helper.make_node("Tanh", ["x"], ["y"], name="tanh")], [V("x")], [V("y")])
    res = _diff(tmp_path, a, b)
    assert [(p.a.name, p.b.name) for p in res.matching.pairs if p.a.name == "y"] == [("y", "y")]
    assert _unmatched(res, "t").cause != "copy"
