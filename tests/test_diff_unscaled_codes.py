"""An int8 tensor taken for quantized codes of no known scale (a weight's codes moved by a Transpose or a
Gather, nothing dequantizing them) was hidden on both sides of a diff and vanished from it without a word:
not compared, not unmatched, no note; a MODEL OUTPUT of such codes too, so a diff of two models whose int8
outputs differ passed. Now such a tensor is unmatched on each side with cause ``no-scale`` and why, grouped
in ``uncompared`` and listed after the others; a model output of codes is compared as it is. QA.

Oracle: numpy (the gathered rows of the two weight tensors, which differ or not)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.report.diff import diff_dict

CPU = api.RunConfig(device="cpu")


def _model(path, w: np.ndarray) -> str:
    """x(2x4) @ Cast(Transpose(W int8 3x4)) -> y, and Gather(W, [0, 2]) -> g, an int8 model output."""
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Transpose", ["W"], ["Wt"], name="tr"),
             helper.make_node("Cast", ["Wt"], ["Wf"], to=TensorProto.FLOAT, name="cast"),
             helper.make_node("MatMul", ["x", "Wf"], ["y"], name="mm"),
             helper.make_node("Gather", ["W", "idx"], ["g"], name="ga")]
    m = make_model(nodes, [vi("x", TensorProto.FLOAT, [2, 4])],
                   [vi("y", TensorProto.FLOAT, [2, 3]), vi("g", TensorProto.INT8, [2, 4])],
                   [numpy_helper.from_array(w, "W"), numpy_helper.from_array(np.array([0, 2], np.int64), "idx")])
    onnx.save(m, path)
    return str(path)


W = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)


def test_codes_hidden_on_both_sides_are_listed(tmp_path):
    p = _model(tmp_path / "m.onnx", W)
    res = api.diff(p, p, selection=api.Selection(all=True, include_constants=True), config=CPU)
    for items in (res.matching.unmatched_a, res.matching.unmatched_b):
        (u,) = [u for u in items if u.obs.name == "Wt"]
        assert u.cause == "no-scale" and "no known scale" in u.reason
    d = diff_dict(res)
    (g,) = [g for g in d["uncompared"] if g["cause"] == "no-scale"]
    assert (g["in_a"], g["in_b"], g["examples"]) == (1, 1, ["Wt"])
    assert d["verdict"] == "pass"  # what was compared agrees; the codes are said, not judged


def test_a_model_output_of_codes_is_compared(tmp_path):
    """The int8 output g was in no row: two models whose g differ passed."""
    w2 = W.copy()
    w2[2, 1] += 3  # a row g gathers
    assert not np.array_equal(W[[0, 2]], w2[[0, 2]])
    a, b = _model(tmp_path / "a.onnx", W), _model(tmp_path / "b.onnx", w2)
    res = api.diff(a, a, config=CPU)
    (row,) = [r for r in res.results if r.pair.a.name == "g"]
    assert row.metrics.exact and res.verdict()[0] == "pass"
    res = api.diff(a, b, config=CPU)
    (row,) = [r for r in res.results if r.pair.a.name == "g"]
    assert row.passed is False and res.verdict()[0] == "fail"
