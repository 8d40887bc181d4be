"""Gradients of activations at large finite inputs: a NaN or a 0 there is not a rounding matter. The
oracle is torch.autograd on the same graph (tests/test_autodiff_torchref.py) in float64, where none of
these inputs overflow."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from test_autodiff_torchref import in_worker

from onnxprobe import api

X = np.array([1.0, 80.0, 90.0, 1e20, 3e38, -1.0, -20.0, -80.0, -90.0, -1e20, -3e38, 0.5, -0.5], np.float32)
OPS = [("Celu", {}), ("Celu", {"alpha": 0.5}), ("Elu", {}), ("Selu", {}), ("Gelu", {"approximate": "tanh"}),
       ("Gelu", {})]


def _model(op, attrs, elem):
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info("x", elem, [X.size])],
                          [helper.make_tensor_value_info("y", elem, [X.size])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 9
    return m


@pytest.fixture(scope="module")
def torch_answers():
    jobs = [{"kind": "grads", "model": _model(op, a, TensorProto.DOUBLE).SerializeToString(), "feeds": {},
             "wrt": {"x": X.astype(np.float64)}, "outputs": [("y", np.ones(X.size))]} for op, a in OPS]
    return in_worker(jobs)


@pytest.mark.parametrize("k", range(len(OPS)), ids=[f"{op}{a}" for op, a in OPS])
def test_activation_gradient_at_large_inputs(k, torch_answers, tmp_path):
    op, attrs = OPS[k]
    path = tmp_path / "m.onnx"
    import onnx

    onnx.save(_model(op, attrs, TensorProto.FLOAT), path)
    dy = np.ones(X.size, np.float32)
    gp = api.grad_plan(api.load(path), api.GradSpec(loss="output-grad", output_grad=dy, wrt=("x",)), feed={"x": X})
    sess = ort.InferenceSession(gp.backward.model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run([gp.backward.grads["x"]], {"x": X, gp.loss.input: dy})[0]
    want = torch_answers[k]["x"]
    assert np.all(np.isfinite(want)), want
    # relative everywhere (e^-20 = 2e-9 is a value, not a rounding of 1); subnormals round coarser
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-37)


X16 = np.array([-65504.0, -500.0, -60.0, -20.0, -1.0, 0.5, 1.0, 20.0, 60.0, 500.0, 65504.0], np.float16)


def test_tanh_gelu_gradient_of_float16_at_large_inputs(tmp_path):
    # the tanh form clamps x at 1e10 to keep x^3 finite; in float16 that bound is inf (numpy's "overflow
    # encountered in cast" came out as a note), nothing was clamped and x^3 overflowed: the backward graph,
    # run in float16 (onnx.reference, a GPU's float16 kernels), gave NaN at |x| >= 256 where the slope is
    # 0 or 1. Oracle: torch.autograd in float64 on the same float16 values.
    import warnings

    import onnx
    from onnx.reference import ReferenceEvaluator

    want = in_worker([{"kind": "grads", "model": _model("Gelu", {"approximate": "tanh"}, TensorProto.DOUBLE).SerializeToString(),
                       "feeds": {}, "wrt": {"x": X16.astype(np.float64)}, "outputs": [("y", np.ones(X16.size))]}])[0]["x"]
    fast = helper.make_model(helper.make_graph(
        [helper.make_node("FastGelu", ["x"], ["y"], domain="com.microsoft")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [X16.size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [X16.size])]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    for k, m in enumerate((_model("Gelu", {"approximate": "tanh"}, TensorProto.FLOAT16), fast)):
        onnx.save(m, tmp_path / f"{k}.onnx")
        dy = np.ones(X16.size, np.float16)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            gp = api.grad_plan(api.load(tmp_path / f"{k}.onnx"), api.GradSpec(loss="output-grad", output_grad=dy, wrt=("x",)),
                               feed={"x": X16})
        if k == 1:  # onnx.reference has no FastGelu: the same slope (gelu_slope), planned without the overflow
            continue
        got = ReferenceEvaluator(gp.backward.model).run([gp.backward.grads["x"]], {"x": X16, gp.loss.input: dy})[0]
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-2, atol=2e-3)
