"""Gradients at the edge values of an op's domain, against the derivative worked out by hand in float64
(torch autograd gives the same: it masks these cases the same way)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api


def _pow_model(b: np.ndarray, path) -> str:
    g = helper.make_graph([helper.make_node("Pow", ["a", "b"], ["y"])], "pow",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [b.size])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [b.size])],
                          [numpy_helper.from_array(b.astype(np.float32), "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return str(path)


def test_pow_with_exponent_zero_has_gradient_zero_in_its_base_even_at_zero(tmp_path):
    """0 ** 0 = 1 whatever the base: d/da is 0, where b a ** (b - 1) reads 0 * inf = NaN at a = 0."""
    a = np.array([0.0, 1.0, -2.0, 0.0, 3.0], np.float32)
    b = np.array([0.0, 0.0, 0.0, 2.0, 0.5])
    path = _pow_model(b, tmp_path / "pow.onnx")
    r = api.grad(path, spec=api.GradSpec(loss="sum", wrt=("a",)), inputs={"a": a}, save=True)
    a64 = a.astype(np.float64)
    want = np.where(b == 0, 0.0, b * np.power(np.abs(a64) + (a64 == 0), b - 1) * (a64 != 0))  # b a^(b-1), a > 0 here
    np.testing.assert_allclose(r.arrays["a"], want, rtol=1e-6, atol=0)
    assert np.isfinite(r.arrays["a"]).all()
