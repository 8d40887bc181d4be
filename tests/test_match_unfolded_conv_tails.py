"""Two models of one Conv (the same weights, byte for byte), one followed by Tanh, the other by tanh written as
2 sigmoid(2x) - 1: a Mul by 2 behind its Conv looked like a scale folded into A's Conv, so A's c paired with B's 2c
(FAIL at 6 dB, "▶ error starts at c ↔ c2" of two models computing one function; `diff --grad` likewise, c_grad ↔
c2_grad) and B's c was said "folded". Two Convs of the same weights took no tail in: they pair. The oracle: the two
models' tensors from plain onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh

from onnxprobe import api
from test_diff import _run_with_outputs


def _model(variant, path) -> str:
    r = np.random.default_rng(0)
    w, b = r.standard_normal((4, 3, 3, 3)).astype(np.float32), r.standard_normal(4).astype(np.float32)
    w2, b2 = r.standard_normal((64, 5)).astype(np.float32), r.standard_normal(5).astype(np.float32)
    inits = [nh.from_array(w, "conv.weight"), nh.from_array(b, "conv.bias"), nh.from_array(w2, "fc.weight"), nh.from_array(b2, "fc.bias")]
    nodes = [oh.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2], name="conv")]
    if variant == "A":
        nodes += [oh.make_node("Tanh", ["c"], ["t"], name="act")]
    else:
        inits += [nh.from_array(np.array(2.0, np.float32), "two"), nh.from_array(np.array(1.0, np.float32), "one")]
        nodes += [oh.make_node("Mul", ["c", "two"], ["c2"]), oh.make_node("Sigmoid", ["c2"], ["s"]),
                  oh.make_node("Mul", ["s", "two"], ["s2"]), oh.make_node("Sub", ["s2", "one"], ["t"], name="act")]
    nodes += [oh.make_node("Flatten", ["t"], ["fl"]), oh.make_node("MatMul", ["fl", "fc.weight"], ["mm"], name="fc"),
              oh.make_node("Add", ["mm", "fc.bias"], ["y"])]
    g = oh.make_graph(nodes, "m", [oh.make_tensor_value_info("x", TP.FLOAT, [2, 3, 8, 8])],
                      [oh.make_tensor_value_info("y", TP.FLOAT, [2, 5])], inits)
    onnx.save(oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)]), str(path))
    return str(path)


def test_two_convs_of_one_weight_pair_whatever_follows_them(tmp_path):
    a, b = _model("A", tmp_path / "a.onnx"), _model("B", tmp_path / "b.onnx")
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    spec, cfg = api.InputSpec(arrays={"x": x}), api.RunConfig(device="cpu", cache=False)
    res = api.diff(a, b, inputs=spec, config=cfg, selection=api.Selection(all=True))
    pairs = {r.pair.a.name: r.pair.b.name for r in res.results}
    assert pairs.get("c") == "c", pairs
    for r in res.results:  # every pair holds one function of the data: equal values (the oracle)
        va, vb = _run_with_outputs(a, [r.pair.a.name], {"x": x}), _run_with_outputs(b, [r.pair.b.name], {"x": x})
        assert np.allclose(va[r.pair.a.name], vb[r.pair.b.name], atol=1e-5), r.pair
    assert res.verdict()[0] == "pass" and res.first_failure is None
    labels = tmp_path / "labels.npy"
    np.save(labels, np.array([1, 3], np.int64))
    g = api.diff_grad(a, b, spec=api.GradSpec(loss="cross-entropy", labels=str(labels)), inputs=spec, config=cfg)
    gp = {r.pair.a.name: r.pair.b.name for r in g.results}
    assert gp.get("c_grad") == "c_grad", gp
    assert g.verdict()[0] == "pass" and g.first_failure is None and not any(not r.passed for r in g.results if r.metrics)
