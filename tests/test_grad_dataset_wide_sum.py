"""``grad --inputs-dir``: a weight's dataset gradient is the float64 sum of its samples' (README). Where that sum is past
float32's range (two samples of 3e38 each), the report said 6e38 and 0 Inf while ``--save-grads`` wrote float32 Inf, with
numpy's bare 'overflow encountered in cast' as the only word. The saved gradient keeps float64 there, said in a note."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from onnxprobe import api


def _model(path) -> str:
    w = np.linspace(-1, 1, 8, dtype=np.float32)
    g = h.make_graph([h.make_node("Mul", ["x", "W"], ["m"], name="mul"), h.make_node("Add", ["m", "b"], ["y"], name="add")],
                     "g", [h.make_tensor_value_info("x", T.FLOAT, ["N", 8])], [h.make_tensor_value_info("y", T.FLOAT, ["N", 8])],
                     [nh.from_array(w, "W"), nh.from_array(np.zeros(8, np.float32), "b")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return str(path)


def _grads(tmp_path, value: float):
    model = _model(tmp_path / "m.onnx")
    d = tmp_path / f"ds{value:g}"
    d.mkdir()
    xs = [np.full((1, 8), value, np.float32), np.full((1, 8), value, np.float32)]
    for k, x in enumerate(xs):
        np.savez(d / f"b{k}.npz", x=x)
    res = api.grad_dataset(model, str(d), api.Selection(all=True), api.RunConfig(device="cpu"), api.GradSpec(loss="sum"))
    # the oracle: d sum(x*W + b) / dW = x, summed over the samples in float64
    want = np.sum([x.astype(np.float64)[0] for x in xs], axis=0)
    return res, want


def test_a_dataset_gradient_past_float32_is_saved_as_reported(tmp_path):
    res, want = _grads(tmp_path, 3e38)
    assert want.max() > np.finfo(np.float32).max
    w = res.arrays["W"]
    assert w.dtype == np.float64 and np.array_equal(w, want) and np.isfinite(w).all()
    row = next(r for r in res.rows if r.name == "W")
    assert row.stats.inf == 0 and row.stats.max == float(want.max())
    assert any("past float32's range" in n and "W" in n for n in res.notes)
    assert not any("overflow encountered" in n for n in res.notes)
    assert res.arrays["b"].dtype == np.float32  # 2 samples of 1: within float32


def test_within_float32_the_saved_gradients_stay_float32(tmp_path):
    res, want = _grads(tmp_path, 3.0)
    assert res.arrays["W"].dtype == np.float32 and np.array_equal(res.arrays["W"], want.astype(np.float32))
    assert not any("past float32's range" in n for n in res.notes)
