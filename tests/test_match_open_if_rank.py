"""An If whose branches leave its output's rank open (Squeeze in one, Identity in the other: torch's x.squeeze(-1), as
in silero-vad), in a copy whose tensors are all renamed: no static shape on either side, so nothing paired the If, what
reads it, nor the output ('outputs could not be compared', exit 1, for a faithful copy); an If of two outputs was
never paired either (its outputs read the same tensors). What reads tensors paired with what the other reads pairs
without a static shape, and one node's outputs pair by their order. The oracle: onnxruntime's values of each pair."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from conftest import make_model
from onnxprobe import api
from test_diff import _run_with_outputs

X = np.array([[[-1.5], [0.5], [2.0], [-0.25]]], np.float32)


def _build(path, p, two_outputs: bool = False) -> str:
    vi = (lambda n: onnx.ValueInfoProto(name=n))
    outs = [p + "sq"] + ([p + "neg"] if two_outputs else [])
    then = [h.make_node("Constant", [], [p + "ax"], value=nh.from_array(np.array([-1], np.int64))),
            h.make_node("Squeeze", [p + "a", p + "ax"], [p + "sq"])] + ([h.make_node("Neg", [p + "sq"], [p + "neg"])] if two_outputs else [])
    other = [h.make_node("Identity", [p + "a"], [p + "id"])] + ([h.make_node("Abs", [p + "a"], [p + "abs"])] if two_outputs else [])
    it = h.make_graph(then, "it", [], [vi(n) for n in outs])
    ie = h.make_graph(other, "ie", [], [vi(p + "id")] + ([vi(p + "abs")] if two_outputs else []))
    results = [p + "b"] + ([p + "c"] if two_outputs else [])
    nodes = [h.make_node("Relu", ["x"], [p + "a"], name=p + "Relu"), h.make_node("Shape", [p + "a"], [p + "shp"], name=p + "Shape"),
             h.make_node("Constant", [], [p + "two"], value=nh.from_array(np.array(2, np.int64)), name=p + "C2"),
             h.make_node("Gather", [p + "shp", p + "two"], [p + "g"], name=p + "Gather"),
             h.make_node("Constant", [], [p + "one"], value=nh.from_array(np.array(1, np.int64)), name=p + "C1"),
             h.make_node("Equal", [p + "g", p + "one"], [p + "eq"], name=p + "Eq"),
             h.make_node("If", [p + "eq"], results, then_branch=it, else_branch=ie, name=p + "If"),
             h.make_node("Sigmoid", [p + "b"], ["y_" + p], name=p + "Sig")]
    outputs = [vi("y_" + p)]
    if two_outputs:
        nodes.append(h.make_node("Tanh", [p + "c"], ["z_" + p], name=p + "Tanh"))
        outputs.append(vi("z_" + p))
    onnx.save(make_model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, 4, 1])], outputs), path)
    return str(path)


def _values(path, names) -> dict:
    return _run_with_outputs(path, list(dict.fromkeys(names)), {"x": X})  # the oracle: plain onnxruntime


def test_a_renamed_if_of_open_rank_pairs_and_passes(tmp_path):
    for two in (False, True):
        b = _build(tmp_path / f"b{two}.onnx", "orig_", two)
        a = _build(tmp_path / f"a{two}.onnx", "zz_", two)
        res = api.diff(a, b, selection=api.Selection(all=True), inputs=api.InputSpec(arrays={"x": X}),
                       config=api.RunConfig(device="cpu", cache=False))
        pairs = {r.pair.a.name: r.pair.b.name for r in res.results if r.metrics is not None}
        assert pairs["zz_b"] == "orig_b" and pairs["y_zz_"] == "y_orig_", pairs
        if two:
            assert pairs["zz_c"] == "orig_c" and pairs["z_zz_"] == "z_orig_", pairs
        assert all(x.replace("zz_", "orig_") == y for x, y in pairs.items())  # each the renamed tensor's own
        main = [x for x in pairs if x in ("zz_b", "zz_c", "y_zz_", "z_zz_", "zz_a")]
        va, vb = _values(a, main), _values(b, [pairs[x] for x in main])
        assert all(np.array_equal(va[x], vb[pairs[x]]) for x in main)
        assert res.verdict()[0] == "pass", res.verdict()
