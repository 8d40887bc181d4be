"""OneHot's float values and Range's float start and delta carry gradients: OneHot(labels, K, [off, on]) is linear in
its values (label smoothing), Range(start, limit, delta)[i] = start + i * delta. Both were listed as building a
tensor "from shapes or indices alone": a weight reaching the loss through them got no gradient there, silently (dL/dv
[2.11, 0] for an exact [2.79, 1.43]). A step that changes how many values Range makes leaves the model unable to run:
no verdict for that gradient, not an onnxruntime error. The oracle: the gradients worked out by hand in float64."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from onnxprobe import api


def _grads(path, arrays, wrt, check=False):
    return api.grad(str(path), inputs=api.InputSpec(arrays=arrays), spec=api.GradSpec(wrt=tuple(wrt)), save=True, check=check,
                    config=api.RunConfig(cache=False))


def test_onehot_values_get_their_gradient(tmp_path):
    # v = [off, on]; o = OneHot(idx, 3, v) (idx -1 wraps to 2, 5 is out of range: hot nowhere); y = o * a + a * v[0]
    idx = np.array([0, 2, -1, 5], np.int64)
    nodes = [h.make_node("Slice", ["v", "s0", "s1"], ["v0"]), h.make_node("OneHot", ["idx", "depth", "v"], ["o"], axis=-1),
             h.make_node("Mul", ["o", "a"], ["p"]), h.make_node("Mul", ["a", "v0"], ["q"]), h.make_node("Add", ["p", "q"], ["y"])]
    inits = [nh.from_array(np.array([0.1, 0.9], np.float32), "v"), nh.from_array(idx, "idx"),
             nh.from_array(np.array(3, np.int64), "depth"), nh.from_array(np.array([0], np.int64), "s0"),
             nh.from_array(np.array([1], np.int64), "s1")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("a", T.FLOAT, [4, 3])], [h.make_tensor_value_info("y", T.FLOAT, [4, 3])], inits)
    m = tmp_path / "onehot.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(m))
    a = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    mask = np.zeros((4, 3))
    for r, i in enumerate(idx):
        if -3 <= i < 3:
            mask[r, i % 3] = 1
    a64 = a.astype(np.float64)  # L = sum(y): dL/d on = sum(a mask), dL/d off = sum(a (1 - mask)) + sum(a) (the Slice)
    want = np.array([np.sum(a64 * (1 - mask)) + np.sum(a64), np.sum(a64 * mask)])
    res = _grads(m, {"a": a}, ["v"], check=True)
    assert np.allclose(res.arrays["v"], want, rtol=1e-5, atol=1e-6), (res.arrays["v"], want)
    row = next(r for r in res.rows if r.name == "v")
    assert row.check["ok"] is True, row.check


def test_range_start_and_delta_get_their_gradients_and_a_count_step_gets_no_verdict(tmp_path):
    def model(limit):
        nodes = [h.make_node("Range", ["s", "lim", "d"], ["rr"]), h.make_node("Mul", ["rr", "a"], ["y"])]
        inits = [nh.from_array(np.array(0.5, np.float32), "s"), nh.from_array(np.array(limit, np.float32), "lim"),
                 nh.from_array(np.array(0.25, np.float32), "d")]
        g = h.make_graph(nodes, "g", [h.make_tensor_value_info("a", T.FLOAT, [None])], [h.make_tensor_value_info("y", T.FLOAT, [None])], inits)
        p = tmp_path / f"range{limit}.onnx"
        onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(p))
        return p

    a = np.arange(1, 8, dtype=np.float32)  # Range(0.5, 2.1, 0.25): 7 values
    res = _grads(model(2.1), {"a": a}, ["s", "d"], check=True)
    i = np.arange(7, dtype=np.float64)
    assert np.isclose(res.arrays["s"], a.sum()) and np.isclose(res.arrays["d"], np.sum(i * a)), res.arrays
    assert all(r.check["ok"] is True for r in res.rows if r.name in ("s", "d")), [r.check for r in res.rows]
    # limit 2.0 from 0.5 by 0.25: exactly 6 values, and a step of start or delta makes 7: the model does not run there
    res = _grads(model(2.0), {"a": a[:6]}, ["s", "d"], check=True)
    assert np.isclose(res.arrays["d"], np.sum(i[:6] * a[:6]))
    rows = {r.name: r for r in res.rows}
    assert rows["d"].check["ok"] is None and "does not run" in rows["d"].check["unresolved"], rows["d"].check
