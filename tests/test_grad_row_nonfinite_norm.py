"""A gradient holding NaN has a NaN norm, one holding an Inf (and no NaN) an Inf norm, in the Python API as in the
report: `GradRow.norm` gave the norm of the finite values (0.0 for an all-NaN weight gradient, which the README's own
example reads), and |g|/|t| read inf over a tensor whose norm is NaN. The oracle: numpy's norm of the saved gradients."""

from __future__ import annotations

import json
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api


def test_norms_of_nonfinite_gradients(tmp_path):
    z = numpy_helper.from_array(np.array([0, 1, 0, 2], np.float32), "zdiv")
    w = numpy_helper.from_array(np.eye(4, dtype=np.float32), "W")
    half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
    nodes = [helper.make_node("Sub", ["x", "half"], ["centered"], name="sub"), helper.make_node("Log", ["centered"], ["logged"], name="log"),
             helper.make_node("Div", ["logged", "zdiv"], ["divided"], name="div"), helper.make_node("MatMul", ["divided", "W"], ["y"], name="mm")]
    g = helper.make_graph(nodes, "nan", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [z, w, half])
    path = tmp_path / "nan.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    x = np.random.default_rng(0).random((2, 4)).astype(np.float32)
    res = api.grad(str(path), api.Selection(all=True), inputs=api.InputSpec(arrays={"x": x}), save=True,
                   config=api.RunConfig(cache=False))
    rows = {r.name: r for r in res.rows}
    report = {d["tensor"]: d for d in json.loads(json.dumps(api.report(res)))["gradients"]}
    for name, row in rows.items():
        g64 = res.arrays[name].astype(np.float64)
        want = np.sqrt(np.sum(g64 ** 2))  # nan with a NaN, inf with an Inf: numpy's own
        assert (math.isnan(want) and math.isnan(row.norm)) or row.norm == want or math.isclose(row.norm, want, rel_tol=1e-6), (name, row.norm, want)
        if row.value_norm is not None and math.isnan(row.value_norm):
            assert math.isnan(row.ratio), (name, row.ratio)
    assert math.isnan(rows["W"].norm) and math.isnan(rows["W"].ratio)  # all NaN: was 0.0 and 0.0
    assert report["W"]["norm"] == "nan" and report["W"]["ratio"] == "nan"
    assert all(report[n]["ratio"] == "nan" for n, r in rows.items() if r.value_norm is not None and math.isnan(r.value_norm))
