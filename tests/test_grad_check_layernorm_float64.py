"""grad --check writes a LayerNormalization out for its float64 copy (onnxruntime has no float64 statistics for
it: autodiff.check._expand_layer_norms). At opset 18 the two ReduceMeans' axes were two Constant nodes writing one
name: onnx's shape inference then knew no axes, the expansion's tensors had no rank, and the float64 backward
graph could not sum a gradient back to them; the check fell back to float32 gradients ('float64 (float32
gradients)', tolerance 1e-3 where float64 has 1e-6: GPT-2's dynamo export). One Constant of the axes now serves
both, and the check runs in float64 with its gradients, which central differences in float64 (the check's own
oracle) confirm."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api


def _model(path, opset: int) -> str:
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "gamma"),
             numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "beta"),
             numpy_helper.from_array(rng.standard_normal((8, 3)).astype(np.float32), "W")]
    nodes = [helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["h"], name="ln", axis=-1, epsilon=1e-5),
             helper.make_node("MatMul", ["h", "W"], ["y"], name="mm")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 3])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return str(path)


@pytest.mark.parametrize("opset", [17, 18])
def test_a_layer_norm_is_checked_in_float64(tmp_path, opset):
    p = _model(tmp_path / "ln.onnx", opset)
    r = api.grad(p, None, api.RunConfig(device="cpu"), api.GradSpec(loss="sum"), check=True)
    assert r.check_mode == "float64", (r.check_mode, r.notes)
    checked = {row.name: row.check for row in r.rows if row.check is not None}
    assert {"gamma", "beta", "W"} <= set(checked) and all(c["ok"] for c in checked.values()), checked
