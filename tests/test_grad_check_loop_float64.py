"""`grad --check` of a model with a Loop: the float64 copy dropped the main graph's value_info, where the shape of
the Loop's carried output learned from a run lives (onnx's inference gives it no rank), so its backward graph could
not be built ("cannot sum the gradient back to the shape of 'vT'") and the check fell back to float32 gradients at a
1e-3 tolerance: a float64 model was checked so, and a right float16 gradient FAILed. Oracle: the check's mode, and
W's gradient against float64 finite differences of the same function in numpy."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from onnxprobe import api

NP = {T.FLOAT: np.float32, T.DOUBLE: np.float64, T.FLOAT16: np.float16}


def _loop_model(dt: int, w: np.ndarray) -> onnx.ModelProto:
    body = h.make_graph(
        [h.make_node("Mul", ["v_in", "W"], ["vw"]), h.make_node("Sin", ["v_in"], ["sv"]),
         h.make_node("Add", ["vw", "sv"], ["v_out"]), h.make_node("Cast", ["i"], ["fi"], to=dt),
         h.make_node("Mul", ["v_out", "fi"], ["scan_o"]), h.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
         h.make_tensor_value_info("v_in", dt, [3])],
        [h.make_tensor_value_info("cond_out", T.BOOL, []), h.make_tensor_value_info("v_out", dt, [3]),
         h.make_tensor_value_info("scan_o", dt, [3])])
    inits = [nh.from_array(w.astype(NP[dt]), "W"), nh.from_array(np.array(3, np.int64), "M"), nh.from_array(np.array(True), "c0")]
    g = h.make_graph([h.make_node("Loop", ["M", "c0", "v0"], ["vT", "scans"], body=body),
                      h.make_node("ReduceSum", ["scans"], ["r"], keepdims=0), h.make_node("Mul", ["vT", "r"], ["out"])],
                     "loop", [h.make_tensor_value_info("v0", dt, [3])], [h.make_tensor_value_info("out", dt, [3])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _loss(w: np.ndarray, v0: np.ndarray) -> float:
    v, scans = v0.astype(np.float64), []
    for i in range(3):
        v = v * w + np.sin(v)
        scans.append(v * i)
    return float((v * np.sum(scans)).sum())


@pytest.mark.parametrize("dt", [T.FLOAT, T.DOUBLE, T.FLOAT16])
def test_check_of_a_loop_model_runs_in_float64(tmp_path, dt):
    rng = np.random.default_rng(12)
    w = (rng.standard_normal(3) * 0.8 + 1).astype(NP[dt])
    v0 = (rng.standard_normal(3) * 0.5 + 0.5).astype(NP[dt])
    p = tmp_path / "loop.onnx"
    onnx.save(_loop_model(dt, w), p)
    res = api.grad(p, api.Selection(all=True), api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays={"v0": v0}), check=True)
    assert res.check_mode == "float64", (res.check_mode, res.notes)
    assert res.checked >= 2 and all(r.check["ok"] for r in res.rows if r.check and r.check["ok"] is not None)
    w64 = w.astype(np.float64)
    fd = np.array([(_loss(w64 + e, v0) - _loss(w64 - e, v0)) / 2e-6 for e in np.eye(3) * 1e-6])
    got = next(r for r in res.rows if r.target.ref.name == "W")
    assert got.check["ok"]
    rows = {r.target.ref.name: r for r in res.rows}
    assert rows["W"].stats is not None
    if dt != T.FLOAT16:  # the run's own gradient, in the model's type, against the oracle
        res2 = api.grad(p, api.Selection(names=("W",)), api.RunConfig(device="cpu", cache=False),
                        inputs=api.InputSpec(arrays={"v0": v0}), save=True)
        np.testing.assert_allclose(res2.arrays["W"], fd, rtol=1e-4 if dt == T.FLOAT else 1e-7)
