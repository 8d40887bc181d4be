"""A per-tensor tolerance of a tensor the selection leaves out was printed in the criterion and applied to nothing,
without a word: a note says so; with the tensor selected, none."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api


def _pair(tmp_path):
    out = []
    for name, k in (("a", 1.0), ("b", 1.01)):
        m = make_model([helper.make_node("Mul", ["x", "k"], ["xs"], name="scale"), helper.make_node("Relu", ["xs"], ["y"], name="relu")],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], [numpy_helper.from_array(np.float32(k), "k")])
        onnx.save(m, tmp_path / f"{name}.onnx")
        out.append(str(tmp_path / f"{name}.onnx"))
    return out


def test_a_rule_of_a_tensor_left_out_is_said_to_judge_nothing(tmp_path):
    a, b = _pair(tmp_path)
    rule = {"xs": api.Tolerance("allclose", atol=0.0, rtol=0.0)}
    res = api.diff(a, b, selection=api.Selection(names=("y",)), per_tensor=rule)
    assert "xs" not in {r.pair.a.name for r in res.results}
    assert any("judges nothing" in n and "'xs'" in n for n in res.notes), res.notes
    res = api.diff(a, b, selection=api.Selection(all=True), per_tensor=rule)
    assert "xs" in {r.pair.a.name for r in res.results}
    assert not any("judges nothing" in n for n in res.notes), res.notes
