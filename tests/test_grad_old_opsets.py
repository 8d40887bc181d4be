"""Models at opset 6 and 7: the loss and the gradient rules emit ops those opsets do not have (Expand is
opset 8's) or that onnxruntime has no kernel of (an opset-6 Mul): the builder says which opset they need and
grad converts the model to opset 17 first, as for any rule that needs newer ops (it failed with 'unknown
op Expand'). Oracle: dL/dx of Clip(x) * w by hand in numpy float64 (dy w where lo < x < hi, else 0)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
RNG = np.random.default_rng(6)


@pytest.mark.parametrize("ir", [None, 0], ids=["ir-default", "ir-0"])
@pytest.mark.parametrize("opset", [6, 7])
@pytest.mark.parametrize("loss", ["sum", "output-grad"])
def test_grad_on_an_old_opset(tmp_path, opset, loss, ir):
    """(IR 0, which onnxruntime reads as one below 4 and layers runs: its conversion was onnx's C++ assertion, cut
    mid-sentence, 'Warning: onnx version converter is unable to parse input model. (The IR version of the ONNX
    model may')"""
    w = RNG.standard_normal((2, 3)).astype(np.float32)
    m = make_model([helper.make_node("Clip", ["x"], ["c"], min=-0.5, max=0.5), helper.make_node("Mul", ["c", "w"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [numpy_helper.from_array(w, "w")],
                   opset=opset)
    if ir is not None:
        m.ir_version = ir
    onnx.save(m, tmp_path / "m.onnx")
    x = np.array([[-0.9, -0.2, 0.1], [0.3, 0.7, -0.45]], np.float32)
    dy = RNG.standard_normal((2, 3)).astype(np.float32) if loss == "output-grad" else np.ones((2, 3), np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "dy.npy", dy)
    args = ["grad", str(tmp_path / "m.onnx"), "--input", f"x={tmp_path / 'x.npy'}", "--wrt", "x", "--wrt", "w",
            "--device", "cpu", "--save-grads", str(tmp_path / "g.npz")]
    args += ["--output-grad", str(tmp_path / "dy.npy")] if loss == "output-grad" else []
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    if opset == 6 or loss == "sum":  # sum: the seed broadcast is an Expand; opset 6: no onnxruntime kernels
        assert "converted to opset 17" in r.stderr
    got = np.load(tmp_path / "g.npz")
    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    np.testing.assert_allclose(got["x"], dy64 * w * ((x64 > -0.5) & (x64 < 0.5)), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got["w"], dy64 * np.clip(x64, -0.5, 0.5), rtol=1e-6, atol=1e-7)


def test_a_conversion_that_changes_the_inputs_shapes_is_refused_in_one_line(tmp_path):
    """Scan at opset 8 has a batch axis; onnx.version_converter's Scan 8 -> 9 drops it, so the opset-17 copy
    takes inputs of another rank ([1, 2] becomes [2]) and onnxruntime refused the copy with a shape error
    ('what fails is the graph onnxprobe built'). The conversion is refused, saying why (onnx's test_scan_sum)."""
    body = helper.make_graph([helper.make_node("Add", ["s", "x_t"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["y_t"])],
                             "body", [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2]),
                                      helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [2])],
                             [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2]),
                              helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [2])])
    m = make_model([helper.make_node("Scan", ["", "init", "x"], ["s_n", "ys"], body=body, num_scan_inputs=1)],
                   [helper.make_tensor_value_info("init", TensorProto.FLOAT, [1, 2]),
                    helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 2])],
                   [helper.make_tensor_value_info("s_n", TensorProto.FLOAT, [1, 2]),
                    helper.make_tensor_value_info("ys", TensorProto.FLOAT, [1, 3, 2])], opset=8, ir=3)
    onnx.save(m, tmp_path / "scan8.onnx")
    r = runner.invoke(app, ["grad", str(tmp_path / "scan8.onnx"), "--all"])
    assert r.exit_code == 1, r.output
    line = r.stderr.strip()
    assert "\n" not in line and "init" in line and "opset" in line and "onnxruntime" not in line, line


@pytest.mark.parametrize("opset", [10, 13])
def test_maxpool_at_opset_10_whose_equal_takes_no_floats(tmp_path, opset):
    """MaxPool's gradient compares windows with Equal, which takes floats from opset 11 on: at opset 10
    onnxruntime refused the backward graph ("Type 'tensor(float)' of input parameter ... of operator (Equal)
    ... is invalid"). The builder asks for the opset the op's types need, and grad converts the model.
    Oracle: dL/dx of sum(MaxPool(x)) is 1 at each window's maximum (distinct values, no ties)."""
    m = make_model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])], [], opset=opset)
    onnx.save(m, tmp_path / "m.onnx")
    x = RNG.permutation(16).astype(np.float32).reshape(1, 1, 4, 4)
    np.save(tmp_path / "x.npy", x)
    r = runner.invoke(app, ["grad", str(tmp_path / "m.onnx"), "--input", f"x={tmp_path / 'x.npy'}", "--wrt", "x",
                            "--device", "cpu", "--save-grads", str(tmp_path / "g.npz")])
    assert r.exit_code == 0, r.output
    want = np.zeros((4, 4))
    for i in range(0, 4, 2):
        for j in range(0, 4, 2):
            k = np.argmax(x[0, 0, i:i + 2, j:j + 2])
            want[i + k // 2, j + k % 2] = 1
    np.testing.assert_array_equal(np.load(tmp_path / "g.npz")["x"], want.reshape(1, 1, 4, 4))


def _pool_unsqueeze_opset9(tmp_path):
    """MaxPool's gradient needs opset 11 (Equal of floats): grad converts this opset-9 model, and the
    converter writes each Unsqueeze's axes as a Constant node before it, so the copy's nodes are numbered
    otherwise than the model's (unsq is node 1 here, node 2 in the copy)."""
    w = np.arange(4, dtype=np.float32).reshape(1, 1, 1, 2, 2) / 10
    m = make_model([helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
                    helper.make_node("Unsqueeze", ["p"], ["u"], axes=[0], name="unsq"),
                    helper.make_node("Mul", ["u", "w"], ["y"], name="mul")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1, 2, 2])],
                   [numpy_helper.from_array(w, "w")], opset=9, ir=4)
    onnx.save(m, tmp_path / "m9.onnx")
    return tmp_path / "m9.onnx"


def test_rows_of_a_converted_copy_keep_the_models_node_indices(tmp_path):
    """The rows' node index is the model's (as `inspect --nodes` and `layers` number it), not the converted
    copy's: unsq and mul read 2 and 3 where the model has them at 1 and 2."""
    import json

    r = runner.invoke(app, ["grad", str(_pool_unsqueeze_opset9(tmp_path)), "--all", "--json", "-"])
    assert r.exit_code == 0, r.output
    assert "converted to opset 17" in r.stderr
    rows = {g["tensor"]: (g["index"], g["node"]) for g in json.loads(r.stdout)["gradients"]}
    assert rows == {"x": (0, "pool"), "p": (0, "pool"), "u": (1, "unsq"), "w": (2, "mul"), "y": (2, "mul")}, rows


def test_range_of_a_converted_copy_is_the_models_node_range(tmp_path):
    """--all --range 0:1 is the model's nodes 0 and 1 (pool and unsq, and x, which pool reads: its gradient
    needs the conversion); on the copy it was pool and the Constant the converter wrote, and u was left out."""
    import json

    r = runner.invoke(app, ["grad", str(_pool_unsqueeze_opset9(tmp_path)), "--all", "--range", "0:1", "--json", "-"])
    assert r.exit_code == 0, r.output
    assert "converted to opset 17" in r.stderr
    assert {g["tensor"] for g in json.loads(r.stdout)["gradients"]} == {"x", "p", "u"}, r.stdout


@pytest.mark.parametrize("opset", [9, 10])
def test_gemm_before_opset_11_whose_c_is_required(tmp_path, opset):
    """Gemm takes C from opset 11 on only as optional: the backward graph's Gemms (dA, dB) have no C, and
    onnxruntime refused them at opset 7-10 ("has input size 2 not in range [min=3, max=3]"). The builder asks
    for the opset whose schema takes the inputs it gives, and grad converts the model.
    Oracle: y = x w + c, dL/dw = x^T dy, dL/dx = dy w^T, dL/dc = sum of dy over rows (numpy float64)."""
    w = RNG.standard_normal((3, 4)).astype(np.float32)
    c = RNG.standard_normal(4).astype(np.float32)
    m = make_model([helper.make_node("Gemm", ["x", "w", "c"], ["y"], name="fc")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                   [numpy_helper.from_array(w, "w"), numpy_helper.from_array(c, "c")], opset=opset, ir=4)
    onnx.save(m, tmp_path / "m.onnx")
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    dy = RNG.standard_normal((2, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "dy.npy", dy)
    r = runner.invoke(app, ["grad", str(tmp_path / "m.onnx"), "--input", f"x={tmp_path / 'x.npy'}", "--all",
                            "--output-grad", str(tmp_path / "dy.npy"), "--save-grads", str(tmp_path / "g.npz")])
    assert r.exit_code == 0, r.output
    got = np.load(tmp_path / "g.npz")
    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    np.testing.assert_allclose(got["w"], x64.T @ dy64, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["x"], dy64 @ w.T.astype(np.float64), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["c"], dy64.sum(0), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("opset", [7, 8])
def test_a_tensor_the_converter_renames_keeps_its_name(tmp_path, opset):
    """onnx.version_converter writes an opset-7/8 Upsample as a Resize whose output it renames ('u' became
    '_v_7', the Mul after it reading that): --all had no gradient of 'u', a tensor of the model, and the
    exported backward model named a tensor the model does not have. The copy's tensors keep the model's
    names. Oracle: y = u * w, u = nearest 2x upsampling of x: dL/du = w, dL/dx = w summed over 2x2 blocks."""
    w = RNG.standard_normal((1, 1, 4, 6)).astype(np.float32)
    m = make_model([helper.make_node("Upsample", ["x"], ["u"], mode="nearest", scales=[1.0, 1.0, 2.0, 2.0], name="up"),
                    helper.make_node("Mul", ["u", "w"], ["y"], name="mul")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 4, 6])], [numpy_helper.from_array(w, "w")],
                   opset=opset, ir=4)
    onnx.save(m, tmp_path / "m.onnx")
    r = runner.invoke(app, ["grad", str(tmp_path / "m.onnx"), "--all", "--save-grads", str(tmp_path / "g.npz"),
                            "--export", str(tmp_path / "bw.onnx")])
    assert r.exit_code == 0, r.output
    assert "converted to opset 17" in r.stderr
    got = np.load(tmp_path / "g.npz")
    assert sorted(got.files) == ["u", "w", "x", "y"], got.files
    np.testing.assert_allclose(got["u"], w, rtol=1e-6)
    np.testing.assert_allclose(got["x"], w.astype(np.float64).reshape(1, 1, 2, 2, 3, 2).sum(axis=(3, 5)), rtol=1e-6, atol=1e-6)
    bw = onnx.load(tmp_path / "bw.onnx")
    assert "u_grad" in {o.name for o in bw.graph.output}
    assert [list(n.input) for n in bw.graph.node if n.name == "mul"] == [["u", "w"]]
