"""A B tensor is 'folded into its consumer' (Conv+BN folding, a Relu dropped by the quantizer) only where A
computes it inside the tensor its consumer's output is paired with. QA: B's extra graph output t = Clip(x)
read by Relu -> y (paired with A's y = Relu(x)) was called folded, and the diff PASSED, although A has no
output for t (nothing was compared for it); and a HardSigmoid of a graph input x2 that A's y does not read
was called folded into A's y. The oracle: the graphs built here (which outputs and inputs each model has),
and onnx.reference for the values that the pairs compare."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from conftest import make_model
from onnxprobe import api

X = np.random.default_rng(3).standard_normal((2, 8)).astype(np.float32)


def _vi(n):
    return helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 8])


def _diff(tmp_path, a, b, arrays):
    onnx.save(a, str(tmp_path / "a.onnx"))
    onnx.save(b, str(tmp_path / "b.onnx"))
    return api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True),
                    config=api.RunConfig(device="cpu", cache=False), inputs=api.InputSpec(arrays=arrays))


def _relu_a():
    return make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [_vi("x")], [_vi("y")], [], opset=17)


def _clip_relu_b(t_output: bool):
    """t = Clip(x, -100, 100) -> Relu -> y: y is A's Relu(x) for these inputs; t an extra output or not."""
    consts = [numpy_helper.from_array(np.float32(-100), "lo"), numpy_helper.from_array(np.float32(100), "hi")]
    return make_model([helper.make_node("Clip", ["x", "lo", "hi"], ["t"], name="clip"),
                       helper.make_node("Relu", ["t"], ["y"], name="relu")],
                      [_vi("x")], [_vi("y"), _vi("t")] if t_output else [_vi("y")], consts, opset=17)


def test_an_extra_output_of_b_is_not_folded_and_fails_the_verdict(tmp_path):
    a, b = _relu_a(), _clip_relu_b(True)
    want = ReferenceEvaluator(a).run(None, {"x": X})[0]
    np.testing.assert_allclose(ReferenceEvaluator(b).run(["y"], {"x": X})[0], want)  # y agrees: only t is extra
    res = _diff(tmp_path, a, b, {"x": X})
    assert [(r.pair.a.name, r.pair.b.name) for r in res.results] == [("y", "y")]
    (u,) = res.matching.unmatched_b
    assert u.obs.name == "t" and u.obs.is_output
    assert u.cause != "folded", u.reason
    verdict, why = res.verdict()
    assert verdict == "error" and "'t'" in why, (verdict, why)


def test_the_same_tensor_not_an_output_is_still_folded(tmp_path):
    """The guard's other side: t only read by the Relu, A's y computes it inside: folded, and a pass."""
    res = _diff(tmp_path, _relu_a(), _clip_relu_b(False), {"x": X})
    (u,) = res.matching.unmatched_b
    assert u.obs.name == "t" and u.cause == "folded", (u.cause, u.reason)
    assert res.verdict()[0] == "pass", res.verdict()


def test_a_tensor_reading_a_graph_input_that_a_does_not_read_is_not_folded(tmp_path):
    """A: y = Mul(x, x); B: hs = HardSigmoid(x2), y = Mul(x, hs): A's y reads nothing of x2, so hs is no
    part of it (both also compute z = Neg(x2), an output, so x2 is an input of both)."""
    neg = helper.make_node("Neg", ["x2"], ["z"], name="neg")
    a = make_model([helper.make_node("Mul", ["x", "x"], ["y"], name="mul"), neg],
                   [_vi("x"), _vi("x2")], [_vi("y"), _vi("z")], [], opset=17)
    b = make_model([helper.make_node("HardSigmoid", ["x2"], ["hs"], name="hsig"),
                    helper.make_node("Mul", ["x", "hs"], ["y"], name="mul"), neg],
                   [_vi("x"), _vi("x2")], [_vi("y"), _vi("z")], [], opset=17)
    res = _diff(tmp_path, a, b, {"x": X, "x2": X})
    assert {(r.pair.a.name, r.pair.b.name) for r in res.results} == {("y", "y"), ("z", "z")}
    (u,) = res.matching.unmatched_b
    assert u.obs.name == "hs" and u.cause != "folded", (u.cause, u.reason)
