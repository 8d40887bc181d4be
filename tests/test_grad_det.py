"""Det's gradient is the matrix of cofactors (rules/algebra.py): exact where the matrix is singular too,
where dy det(X) X^-T is not defined; with a symbolic batch dimension; and a matrix too large for the
cofactors is refused in one line naming the node."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from onnxprobe import api
from onnxprobe.errors import ModelError


def _det_model(dims, path):
    g = helper.make_graph([helper.make_node("Det", ["x"], ["y"], name="the_det")], "det",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def _cofactors(x: np.ndarray) -> np.ndarray:
    """float64 oracle: (-1)^(i+j) det(x without row i and column j), per matrix."""
    m = x.shape[-1]
    out = np.zeros(x.shape)
    for i in range(m):
        for j in range(m):
            minor = np.delete(np.delete(x.astype(np.float64), i, axis=-2), j, axis=-1)
            out[..., i, j] = (-1) ** (i + j) * np.linalg.det(minor)
    return out


def _grad(path, x, dy):
    gp = api.grad_plan(api.load(path), api.GradSpec(loss="output-grad", output_grad=dy, wrt=("x",)), feed={"x": x})
    sess = ort.InferenceSession(gp.backward.model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run([gp.backward.grads["x"]], {"x": x, gp.loss.input: dy})[0]


@pytest.mark.parametrize("dims", [[2, 3, 3], ["n", 3, 3]], ids=["static", "symbolic-batch"])
def test_det_gradient_of_singular_matrices_is_the_cofactor_matrix(dims, tmp_path):
    rng = np.random.default_rng(2)
    a = rng.integers(-3, 4, (2, 3, 3)).astype(np.float32)
    a[0, 2] = a[0, 0] + 2 * a[0, 1]  # rank 2: det 0, the cofactors are not all 0
    a[1, :, 1] = 0.0  # a zero column: only the cofactors of that column are non-zero
    dy = np.array([1.5, -0.5], np.float32)
    got = _grad(_det_model(dims, tmp_path / "det.onnx"), a, dy)
    want = _cofactors(a) * dy[:, None, None]
    assert np.abs(want[0]).max() > 1 and np.abs(want[1]).max() > 1
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_det_too_large_for_cofactors_is_one_line(tmp_path):
    path = _det_model([65, 65], tmp_path / "big.onnx")
    with pytest.raises(ModelError, match="cannot differentiate Det node 'the_det': 65x65 matrices"):
        api.grad_plan(api.load(path), api.GradSpec(wrt=("x",)), feed={"x": np.eye(65, dtype=np.float32)})
    r = subprocess.run([sys.executable, "-m", "onnxprobe", "grad", str(path), "--wrt", "x"], capture_output=True, text=True)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 1 and len(lines) == 1 and "65x65 matrices" in lines[0], r.stderr
