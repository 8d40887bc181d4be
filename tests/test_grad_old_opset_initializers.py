"""An opset-9 model that onnxruntime's optimizer saved (optimized_model_filepath) keeps IR version 3 but no
longer lists its initializers as graph inputs; onnx.version_converter then stops at the first one ('Input
conv1_w_0 is undefined!'), so `grad` refused every ORT-optimized copy of an opset-9 CNN (AlexNet, ResNet-50
of the onnx model zoo) with "converting the model from opset 9 to 17 failed". Oracle: the gradients of
sum(dy * Gemm(x, w, b)) by hand in numpy float64."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
RNG = np.random.default_rng(9)


def test_grad_of_an_ir3_model_whose_initializers_are_not_inputs(tmp_path):
    w = RNG.standard_normal((4, 3)).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    m = make_model([helper.make_node("Gemm", ["x", "w", "b"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                   [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")], opset=9, ir=3)
    assert [i.name for i in m.graph.input] == ["x"]  # as onnxruntime writes it
    onnx.save(m, tmp_path / "m.onnx")
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    dy = RNG.standard_normal((2, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "dy.npy", dy)
    r = runner.invoke(app, ["grad", str(tmp_path / "m.onnx"), "--input", f"x={tmp_path / 'x.npy'}", "--device", "cpu",
                            "--output-grad", str(tmp_path / "dy.npy"), "--save-grads", str(tmp_path / "g.npz"),
                            "--wrt", "x", "--wrt", "w", "--wrt", "b"])
    assert r.exit_code == 0, r.output
    got = np.load(tmp_path / "g.npz")
    x64, w64, dy64 = x.astype(np.float64), w.astype(np.float64), dy.astype(np.float64)
    np.testing.assert_allclose(got["w"], x64.T @ dy64, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["b"], dy64.sum(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["x"], dy64 @ w64.T, rtol=1e-5, atol=1e-6)
    assert set(got) == {"x", "w", "b"}  # the initializers did not become inputs of the model
