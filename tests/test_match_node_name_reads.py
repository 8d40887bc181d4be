"""A node that an optimizer rewrote keeps its name and reads another tensor: onnxruntime's transpose
optimizer pushes a Transpose below a Slice -> Squeeze chain (PP-OCRv4 rec at ORT_ENABLE_EXTENDED): A's Slice
node 'sl' reads x where B's reads t = Transpose(x), and A's Squeeze 'sq' writes the transpose of B's. Where
the dims coincide (a square slice) the two pairs by node name compared a permutation of the values, failed,
and "error starts at" blamed the Squeeze. Both read tensors that are paired with others (x with x, t with t):
other functions of the data, unmatched with that reason, and their readers with them; the outputs agree.
The construction is the oracle."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api


def _model(rewritten: bool) -> onnx.ModelProto:
    p = "a_" if rewritten else "b_"
    consts = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("st", [0]), ("en", [1]), ("ax", [0]))]
    nodes = [helper.make_node("Transpose", ["x"], ["t"], name="tr", perm=[0, 2, 1]),
             helper.make_node("Relu", ["t"], ["y1"], name="relu"),
             helper.make_node("Slice", ["x" if rewritten else "t", "st", "en", "ax"], [p + "s"], name="sl"),
             helper.make_node("Squeeze", [p + "s", "ax"], [p + "q"], name="sq"),
             helper.make_node("Abs", [p + "q"], [p + "ab"], name="abs")]
    last = p + "ab"
    if rewritten:
        nodes.append(helper.make_node("Transpose", [last], [p + "back"], name="tr2", perm=[1, 0]))
        last = p + "back"
    nodes.append(helper.make_node("Sigmoid", [last], ["y2"], name="sig"))
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 3])],
                      [helper.make_tensor_value_info("y1", TensorProto.FLOAT, [2, 3, 3]),
                       helper.make_tensor_value_info("y2", TensorProto.FLOAT, [3, 3])], consts)


def test_rewritten_nodes_of_one_name_are_not_paired(tmp_path):
    onnx.save(_model(True), str(tmp_path / "a.onnx"))
    onnx.save(_model(False), str(tmp_path / "b.onnx"))
    x = np.random.default_rng(0).standard_normal((2, 3, 3)).astype(np.float32)
    res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True),
                   config=api.RunConfig(device="cpu", cache=False), inputs=api.InputSpec(arrays={"x": x}))
    got = {r.pair.a.name: r.pair.b.name for r in res.results}
    for a, b in (("a_s", "b_s"), ("a_q", "b_q"), ("a_ab", "b_ab")):
        assert got.get(a) != b, got  # the transpose of one another: never compared
    un_a = {u.obs.name: u for u in res.matching.unmatched_a}
    assert un_a["a_s"].cause == "different-function" and "b_s" in un_a["a_s"].reason
    assert un_a["a_q"].cause == "different-function"
    # every pair that stands computes one function: all pass, and so do the outputs
    assert res.first_failure is None and res.verdict()[0] == "pass"
    assert got["t"] == "t" and got["y2"] == "y2"
