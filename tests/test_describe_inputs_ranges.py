"""The report header's inputs line said 'random integers in [-5, 300)' for a uint8 input (drawn in [0, 256), what
the dtype holds) and for a bool input (drawn as random True / False): it says the range really drawn from, and
'random booleans' for bool. Checked against the feed the run really made."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxprobe import api


def _model(tmp_path):
    g = helper.make_graph([helper.make_node("Cast", ["u"], ["uf"], to=TensorProto.FLOAT),
                           helper.make_node("Cast", ["b"], ["bf"], to=TensorProto.FLOAT),
                           helper.make_node("Cast", ["i"], ["if_"], to=TensorProto.FLOAT)], "g",
                          [helper.make_tensor_value_info("u", TensorProto.UINT8, [2, 500]),
                           helper.make_tensor_value_info("b", TensorProto.BOOL, [2, 3]),
                           helper.make_tensor_value_info("i", TensorProto.INT32, [2, 500])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("uf", "bf", "if_")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "m.onnx")
    return tmp_path / "m.onnx"


def test_the_inputs_line_says_the_range_drawn_from(tmp_path):
    spec = api.InputSpec(int_range=(-5, 300))
    res = api.layers(_model(tmp_path), api.Selection(all=True), inputs=spec)
    lines = {ln.split()[0]: ln for ln in api.describe_inputs(_model(tmp_path), spec, feed=res.feed)}
    u, i = res.feed["u"], res.feed["i"]
    assert u.min() >= 0 and u.max() <= 255 and i.min() < 0 and i.max() > 255  # what was drawn (1,000 draws each)
    assert lines["u"].endswith("random integers in [0, 256) (seed 0)"), lines["u"]
    assert lines["i"].endswith("random integers in [-5, 300) (seed 0)"), lines["i"]
    assert set(np.unique(res.feed["b"])) <= {False, True}
    assert lines["b"].endswith("random booleans (seed 0)"), lines["b"]
