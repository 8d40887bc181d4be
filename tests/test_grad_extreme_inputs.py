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
