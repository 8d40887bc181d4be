"""The backward graph takes its shapes from the run where onnxruntime computes others than ONNX shape
inference says: MaxPool / AveragePool with ceil_mode=1 and pads on an odd size (inference 5x5, onnxruntime
and torch 4x4: the last window would start in the padding, and is dropped). MaxPool's gradient crashed in
ScatterElements; AveragePool's reported y as 5x5 and refused an --output-grad of the real 4x4. Oracle: the
windows computed by hand in numpy float64."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
RNG = np.random.default_rng(5)


def _windows(n_in: int, n_out: int):
    """Window k covers [2k - 1, 2k + 1) clipped to the input (kernel 2, stride 2, pad 1)."""
    return [(max(2 * k - 1, 0), min(2 * k + 1, n_in)) for k in range(n_out)]


def _oracle(op: str, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    dx = np.zeros_like(x)
    wins = _windows(x.shape[-1], dy.shape[-1])
    for i, (r0, r1) in enumerate(wins):
        for j, (c0, c1) in enumerate(wins):
            win = x[0, 0, r0:r1, c0:c1]
            if op == "MaxPool":
                a, b = np.unravel_index(np.argmax(win), win.shape)
                dx[0, 0, r0 + a, c0 + b] += dy[0, 0, i, j]
            else:  # count_include_pad=0: the mean over the window's elements inside the input
                dx[0, 0, r0:r1, c0:c1] += dy[0, 0, i, j] / win.size
    return dx


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_with_ceil_mode_uses_the_run_shape(tmp_path, op):
    m = make_model([helper.make_node(op, ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1],
                                     ceil_mode=1)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 7, 7])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx.save(m, tmp_path / "m.onnx")
    x = RNG.permutation(49).reshape(1, 1, 7, 7).astype(np.float32)  # distinct values: no max ties
    dy = RNG.standard_normal((1, 1, 4, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "dy.npy", dy)
    r = runner.invoke(app, ["grad", str(tmp_path / "m.onnx"), "--input", f"x={tmp_path / 'x.npy'}", "--output-grad",
                            str(tmp_path / "dy.npy"), "--wrt", "x", "--device", "cpu", "--save-grads",
                            str(tmp_path / "g.npz")])
    assert r.exit_code == 0, r.output
    want = _oracle(op, x.astype(np.float64), dy.astype(np.float64))
    np.testing.assert_allclose(np.load(tmp_path / "g.npz")["x"], want, rtol=1e-6, atol=1e-6)


def test_conv_transpose_same_lower_with_output_padding_uses_the_run_shape(tmp_path):
    """ConvTranspose auto_pad=SAME_LOWER, strides 2, output_padding [1, 0] on 3x4: inference says 7x8,
    onnxruntime computes 6x8. The gradient of x for an --output-grad of the real shape; oracle: y is linear
    in x, so dL/dx_i = <dy, y(e_i)> - <dy, y(0)>, each y run by onnxruntime itself (float64 sums)."""
    import onnxruntime as ort

    w = RNG.standard_normal((2, 3, 3, 3)).astype(np.float32)
    m = make_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], auto_pad="SAME_LOWER", strides=[2, 2],
                                     output_padding=[1, 0])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [onnx.numpy_helper.from_array(w, "w")])
    onnx.save(m, tmp_path / "m.onnx")
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    run = (lambda x: sess.run(None, {"x": x})[0].astype(np.float64))
    x = RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)
    dy = RNG.standard_normal(run(x).shape)
    assert dy.shape == (1, 3, 6, 8)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "dy.npy", dy.astype(np.float32))
    r = runner.invoke(app, ["grad", str(tmp_path / "m.onnx"), "--input", f"x={tmp_path / 'x.npy'}", "--output-grad",
                            str(tmp_path / "dy.npy"), "--wrt", "x", "--device", "cpu", "--save-grads",
                            str(tmp_path / "g.npz")])
    assert r.exit_code == 0, r.output
    dy32 = dy.astype(np.float32).astype(np.float64)
    base = float(np.sum(dy32 * run(np.zeros_like(x))))
    want = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = 1
        want[i] = float(np.sum(dy32 * run(e))) - base
    np.testing.assert_allclose(np.load(tmp_path / "g.npz")["x"], want, rtol=1e-5, atol=1e-5)


def _pool(op: str, x: np.ndarray) -> np.ndarray:
    wins = _windows(x.shape[-1], 4)
    f = np.max if op == "MaxPool" else np.mean
    return np.array([[f(x[0, 0, r0:r1, c0:c1]) for c0, c1 in wins] for r0, r1 in wins]).reshape(1, 1, 4, 4)


def _pool_sin_model(op: str) -> onnx.ModelProto:
    """pool (ceil_mode, pads: onnxruntime 4x4, inference 5x5) -> Flatten -> Sin -> ReduceSum, as torch's
    legacy exporter writes ``F.avg_pool2d(x, 2, 2, 1, ceil_mode=True).flatten(1).sin().sum(1)``: the shapes
    after the pool are inferred from inference's 5x5 by onnxruntime too (16 vs 25 elements), which a
    backward graph built on the run's shapes must still load and run against."""
    return make_model([helper.make_node(op, ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1],
                                        ceil_mode=1),
                       helper.make_node("Flatten", ["p"], ["f"], axis=1),
                       helper.make_node("Sin", ["f"], ["s"]),
                       helper.make_node("ReduceSum", ["s", "ax"], ["y"], keepdims=0)],
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 7, 7])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                      [onnx.numpy_helper.from_array(np.array([1], np.int64), "ax")])


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_with_ceil_mode_followed_by_other_ops(tmp_path, op):
    """grad (the run) and export_backward (no run: the exported model in a fresh onnxruntime session) give
    dL/dx of L = sum(sin(pool(x))): the pool's backward of cos(pool(x)), windows by hand in float64."""
    import onnxruntime as ort

    from onnxprobe import api

    onnx.save(_pool_sin_model(op), tmp_path / "m.onnx")
    x = RNG.permutation(49).reshape(1, 1, 7, 7).astype(np.float32) / 10  # distinct values: no max ties
    x64 = x.astype(np.float64)
    want = _oracle(op, x64, np.cos(_pool(op, x64)))
    res = api.grad(tmp_path / "m.onnx", api.Selection(all=True), inputs={"x": x}, save=True)
    np.testing.assert_allclose(res.arrays["x"], want, rtol=1e-5, atol=1e-5)
    api.export_backward(tmp_path / "m.onnx", tmp_path / "bw.onnx", selection=api.Selection(all=True))
    sess = ort.InferenceSession(str(tmp_path / "bw.onnx"), providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"x": x})))
    np.testing.assert_allclose(got["x_grad"], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_with_ceil_mode_exported_with_a_dynamic_batch(tmp_path, op):
    """The export keeps the batch dynamic (declared N) and pins only the sizes inference knows and gets
    wrong: the exported model runs a batch of 3 (the shapes were learned on a batch of 1). AveragePool's
    rule, which needs the spatial sizes only, refused ceil_mode with a dynamic batch ("needs static input
    and output shapes")."""
    import onnxruntime as ort

    from onnxprobe import api

    m = _pool_sin_model(op)
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    onnx.save(m, tmp_path / "m.onnx")
    api.export_backward(tmp_path / "m.onnx", tmp_path / "bw.onnx", selection=api.Selection(all=True))
    sess = ort.InferenceSession(str(tmp_path / "bw.onnx"), providers=["CPUExecutionProvider"])
    assert sess.get_inputs()[0].shape[0] == "N"
    x = RNG.permutation(3 * 49).reshape(3, 1, 7, 7).astype(np.float32) / 10
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"x": x})))["x_grad"]
    for i in range(3):
        xi = x[i:i + 1].astype(np.float64)
        np.testing.assert_allclose(got[i:i + 1], _oracle(op, xi, np.cos(_pool(op, xi))), rtol=1e-5, atol=1e-5)
