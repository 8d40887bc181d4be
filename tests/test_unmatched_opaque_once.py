"""``compare.unmatched``: which of a side's observables read a tensor it compares nowhere (``_opaque``) is
asked by two steps of ``explain_unmatched`` (a tensor inside one node of the other side, a B tensor folded
into its consumer), both of A; it was computed twice per diff for the same side. The oracle: the number of
calls, one per side at most, and the explanation the folding step gives (the same as before)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.compare import unmatched

X = np.random.default_rng(5).standard_normal((2, 8)).astype(np.float32)


def _vi(n):
    return helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 8])


def test_opaque_is_computed_once_per_side(tmp_path, monkeypatch):
    a = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [_vi("x")], [_vi("y")], [], opset=17)
    consts = [numpy_helper.from_array(np.float32(-100), "lo"), numpy_helper.from_array(np.float32(100), "hi")]
    b = make_model([helper.make_node("Clip", ["x", "lo", "hi"], ["t"], name="clip"),
                    helper.make_node("Relu", ["t"], ["y"], name="relu")], [_vi("x")], [_vi("y")], consts, opset=17)
    onnx.save(a, str(tmp_path / "a.onnx"))
    onnx.save(b, str(tmp_path / "b.onnx"))
    calls: list[str] = []
    real = unmatched._opaque

    def counted(side):
        calls.append(side.label)
        return real(side)

    monkeypatch.setattr(unmatched, "_opaque", counted)
    res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True),
                   config=api.RunConfig(device="cpu", cache=False), inputs=api.InputSpec(arrays={"x": X}))
    (u,) = res.matching.unmatched_b
    assert u.obs.name == "t" and u.cause == "folded", (u.cause, u.reason)  # both steps ran on A's tensors
    assert calls and len(calls) == len(set(calls)), calls
