"""A graph input listed twice under one name, naming an initializer: onnxruntime reads the first declaration
and not the later (measured, onnxruntime 1.32: the first of FLOAT then INT64, or of 2x3 then 5, over a FLOAT
2x3 weight loads and runs; the other order it refuses). The load check held every declaration against the
weight and refused the first kind ("'W' is declared of element type INT64, and its initializer is of FLOAT
(onnxruntime refuses it too)"; QA fuzzing round 4: an IR 3 model listing its weights as inputs, one twice).
Oracle: onnxruntime's load and numpy."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as H
from onnx import numpy_helper

from conftest import ort_session
from onnxprobe import api
from onnxprobe.errors import ModelError

W = np.arange(6, dtype=np.float32).reshape(2, 3)
X = np.array([[1, 0.5], [-0.25, 2]], np.float32)


def model(decls, ir):
    ins = [H.make_tensor_value_info("x", T.FLOAT, [2, 2])] + [H.make_tensor_value_info("W", t, s) for t, s in decls]
    g = H.make_graph([H.make_node("MatMul", ["x", "W"], ["y"], name="mm")], "g", ins,
                     [H.make_tensor_value_info("y", T.FLOAT, [2, 3])], [numpy_helper.from_array(W, "W")])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = ir
    return m


@pytest.mark.parametrize("ir", [3, 8])
@pytest.mark.parametrize("decls", [[(T.FLOAT, [2, 3]), (T.INT64, [2, 3])], [(T.FLOAT, [2, 3]), (T.FLOAT, [5])]])
def test_the_first_declaration_is_the_one_read(ir, decls):
    m = model(decls, ir)
    assert ort_session(m) is not None
    res = api.layers(m, inputs={"x": X}, selection=api.Selection(all=True))
    assert res.stats["y"].max == pytest.approx((X.astype(np.float64) @ W).max())
    m = model(decls[::-1], ir)  # the contrary one first: refused by both
    assert ort_session(m) is None
    with pytest.raises(ModelError):
        api.load(m)
