"""`onnxprobe grad` through the CLI: the table, selection flags on backward tensors, --save-grads, --export
(checked by onnx.checker and run in plain onnxruntime), --check, the losses, and one clear line for each
kind of bad input."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model, sample_feeds, sample_path
from onnxprobe import api
from onnxprobe.cli.main import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def grad_json(*args) -> dict:
    r = invoke("grad", *args, "--device", "cpu", "--json", "-")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_table_shows_weight_and_activation_gradients():
    r = invoke("grad", sample_path("cnn"), "--device", "cpu")
    assert r.exit_code == 0, r.output
    out = r.stdout
    for name in ("conv1.weight", "conv1.bias", "bn1.scale", "fc.weight", "conv1_out", "logits"):
        assert name in out
    assert "|grad|" in out and "|g|/|t|" in out
    assert "13 gradients" in out and "0 with NaN/Inf" in out and "loss sum(logits)" in out


def test_json_rows_have_norm_ratio_and_statistics():
    d = grad_json(sample_path("mlp"))
    assert d["loss"]["kind"] == "sum" and d["loss"]["output"] == "y"
    row = next(r for r in d["gradients"] if r["tensor"] == "fc1.weight")
    assert row["kind"] == "weight" and row["gradient"] == "fc1.weight_grad"
    assert {"norm", "ratio", "value_norm", "min", "max", "mean", "std", "nan", "inf"} <= row.keys()
    w = numpy_helper.to_array(next(i for i in onnx.load(sample_path("mlp")).graph.initializer if i.name == "fc1.weight"))
    assert row["value_norm"] == pytest.approx(float(np.linalg.norm(w)), rel=1e-6)
    assert row["ratio"] == pytest.approx(row["norm"] / row["value_norm"])
    assert d["graph"]["backward_nodes"] > 0


def test_op_selection_picks_conv_outputs_and_conv_weights():
    d = grad_json(sample_path("cnn"), "--op", "Conv")
    names = {r["tensor"] for r in d["gradients"]}
    assert names == {"conv1.weight", "conv1.bias", "conv1_out", "conv2.weight", "conv2.bias", "conv2_out"}
    d = grad_json(sample_path("cnn"), "--name", "fc*")
    assert {r["tensor"] for r in d["gradients"]} == {"fc.weight", "fc.bias", "logits"}


def test_wrt_limits_the_gradients_and_accepts_inputs():
    d = grad_json(sample_path("mlp"), "--wrt", "fc1.*", "--wrt", "x")
    assert {r["tensor"]: r["kind"] for r in d["gradients"]} == {"fc1.weight": "weight", "fc1.bias": "weight", "x": "input"}


def test_save_grads_keys_are_forward_names_and_match_the_export(tmp_path):
    npz, exported = tmp_path / "g.npz", tmp_path / "bw.onnx"
    x = tmp_path / "x.npy"
    feed = sample_feeds("mlp")
    np.save(x, feed["x"])
    r = invoke("grad", sample_path("mlp"), "--device", "cpu", "--input", f"x={x}", "--save-grads", npz, "--export", exported)
    assert r.exit_code == 0, r.output
    with np.load(npz) as z:
        grads = {k: z[k] for k in z.files}
    assert {"fc1.weight", "fc1.bias", "fc2.weight", "fc3.weight", "y"} <= set(grads)
    m = onnx.load(exported)
    onnx.checker.check_model(m, full_check=True)
    assert [o.name for o in m.graph.output][0] == "loss"
    assert {i.name for i in m.graph.initializer} >= {"fc1.weight", "fc2.weight"}  # weights stay initializers
    s = ort.InferenceSession(exported.read_bytes(), providers=["CPUExecutionProvider"])
    outs = dict(zip([o.name for o in s.get_outputs()], s.run(None, feed)))
    for k, v in grads.items():
        np.testing.assert_allclose(outs[f"{k}_grad"], v, rtol=1e-5, atol=1e-6)
    w = {i.name: numpy_helper.to_array(i) for i in onnx.load(sample_path("mlp")).graph.initializer}
    # y = sigmoid(...): d sum(y) / d fc3.bias = sum over the batch of y (1 - y)
    y = ort.InferenceSession(str(sample_path("mlp")), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    assert w  # the model really has weights
    np.testing.assert_allclose(grads["y"], np.ones_like(y))


def test_export_keeps_dynamic_dimensions(tmp_path):
    out = tmp_path / "bw.onnx"
    r = invoke("grad", sample_path("dynamic_batch"), "--device", "cpu", "--export", out)
    assert r.exit_code == 0, r.output
    onnx.checker.check_model(onnx.load(out), full_check=True)
    s = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for batch in (1, 3):
        res = dict(zip([o.name for o in s.get_outputs()], s.run(None, {"x": rng.random((batch, 3, 8, 8), dtype=np.float32)})))
        assert res["loss"].shape == ()
        assert all(np.isfinite(v).all() for v in res.values())


def test_export_with_output_grad_input_runs_and_equals_the_vjp(tmp_path):
    out, dyf = tmp_path / "bw.onnx", tmp_path / "dy.npy"
    dy = np.random.default_rng(1).standard_normal((1, 10)).astype(np.float32)
    np.save(dyf, dy)
    r = invoke("grad", sample_path("cnn"), "--device", "cpu", "--output-grad", dyf, "--export", out, "--wrt", "fc.bias")
    assert r.exit_code == 0, r.output
    s = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert [i.name for i in s.get_inputs()] == ["image", "output_grad"]
    res = dict(zip([o.name for o in s.get_outputs()], s.run(None, {**sample_feeds("cnn"), "output_grad": dy})))
    np.testing.assert_allclose(res["fc.bias_grad"], dy[0], rtol=1e-6)  # logits = ... + fc.bias


def test_a_cross_entropy_export_runs_in_onnx_reference(tmp_path):
    """The exported cross-entropy backward graph runs in onnx.reference.ReferenceEvaluator, not only in
    onnxruntime (its OneHot took a rank-1 depth, which the reference's OneHot refuses), and both agree; the
    loss is numpy's -log softmax(logits)[label]."""
    from onnx.reference import ReferenceEvaluator

    out, lab = tmp_path / "bw.onnx", tmp_path / "labels.npy"
    labels = np.array([3], np.int64)
    np.save(lab, labels)
    r = invoke("grad", sample_path("cnn"), "--device", "cpu", "--loss", "cross-entropy", "--labels", lab, "--export", out)
    assert r.exit_code == 0, r.output
    feed = {**sample_feeds("cnn"), "labels": labels}
    names = [o.name for o in onnx.load(out).graph.output]
    ref = dict(zip(names, ReferenceEvaluator(str(out)).run(None, feed)))
    got = dict(zip(names, ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, feed)))
    assert len(names) > 10 and ref.keys() == got.keys()
    for k in names:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=1e-6, err_msg=k)
    z = ort.InferenceSession(str(sample_path("cnn")), providers=["CPUExecutionProvider"]).run(None, sample_feeds("cnn"))[0]
    z = z.astype(np.float64)[0]
    assert float(ref["loss"]) == pytest.approx(np.log(np.exp(z - z.max()).sum()) + z.max() - z[3], rel=1e-5)


@pytest.mark.parametrize("model,precision", [("mlp", "float64"), ("cnn", "float32"), ("transformer_block", "float32")])
def test_check_passes_on_the_sample_models(model, precision):
    d = grad_json(sample_path(model), "--check", "--all")
    assert d["check"] == precision
    # the key projection's bias adds q.b to every score of a query, which the Softmax cancels: its exact
    # gradient is 0, and the loss's change along it stays below float32 rounding at every step: no verdict
    zero = [r for r in d["gradients"] if r["tensor"].endswith("k_proj.bias")]
    assert all(r["check"]["ok"] is None and "rounding" in r["check"]["unresolved"] for r in zero), zero
    rows = [r for r in d["gradients"] if r not in zero]
    assert all(r["check"]["ok"] for r in rows), [r for r in rows if not r["check"]["ok"]]
    tol = 1e-6 if precision == "float64" else 5e-2
    assert max(r["check"]["error"] for r in rows) <= tol


def test_losses_mse_and_cross_entropy(tmp_path):
    feed = sample_feeds("mlp")
    y = ort.InferenceSession(str(sample_path("mlp")), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    x, t, lab = tmp_path / "x.npy", tmp_path / "t.npy", tmp_path / "l.npy"
    np.save(x, feed["x"])
    np.save(t, np.zeros_like(y))
    np.save(lab, np.array([0, 3, 7, 1], np.int64))
    d = grad_json(sample_path("mlp"), "--input", f"x={x}", "--loss", "mse", "--target", t, "--wrt", "y")
    assert d["loss"]["value"] == pytest.approx(float(np.mean(y.astype(np.float64) ** 2)), rel=1e-5)
    d = grad_json(sample_path("mlp"), "--input", f"x={x}", "--loss", "cross-entropy", "--labels", lab, "--wrt", "y")
    ls = y - np.log(np.exp(y).sum(axis=1, keepdims=True))
    assert d["loss"]["value"] == pytest.approx(float(-ls[np.arange(4), [0, 3, 7, 1]].mean()), rel=1e-5)
    d = grad_json(sample_path("mlp"), "--loss", "mean", "--wrt", "y")
    assert d["gradients"][0]["mean"] == pytest.approx(1 / y.size)


def test_labels_target_and_output_grad_must_fit_the_outputs_shape_for_this_run(tmp_path):
    """The output is declared [n, 4]; for one input row it is [1, 4]. Two labels (or a [2, 4] target or output
    gradient) used to broadcast into a loss nobody asked for (or fail inside onnxruntime): they are a usage
    error naming the flag and both shapes; one label gives numpy's cross-entropy."""
    w = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])], [numpy_helper.from_array(w, "w")])
    path, x = tmp_path / "m.onnx", tmp_path / "x.npy"
    onnx.save(m, path)
    xv = np.random.default_rng(3).standard_normal((1, 3)).astype(np.float32)
    np.save(x, xv)
    files = {name: tmp_path / f"{name}.npy" for name in ("two_labels", "one_label", "two_rows")}
    np.save(files["two_labels"], np.array([1, 2], np.int64))
    np.save(files["one_label"], np.array([2], np.int64))
    np.save(files["two_rows"], np.zeros((2, 4), np.float32))
    for flags, needle in [(["--loss", "cross-entropy", "--labels", files["two_labels"]], "--labels: shape [2]"),
                          (["--loss", "mse", "--target", files["two_rows"]], "--target: shape [2, 4], but output 'y' has shape [1, 4]"),
                          (["--output-grad", files["two_rows"]], "--output-grad: shape [2, 4], but output 'y' has shape [1, 4]")]:
        r = invoke("grad", path, "--input", f"x={x}", *flags)
        assert r.exit_code == 2 and needle in r.stderr and "Traceback" not in r.output, r.output
    d = grad_json(path, "--input", f"x={x}", "--loss", "cross-entropy", "--labels", files["one_label"])
    y = xv.astype(np.float64) @ w.astype(np.float64)
    assert d["loss"]["value"] == pytest.approx(float(np.log(np.exp(y).sum()) - y[0, 2]), rel=1e-5)


def test_softmax_output_with_sum_loss_gets_a_note():
    m = make_model([helper.make_node("Softmax", ["x"], ["y"], name="sm")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = api.Model(m, m, "mem")
    gp = api.grad_plan(model, api.GradSpec(wrt=("x",)))
    assert any("Softmax" in w and "constant" in w for w in gp.warnings)


# -- errors: one line, exit 2 for usage and 1 for the model -------------------------------------------

def _one_line_error(r, code):
    assert r.exit_code == code, r.output
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("onnxprobe: error: "), r.stderr
    assert "Traceback" not in r.output
    return err[0]


def test_unknown_output_is_a_usage_error():
    msg = _one_line_error(invoke("grad", sample_path("mlp"), "--loss-output", "nope", "--device", "cpu"), 2)
    assert "'nope'" in msg and "y" in msg


def test_wrong_target_shape_is_a_usage_error(tmp_path):
    t = tmp_path / "t.npy"
    np.save(t, np.zeros((4, 7), np.float32))
    msg = _one_line_error(invoke("grad", sample_path("mlp"), "--loss", "mse", "--target", t, "--device", "cpu"), 2)
    assert "--target" in msg and "[4, 7]" in msg


def test_flags_that_do_not_go_together(tmp_path):
    t = tmp_path / "t.npy"
    np.save(t, np.zeros((4, 8), np.float32))
    _one_line_error(invoke("grad", sample_path("mlp"), "--target", t, "--device", "cpu"), 2)
    _one_line_error(invoke("grad", sample_path("mlp"), "--loss", "mse", "--device", "cpu"), 2)
    _one_line_error(invoke("grad", sample_path("mlp"), "--loss", "hinge", "--device", "cpu"), 2)
    _one_line_error(invoke("grad", sample_path("mlp"), "--wrt", "nothing*", "--device", "cpu"), 2)


def test_op_without_a_rule_names_the_op_and_the_node(tmp_path):
    rois = numpy_helper.from_array(np.array([[0, 0, 0, 3, 3]], np.float32), "rois")
    m = make_model([helper.make_node("MaxRoiPool", ["x", "rois"], ["c"], name="unit_rows", pooled_shape=[2, 2]),
                    helper.make_node("Relu", ["c"], ["y"], name="relu")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])], [rois])
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    msg = _one_line_error(invoke("grad", p, "--wrt", "x", "--device", "cpu"), 1)
    assert "MaxRoiPool" in msg and "unit_rows" in msg and "gradient rules for" in msg and "…" not in msg
    # a gradient that does not pass through it is fine
    r = invoke("grad", p, "--wrt", "c", "--device", "cpu")
    assert r.exit_code == 0, r.output


def test_no_rule_needed_off_the_path():
    """Ops that no requested gradient passes through need no rule (pruning)."""
    m = make_model([helper.make_node("MaxRoiPool", ["x", "rois"], ["side"], name="side", pooled_shape=[2, 2]),
                    helper.make_node("Mul", ["x", "w"], ["y"], name="mul")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 4, 4]),
                    helper.make_tensor_value_info("side", TensorProto.FLOAT, [1, 1, 2, 2])],
                   [numpy_helper.from_array(np.ones((1, 1, 4, 4), np.float32), "w"),
                    numpy_helper.from_array(np.array([[0, 0, 0, 3, 3]], np.float32), "rois")])
    model = api.Model(m, m, "mem")
    gp = api.grad_plan(model, api.GradSpec(output="y", wrt=("x", "w")))
    ops = [n.op_type for n in gp.backward.model.graph.node]
    assert "MaxRoiPool" not in ops  # pruned: the loss does not need it


def test_readme_python_example(tmp_path):
    """The README's Python example, on the mlp sample."""
    model = api.load(sample_path("mlp"))
    labels = np.array([0, 3, 7, 1], np.int64)
    spec = api.GradSpec(loss="cross-entropy", labels=labels)
    result = api.grad(sample_path("mlp"), api.Selection(ops=("Gemm",)), api.RunConfig(device="cpu"), spec, save=True)
    assert {row.name for row in result.rows} == {"fc1.weight", "fc1.bias", "fc1_out", "fc2.weight", "fc2.bias", "fc2_out"}
    for row in result.rows:
        assert row.norm > 0 and row.ratio > 0 and row.stats.nan == 0
    gp = api.export_backward(model, tmp_path / "model_bw.onnx", spec)
    s = ort.InferenceSession(str(tmp_path / "model_bw.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in s.get_inputs()] == ["x", gp.loss.input]


def test_check_on_an_infinite_gradient_fails_in_one_line_without_numpy_warnings(tmp_path):
    """sqrt at 0 has an infinite derivative: the finite differences along it are inf / NaN, the row fails,
    the command says so in one line, and numpy's RuntimeWarnings stay out of stderr."""
    import subprocess
    import sys

    m = make_model([helper.make_node("Sqrt", ["x"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    onnx.save(m, tmp_path / "sqrt.onnx")
    np.save(tmp_path / "x.npy", np.array([[0, 1, 4], [9, 16, 25]], np.float32))
    p = subprocess.run([sys.executable, "-m", "onnxprobe", "grad", str(tmp_path / "sqrt.onnx"), "--device", "cpu",
                        "--input", f"x={tmp_path / 'x.npy'}", "--wrt", "x", "--check"], capture_output=True, text=True)
    assert "Warning" not in p.stderr, p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("onnxprobe: error")]
    assert p.returncode != 0 and len(errors) == 1, (p.returncode, p.stderr)


def test_opset9_model_is_converted_for_its_gradients(tmp_path):
    """A zoo-era opset-9 CNN: the unit-stride Conv's input gradient needs Slice with steps (opset 10) and the
    overlapping MaxPool's windows strided Slices, so the gradients are computed on a copy converted to opset
    17, with a note; the file is untouched, the export is opset 17, and --check (central finite
    differences) passes on every gradient."""
    from conftest import sha256

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32), "w")
    b = numpy_helper.from_array((rng.standard_normal(4) * 0.1).astype(np.float32), "b")
    m = make_model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
                    helper.make_node("Relu", ["c"], ["r0"]),
                    helper.make_node("Dropout", ["r0"], ["r", "mask"]),  # its mask is float at opset 9, bool from 12
                    helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                    helper.make_node("AveragePool", ["p"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 2, 2])], [w, b], opset=9, ir=4)
    path = tmp_path / "old.onnx"
    onnx.save(m, path)
    before = sha256(path)
    out = tmp_path / "bw.onnx"
    r = invoke("grad", path, "--device", "cpu", "--check", "--export", out)
    assert r.exit_code == 0, r.output
    assert "converted to opset 17" in r.output
    assert sha256(path) == before
    exported = onnx.load(out)
    assert [o.version for o in exported.opset_import if o.domain in ("", "ai.onnx")] == [17]
    onnx.checker.check_model(exported, full_check=True)  # the opset-9 mask type was carried over: refused by both
    ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    d = grad_json(path, "--check")
    assert d["gradients"] and all(row["check"]["ok"] for row in d["gradients"]), d["gradients"]
    assert {"w", "b", "c", "y"} <= {row["tensor"] for row in d["gradients"]}


def test_export_with_unnamed_dims_at_opset_11(tmp_path):
    """Opset 11 (Squeeze and ReduceSum take attributes) with an unnamed batch dimension: the activation
    gradient dL/dr and r both have shape (?, 4), so no reduction is needed (the PP-OCR classifier's export
    once failed on an empty Squeeze here); the export runs, and dW = relu(x)^T dy, dr = dy W^T (numpy)."""
    rng = np.random.default_rng(2)
    w = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b")
    m = make_model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("MatMul", ["r", "w"], ["xw"]),
                    helper.make_node("Add", ["xw", "b"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 3])], [w, b], opset=11)
    onnx.save(m, tmp_path / "mm.onnx")
    out = tmp_path / "bw.onnx"
    r = invoke("grad", tmp_path / "mm.onnx", "--device", "cpu", "--all", "--export", out)
    assert r.exit_code == 0, r.output
    s = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    x = rng.standard_normal((5, 4)).astype(np.float32)
    res = dict(zip([o.name for o in s.get_outputs()], s.run(None, {"x": x})))
    relu = np.maximum(x, 0)
    np.testing.assert_allclose(res["w_grad"], relu.T @ np.ones((5, 3), np.float32), rtol=1e-5)
    np.testing.assert_allclose(res["r_grad"], np.ones((5, 3), np.float32) @ numpy_helper.to_array(w).T, rtol=1e-5)
    np.testing.assert_allclose(res["b_grad"], np.full(3, 5.0, np.float32), rtol=1e-6)


def test_rows_show_the_shapes_of_the_run(tmp_path):
    """A gradient whose shape the graph leaves symbolic (a batch dimension, here also a Reshape to a size
    computed at run time) is shown with the run's shape, as its count says (it was '?x4')."""
    w = numpy_helper.from_array(np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32), "w")
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                    helper.make_node("Shape", ["x"], ["s"], name="shape"),
                    helper.make_node("Reshape", ["h", "s"], ["y"], name="reshape")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    p = tmp_path / "dyn.onnx"
    onnx.save(m, p)
    d = grad_json(p, "--shape", "x=3x4", "--all")
    rows = {g["tensor"]: g for g in d["gradients"]}
    assert rows["h"]["shape"] == [3, 4] and rows["h"]["count"] == 12
    assert rows["w"]["shape"] == [4, 4]
    assert all(g["shape"] is not None and None not in g["shape"] for g in d["gradients"])


@pytest.mark.parametrize("wrt, loss_output", [("x", "y"), ("init", "y"), ("x", "z")])
def test_a_scan_whose_backward_reads_no_step_value(wrt, loss_output):
    """Scan with s_{t+1} = s_t + x_t: the backward pass reads no step's value, yet runs once per step
    (it had no scan input to count the steps by, an internal error). The loss sum(y) of the final state
    y = init + Σ_t x_t has gradient 1 for every element of x and of init, by hand; sum(z) of the scan
    output z_t = init + x_0 + ... + x_t gives x_t the gradient T - t (and init T)."""
    v = (lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s))
    body = helper.make_graph([helper.make_node("Add", ["s_in", "xt"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["zt"])],
                             "body", [v("s_in", [2]), v("xt", [2])], [v("s_out", [2]), v("zt", [2])])
    m = make_model([helper.make_node("Scan", ["init", "x"], ["y", "z"], body=body, num_scan_inputs=1)],
                   [v("init", [2]), v("x", [3, 2])], [v("y", [2]), v("z", [3, 2])], [], opset=17)
    feeds = {"init": np.array([0.5, -1.0], np.float32), "x": np.arange(6, dtype=np.float32).reshape(3, 2)}
    res = api.grad(api.Model(m, m, "mem"), api.Selection(names=(wrt,)), api.RunConfig(device="cpu"),
                   api.GradSpec(output=loss_output, wrt=(wrt,)), inputs=api.InputSpec(arrays=feeds), save=True)
    steps = 3
    if loss_output == "y":
        want = np.ones_like(feeds[wrt])
    else:
        want = np.full(2, float(steps), np.float32) if wrt == "init" else np.repeat(np.arange(steps, 0, -1.0), 2).reshape(3, 2)
    np.testing.assert_allclose(res.arrays[wrt], want, rtol=1e-6)


@pytest.mark.parametrize("dims", [[], [1], [1, 1]])
def test_a_single_value_weight_named_in_wrt(dims):
    """A learnable scalar (a temperature, a one-slope PRelu) is a float initializer of one value: --wrt by
    its exact name gives its gradient (it had been "no float weight ... matches it"); d sum(x * s) / ds =
    sum(x), by hand; a glob that matches its name names it as well (it matched nothing: tests/
    test_grad_clip_bounds.py). The default selection still leaves single values out (epsilons)."""
    v = (lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]))
    m = make_model([helper.make_node("Mul", ["x", "s"], ["y"])], [v("x")], [v("y")],
                   [numpy_helper.from_array(np.full(dims, 2.5, np.float32), "s")])
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 1.5
    res = api.grad(api.Model(m, m, "mem"), None, api.RunConfig(device="cpu"), api.GradSpec(output="y", wrt=("s",)),
                   inputs=api.InputSpec(arrays={"x": x}), save=True, check=True)
    assert [r.name for r in res.rows] == ["s"] and res.rows[0].check["ok"]
    np.testing.assert_allclose(np.asarray(res.arrays["s"]).reshape(-1), [x.sum()], rtol=1e-6)
    res = api.grad(api.Model(m, m, "mem"), None, api.RunConfig(device="cpu"), api.GradSpec(output="y", wrt=("s*",)),
                   inputs=api.InputSpec(arrays={"x": x}), save=True)
    np.testing.assert_allclose(np.asarray(res.arrays["s"]).reshape(-1), [x.sum()], rtol=1e-6)
    res = api.grad(api.Model(m, m, "mem"), None, api.RunConfig(device="cpu"), api.GradSpec(output="y"),
                   inputs=api.InputSpec(arrays={"x": x}), save=True)
    assert "s" not in res.arrays


def test_the_api_says_what_the_command_says_of_body_tensors_and_checks(tmp_path):
    """api.grad (and grad_dataset) note the selected tensors inside If/Loop/Scan bodies that get no row,
    as the command does (only the command said it), and a result tells how many gradients its check
    compared and which failed (the command's exit status came from rows it read itself)."""
    import numpy as np

    from conftest import sample_path
    from onnxprobe import api

    spec = api.InputSpec(files={"n": 3, "cond": True})
    r = api.grad(sample_path("control_flow"), api.Selection(all=True), None, None, spec)
    (note,) = [n for n in r.notes if "inside If/Loop/Scan bodies" in n]
    assert "else_out" in note and "then_out" in note
    d = tmp_path / "ds"
    d.mkdir()
    for k in range(2):
        np.savez(d / f"s{k}.npz", x=np.full((2, 4), 0.5 + k, np.float32), n=np.array(3, np.int64), cond=np.array(True))
    rd = api.grad_dataset(sample_path("control_flow"), d, api.Selection(all=True))
    assert any("inside If/Loop/Scan bodies" in n for n in rd.notes)
    c = api.grad(sample_path("cnn"), check=True)
    # the loss's own input is compared but not counted: its gradient is the loss's formula (test_grad_check_loss_input)
    assert c.checked == sum(1 for row in c.rows if row.check is not None and row.name != c.plan.loss.output) > 0
    assert c.failed_checks == []


def test_check_with_a_nan_loss_says_it_could_not_check(tmp_path):
    """A NaN in the input makes the loss NaN: every finite difference is NaN, and the check reported
    "10 failed"; it says it could not check (a note), and exits 1 as a check that compared nothing."""
    import numpy as np
    from typer.testing import CliRunner

    from conftest import sample_path
    from onnxprobe.cli.main import app

    x = np.random.default_rng(0).random((4, 16)).astype(np.float32)
    x[0, 0] = np.nan
    np.save(tmp_path / "x.npy", x)
    r = CliRunner().invoke(app, ["grad", str(sample_path("mlp")), "--check", "--input", f"x={tmp_path / 'x.npy'}"])
    assert r.exit_code == 1 and "cannot check the gradients" in r.stderr and "checked nothing" in r.stderr, r.output
    assert "failed the finite-difference check" not in r.stderr


def test_check_of_an_empty_gradient_is_no_pass(tmp_path):
    """--wrt e of a 2x0 input: --check said "1 ok" (error 0.0, numpy's mean-of-empty warning on stderr) and
    exited 0, having compared nothing. An empty gradient is not checked, said in a note; a check that
    checked nothing is an error; beside a checked one the footer counts it apart."""
    m = make_model([helper.make_node("Concat", ["x", "e"], ["y"], axis=1)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]), helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 0])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    onnx.save(m, tmp_path / "e.onnx")
    np.savez(tmp_path / "e.npz", x=np.ones((2, 3), np.float32), e=np.zeros((2, 0), np.float32))
    r = invoke("grad", tmp_path / "e.onnx", "--inputs", tmp_path / "e.npz", "--wrt", "e", "--check")
    assert r.exit_code == 1 and "checked nothing" in r.stderr and "Warning" not in r.stderr, r.output
    assert "not checked: 1 empty gradient" in r.stderr and "0 ok" in r.stdout
    r = invoke("grad", tmp_path / "e.onnx", "--inputs", tmp_path / "e.npz", "--wrt", "e", "--wrt", "x", "--check")
    assert r.exit_code == 0 and "1 ok, 0 failed, 1 not checked" in r.stdout, r.output
    d = json.loads(invoke("grad", tmp_path / "e.onnx", "--inputs", tmp_path / "e.npz", "--wrt", "e", "--wrt", "x", "--check",
                          "--json", "-").stdout)
    assert {g["tensor"]: g.get("check") is None for g in d["gradients"]} == {"e": True, "x": False}


def test_the_export_of_a_model_with_an_if_names_its_gradients_plainly(tmp_path):
    """The backward If's branches took the names x_grad, Wa_grad, s_grad for their own tensors, so the
    exported model's outputs were x_grad.2, Wa_grad.1, s_grad.1 (the README promises <tensor>_grad): a
    body's gradients are named apart, and each output is what onnxruntime computes for it."""
    rng = np.random.default_rng(0)
    then_g = helper.make_graph([helper.make_node("MatMul", ["x", "Wa"], ["t1"]), helper.make_node("Tanh", ["t1"], ["tout"])],
                               "then", [], [helper.make_tensor_value_info("tout", TensorProto.FLOAT, None)])
    else_g = helper.make_graph([helper.make_node("Mul", ["x", "s"], ["e1"]), helper.make_node("Sin", ["e1"], ["eout"])],
                               "else", [], [helper.make_tensor_value_info("eout", TensorProto.FLOAT, None)])
    m = make_model([helper.make_node("If", ["c"], ["o"], then_branch=then_g, else_branch=else_g),
                    helper.make_node("Mul", ["o", "o"], ["y"])],
                   [helper.make_tensor_value_info("c", TensorProto.BOOL, []), helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                   [numpy_helper.from_array(rng.standard_normal((3, 3)).astype(np.float32), "Wa"),
                    numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "s")])
    onnx.save(m, tmp_path / "if.onnx")
    x = rng.standard_normal((2, 3)).astype(np.float32)
    np.savez(tmp_path / "in.npz", c=np.array(True), x=x)
    out = tmp_path / "bw.onnx"
    r = invoke("grad", tmp_path / "if.onnx", "--inputs", tmp_path / "in.npz", "--wrt", "x", "--wrt", "Wa", "--wrt", "s",
               "--export", out)
    assert r.exit_code == 0, r.output
    names = [o.name for o in onnx.load(out).graph.output]
    assert sorted(names) == ["Wa_grad", "loss", "s_grad", "x_grad"], names
    got = dict(zip(names, ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"c": np.array(True), "x": x})))
    w = numpy_helper.to_array(m.graph.initializer[0]).astype(np.float64)
    t = np.tanh(x.astype(np.float64) @ w)
    dy_dt1 = 2 * t * (1 - t * t)  # loss = sum(tanh(x W)^2)
    np.testing.assert_allclose(got["x_grad"], dy_dt1 @ w.T, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got["Wa_grad"], x.astype(np.float64).T @ dy_dt1, rtol=1e-4, atol=1e-6)


def _pad_by(value: str) -> onnx.ModelProto:
    """Pad(x, [1, 1], value): the constant value gets no gradient, by design (no rule for input 2)."""
    return make_model([helper.make_node("Constant", [], ["pads"], value=numpy_helper.from_array(np.array([1, 1], np.int64))),
                       helper.make_node("Pad", ["x", "pads", value], ["y"], name="pad")],
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])],
                      [numpy_helper.from_array(np.array(0.5, np.float32), "v")] if value == "v" else [])


def test_an_input_without_a_rule_asked_for_is_said_to_have_no_rule_not_no_dependence(tmp_path):
    """--wrt lo of Clip(x, lo, hi) said "the loss does not depend on" lo, which it does, and exited 0 with 0
    gradients. The note names the op whose rule gives that input no gradient (Pad's constant value, now that
    Clip's bounds get torch.clamp's gradient: tests/test_grad_clip_bounds.py); nothing asked for getting a
    gradient is an error."""
    onnx.save(_pad_by("v"), tmp_path / "pad.onnx")
    r = invoke("grad", tmp_path / "pad.onnx", "--wrt", "v")
    assert r.exit_code == 1 and "does not depend" not in r.stderr, r.output
    assert "Pad 'pad' (input 2)" in r.stderr and "none of the tensors --wrt asks for gets a gradient" in r.stderr
    r = invoke("grad", tmp_path / "pad.onnx", "--wrt", "v", "--wrt", "x")
    assert r.exit_code == 0 and "Pad 'pad' (input 2)" in r.stderr, r.output
    m = make_model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                   [numpy_helper.from_array(np.array(-0.5, np.float32), "lo"), numpy_helper.from_array(np.array(0.5, np.float32), "hi")])
    onnx.save(m, tmp_path / "clip.onnx")
    r = invoke("grad", tmp_path / "clip.onnx", "--wrt", "lo")
    assert r.exit_code == 0 and "no gradient rule" not in r.stderr, r.output


def test_gradients_through_a_scatter_add_in_a_float16_model(tmp_path):
    """MaxPool, Gather and reflect Pad's gradients scatter-add, which onnxruntime's CPU kernels do not do in
    float16: grad of a float16 MaxPool failed, and the message said the model itself failed on its inputs.
    The scatter runs in float32 and casts back; the gradient is the window count of each maximum (numpy)."""
    m = make_model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 1, 4, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 1, 3, 3])])
    onnx.save(m, tmp_path / "mp16.onnx")
    x = np.random.default_rng(0).permutation(16).reshape(1, 1, 4, 4).astype(np.float16)  # no ties
    np.save(tmp_path / "x.npy", x)
    r = invoke("grad", tmp_path / "mp16.onnx", "--wrt", "x", "--input", f"x={tmp_path / 'x.npy'}",
               "--save-grads", tmp_path / "g.npz")
    assert r.exit_code == 0, r.output
    want = np.zeros((4, 4))
    for i in range(3):
        for j in range(3):
            w = x[0, 0, i:i + 2, j:j + 2]
            a, b = np.unravel_index(np.argmax(w), w.shape)
            want[i + a, j + b] += 1
    got = np.load(tmp_path / "g.npz")["x"]
    assert got.dtype == np.float16 and np.array_equal(got[0, 0].astype(np.float64), want)


@pytest.mark.parametrize("loss,value,dx", [("sum", 80000, 2.0), ("mean", 2, 2 / 40000), ("mse", 4, 2 * 2 * 2 / 40000)])
def test_a_float16_loss_is_accumulated_past_float16s_range(tmp_path, loss, value, dx):
    """y = x * W in float16, x 40000 ones, W = 2: sum(y) = 80000 is over float16's largest (65504) and read
    inf while every gradient was finite; the loss is accumulated in float32, and the gradients (dL/dx = W,
    W / N, 2 (y - 0) W / N; dL/dW = sum of dL/dy x) stay float16 and right."""
    m = make_model([helper.make_node("Mul", ["x", "W"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 40000])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 40000])],
                   [numpy_helper.from_array(np.array([2], np.float16), "W")])
    onnx.save(m, tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.ones((1, 40000), np.float16))
    np.save(tmp_path / "t.npy", np.zeros((1, 40000), np.float16))
    extra = ["--target", tmp_path / "t.npy"] if loss == "mse" else []
    d = grad_json(tmp_path / "m.onnx", "--input", f"x={tmp_path / 'x.npy'}", "--loss", loss, *extra, "--wrt", "x",
                  "--wrt", "W", "--save-grads", tmp_path / "g.npz")
    assert d["loss"]["value"] == pytest.approx(value, rel=1e-6)
    g = np.load(tmp_path / "g.npz")
    assert g["x"].dtype == np.float16 and g["W"].dtype == np.float16
    # 1e-4 and 5e-5 are subnormal in float16: within its subnormals' spacing (6e-8)
    np.testing.assert_allclose(g["x"].astype(np.float64), dx, rtol=1e-3, atol=float(np.finfo(np.float16).smallest_subnormal))
    np.testing.assert_allclose(g["W"].astype(np.float64), [dx / 2 * 40000], rtol=1e-3)


def test_cross_entropy_of_one_sample_with_a_scalar_label(tmp_path):
    """An output of shape [C] and a scalar class index: the label passed the checks, then onnxprobe's own
    loss graph failed (the rank of its one-hot unknown). The loss and dL/dW are numpy's."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 5)).astype(np.float32)
    m = make_model([helper.make_node("MatMul", ["x", "W"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5])], [numpy_helper.from_array(w, "W")])
    onnx.save(m, tmp_path / "m.onnx")
    x = rng.standard_normal(3).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "l.npy", np.array(3))
    d = grad_json(tmp_path / "m.onnx", "--loss", "cross-entropy", "--labels", tmp_path / "l.npy", "--input", f"x={tmp_path / 'x.npy'}",
                  "--wrt", "W")
    y = x.astype(np.float64) @ w
    p = np.exp(y - y.max()) / np.exp(y - y.max()).sum()
    assert d["loss"]["value"] == pytest.approx(-np.log(p[3]), rel=1e-5)
    (row,) = d["gradients"]
    assert row["norm"] == pytest.approx(np.linalg.norm(np.outer(x, p - np.eye(5)[3])), rel=1e-5)


def test_a_note_is_said_once_with_export(tmp_path):
    """grad --export printed the export's notes, then the run's, which are the same: each twice."""
    m = make_model([helper.make_node("Relu", ["x"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]), helper.make_tensor_value_info("z", TensorProto.FLOAT, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    onnx.save(m, tmp_path / "u.onnx")
    r = invoke("grad", tmp_path / "u.onnx", "--wrt", "x", "--wrt", "z", "--export", tmp_path / "bw.onnx")
    assert r.exit_code == 0 and r.stderr.count("does not depend on") == 1, r.stderr


def test_a_tensor_upstream_of_an_input_without_a_rule_is_said_to_stop_there(tmp_path):
    """v = v_in * v_in, then Pad(x, pads, v): --wrt v_in read "the loss does not depend on" v_in (a Clip
    bound's, until Clip's bounds got their gradient)."""
    m = _pad_by("v")
    m.graph.node.insert(0, helper.make_node("Mul", ["v_in", "v_in"], ["v"]))
    m.graph.input.append(helper.make_tensor_value_info("v_in", TensorProto.FLOAT, []))
    del m.graph.initializer[:]
    onnx.save(m, tmp_path / "c.onnx")
    r = invoke("grad", tmp_path / "c.onnx", "--input", "v_in=0.5", "--wrt", "v_in")
    assert r.exit_code == 1 and "does not depend" not in r.stderr and "v_in: at Pad 'pad' (input 2)" in r.stderr, r.output


def test_an_empty_batch_is_refused_up_front():
    """A batch of 0 samples has no loss to differentiate: one line (it failed in onnxruntime, in a Reshape
    of onnxprobe's backward graph); a batch of 1 of the same model runs."""
    m = str(sample_path("dynamic_batch"))
    for argv in (["grad", m], ["diff", "--grad", m, m]):
        r = runner.invoke(app, [*argv, "--shape", "x=0x3x8x8"])
        assert r.exit_code == 2 and "empty batch has no loss" in r.stderr, r.output
        assert len(r.stderr.strip().splitlines()) == 1
    assert runner.invoke(app, ["grad", m, "--shape", "x=1x3x8x8"]).exit_code == 0


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_check_of_cross_entropy_runs_in_float64(tmp_path, dtype):
    """The loss's one-hot is built in int64 and Cast: onnxruntime has no OneHot with double values, and the
    check of `--loss cross-entropy` fell back to float32 without a word ('check (float64)' with sum). The
    loss itself: numpy float64 on the model's logits."""
    labels = np.array([3, 0, 7, 1], dtype)
    np.save(tmp_path / "lab.npy", labels)
    feeds = sample_feeds("mlp")
    np.save(tmp_path / "x.npy", feeds["x"])
    d = grad_json(sample_path("mlp"), "--loss", "cross-entropy", "--labels", tmp_path / "lab.npy", "--check",
                  "--input", f"x={tmp_path / 'x.npy'}")
    assert d["check"] == "float64" and not any("float64 copy" in n for n in d["notes"]), d["notes"]
    assert all(r["check"]["ok"] for r in d["gradients"])
    m = ort.InferenceSession(str(sample_path("mlp")), providers=["CPUExecutionProvider"])
    z = m.run(None, feeds)[0].astype(np.float64)
    lsm = z - z.max(1, keepdims=True) - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True))
    assert d["loss"]["value"] == pytest.approx(-lsm[np.arange(4), labels].mean(), rel=1e-5)


def test_check_says_when_it_falls_back_to_float32():
    """onnxruntime has no double Conv: the check runs in float32, and a note says so and why."""
    d = grad_json(sample_path("cnn"), "--check")
    assert d["check"] == "float32"
    assert any("float32" in n and "float64 copy" in n and "Conv" in n for n in d["notes"]), d["notes"]


def test_check_rows_say_which_gradients_failed(tmp_path):
    """CSV and JSON rows carried only the check's error (an empty cell for x, 7e-11 for w) while the table said
    'FAIL' and 'ok': rows end with ``check_ok``. Oracle: y = sqrt(x) * w at x = 0 has an infinite d/dx (no
    finite difference agrees with it); d/dw = sum over rows of sqrt(x), finite and smooth."""
    import csv
    import io

    m = make_model([helper.make_node("Sqrt", ["x"], ["s"], name="sqrt"), helper.make_node("Mul", ["s", "w"], ["y"], name="mul")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                   [numpy_helper.from_array(np.array([1, 2, 3], np.float32), "w")])
    onnx.save(m, tmp_path / "g.onnx")
    x = np.array([[0, 1, 4], [9, 16, 25]], np.float32)
    np.save(tmp_path / "x.npy", x)
    args = ["grad", str(tmp_path / "g.onnx"), "--input", f"x={tmp_path / 'x.npy'}", "--wrt", "x", "--wrt", "w", "--check"]
    r = runner.invoke(app, [*args, "--format", "csv"])
    assert r.exit_code == 1, r.output
    rows = {row["tensor"]: row for row in csv.DictReader(io.StringIO(r.stdout))}
    assert rows["x"]["check_ok"] == "false" and rows["w"]["check_ok"] == "true", rows
    r = runner.invoke(app, [*args, "--format", "json"])
    got = {row["tensor"]: row for row in json.loads(r.stdout)}
    assert got["x"]["check_ok"] is False and got["w"]["check_ok"] is True, got
    dw = np.sqrt(x.astype(np.float64)).sum(axis=0)
    assert got["w"]["norm"] == pytest.approx(float(np.linalg.norm(dw)), rel=1e-6)


@pytest.mark.parametrize("flags, needle", [
    (["--reduce", "mean"], "--reduce"),
    (["--inputs-dir", "{ds}", "--seed", "3"], "drop --seed"),
    (["--inputs-dir", "{ds}", "--check"], "drop --check"),
    (["--ray"], "--ray"),
])
def test_conflicting_flags_are_refused_before_export_writes(tmp_path, flags, needle):
    """Flags that conflict are refused before any work, as in layers and diff: grad wrote --export's model first,
    then refused --reduce without a dataset, a dataset with --seed or --check, --ray without --inputs-dir."""
    ds = tmp_path / "ds"
    ds.mkdir()
    np.savez(ds / "b0.npz", x=np.zeros((1, 16), np.float32))
    out = tmp_path / "bw.onnx"
    r = invoke("grad", sample_path("mlp"), "--device", "cpu", "--export", out, *[f.format(ds=ds) for f in flags])
    assert r.exit_code == 2 and needle in r.stderr and "Traceback" not in r.output, r.output
    assert not out.exists() and "wrote" not in r.output


def test_the_check_s_footer_counts_the_oks_its_verdict_counts():
    """The footer read '10 ok' beside a verdict of '9 gradient(s) agree': it counted the loss's own input, whose
    gradient is the loss's formula (dL/dy = 1) and which the verdict leaves out. It says that one apart."""
    import json
    import re

    r = runner.invoke(app, ["grad", str(sample_path("mlp")), "--check", "--json", "-"])
    assert r.exit_code == 0, r.output
    said = json.loads(r.stdout)["verdict_reason"]
    agree = int(re.match(r"(\d+) gradient", said).group(1))
    r = runner.invoke(app, ["grad", str(sample_path("mlp")), "--check"], env={"COLUMNS": "200"})
    ok = int(re.search(r"check \(float64\): (\d+) ok", r.stdout).group(1))
    assert ok == agree and "y's own gradient, the loss's formula, agrees" in r.stdout, (said, r.stdout)
