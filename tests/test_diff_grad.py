"""`onnxprobe diff --grad`: the gradients of two models under one loss and one input, paired by the diff
matching and measured with the diff metrics.

Oracles: a hand-written numpy backward pass of sample_models/mlp.onnx (float64), and torch.autograd with
torch's own fake quantization (a straight-through estimator) for the quantized model
(tests/test_autodiff_torchref.py, in a worker process). Nothing is compared with onnxprobe's own output.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from typer.testing import CliRunner

from conftest import fold_bn1, sample_feeds, sample_path, scale_weight_row
from onnxprobe import api
from onnxprobe.cli.main import app
from quantize_fixtures import quantize

runner = CliRunner()
WEIGHTS = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"]


@pytest.fixture(scope="module")
def qdir(tmp_path_factory):
    return tmp_path_factory.mktemp("quantized")


def _inputs(seed: int = 5):
    rng = np.random.default_rng(seed)
    return rng.random((4, 16), dtype=np.float32), rng.standard_normal((4, 8)).astype(np.float32)


def _weights(path) -> dict[str, np.ndarray]:
    return {i.name: numpy_helper.to_array(i).astype(np.float64) for i in onnx.load(str(path)).graph.initializer}


def mlp_grads(w: dict, x: np.ndarray, dy: np.ndarray) -> dict[str, np.ndarray]:
    """d<y, dy>/d(everything) for y = sigmoid(tanh(relu(x W1 + b1) W2 + b2) W3 + b3), by hand (float64)."""
    x = x.astype(np.float64)
    h1 = x @ w["fc1.weight"] + w["fc1.bias"]
    r1 = np.maximum(h1, 0)
    h2 = r1 @ w["fc2.weight"] + w["fc2.bias"]
    t2 = np.tanh(h2)
    o3 = t2 @ w["fc3.weight"] + w["fc3.bias"]
    y = 1 / (1 + np.exp(-o3))
    d_o3 = dy * y * (1 - y)
    d_t2 = d_o3 @ w["fc3.weight"].T
    d_h2 = d_t2 * (1 - t2 ** 2)
    d_r1 = d_h2 @ w["fc2.weight"].T
    d_h1 = d_r1 * (h1 > 0)
    return {
        "fc3.bias": d_o3.sum(0), "fc3.weight": t2.T @ d_o3, "fc2.bias": d_h2.sum(0), "fc2.weight": r1.T @ d_h2,
        "fc1.bias": d_h1.sum(0), "fc1.weight": x.T @ d_h1, "x": d_h1 @ w["fc1.weight"].T,
        "fc1_out": d_h1, "relu1_out": d_r1, "fc2_out": d_h2, "tanh2_out": d_t2, "fc3_matmul": d_o3, "fc3_out": d_o3,
    }


def _perturbed(tmp_path, name: str = "fc2.weight", delta: float = 0.3):
    m = onnx.load(str(sample_path("mlp")))
    for init in m.graph.initializer:
        if init.name == name:
            a = numpy_helper.to_array(init).copy()
            a[3, 5] += delta
            a[7] -= delta / 3
            init.CopyFrom(numpy_helper.from_array(a, name))
    out = tmp_path / "mlp_perturbed.onnx"
    onnx.save(m, str(out))
    return out


def _by_b(res) -> dict:
    return {r.pair.b.name: r for r in res.results}


def test_identical_models_agree_exactly():
    res = api.diff_grad(sample_path("cnn"), sample_path("cnn"), selection=api.Selection(all=True))
    assert len(res.results) >= 20 and not res.matching.unmatched_a and not res.matching.unmatched_b
    assert all(r.metrics is not None and r.metrics.max_abs == 0 and r.passed for r in res.results)
    names = {r.pair.b.name for r in res.results}
    assert {"conv1.weight_grad", "bn1.scale_grad", "fc.bias_grad", "image_grad", "relu1_out_grad"} <= names
    assert res.grad["loss_a"] == res.grad["loss_b"] and not res.outputs_failed


def test_perturbed_weight_changes_gradients_by_what_numpy_says(tmp_path):
    a_path = _perturbed(tmp_path)
    x, dy = _inputs()
    spec = api.GradSpec(loss="output-grad", output_grad=dy)
    res = api.diff_grad(a_path, sample_path("mlp"), spec, selection=api.Selection(all=True), inputs=api.InputSpec(arrays={"x": x}))
    ga, gb = mlp_grads(_weights(a_path), x, dy), mlp_grads(_weights(sample_path("mlp")), x, dy)
    pairs = _by_b(res)
    assert set(f"{k}_grad" for k in ga) <= set(pairs), sorted(set(f"{k}_grad" for k in ga) - set(pairs))
    for k in ga:
        r = pairs[f"{k}_grad"]
        assert r.pair.strategy == "name" and r.pair.a.name == r.pair.b.name
        diff = ga[k] - gb[k]
        want_max = float(np.abs(diff).max())
        scale = float(np.abs(gb[k]).max())
        assert abs(r.metrics.max_abs - want_max) <= 1e-5 * scale + 1e-7, (k, r.metrics.max_abs, want_max)
        want_sqnr = 10 * np.log10(np.sum(gb[k] ** 2) / np.sum(diff ** 2))
        assert abs(r.metrics.sqnr_db - want_sqnr) < 0.05, (k, r.metrics.sqnr_db, want_sqnr)
    # weight gradients are the verdict: they moved by far more than the default tolerance
    assert {r.pair.b.name for r in res.outputs_failed} == {f"{k}_grad" for k in WEIGHTS}
    assert pairs["fc1.weight_grad"].pair.b.is_output and not pairs["fc1_out_grad"].pair.b.is_output


def test_quantized_qdq_model_pairs_every_weight_gradient_and_matches_torch_fake_quant(qdir):
    from test_autodiff_torchref import in_worker

    a_path = quantize("mlp", "qdq", qdir)
    x, dy = _inputs()
    spec = api.GradSpec(loss="output-grad", output_grad=dy)
    # opt-level off: the QDQ graph as written (simulated quantization), which is what torch's fake quantization computes
    res = api.diff_grad(a_path, sample_path("mlp"), spec, selection=api.Selection(all=True),
                        config=api.RunConfig(device="cpu", opt_level="off"), inputs=api.InputSpec(arrays={"x": x}))
    pairs = _by_b(res)
    for k in WEIGHTS:
        r = pairs[f"{k}_grad"]
        assert r.pair.strategy in ("qdq", "name") and r.metrics is not None, k
    assert pairs["fc1.weight_grad"].pair.a.probe.startswith("fc1.weight_DequantizeLinear_Output")
    assert "x_grad" in pairs  # through QuantizeLinear -> DequantizeLinear of the input
    assert "straight-through" in res.measured

    # the oracle: torch.autograd on both graphs; A's weights are its DequantizeLinear outputs
    qa = onnx.load(str(a_path))
    dq_of = {n.output[0]: n for n in qa.graph.node if n.op_type == "DequantizeLinear"}
    inits = {i.name: numpy_helper.to_array(i) for i in qa.graph.initializer}

    def dequantized(t: str) -> np.ndarray:
        n = dq_of[t]
        q, s = inits[n.input[0]].astype(np.float32), inits[n.input[1]]
        zp = inits[n.input[2]].astype(np.float32) if len(n.input) > 2 else np.zeros_like(s)
        axis = next((a.i for a in n.attribute if a.name == "axis"), 1)
        shape = [1] * q.ndim
        if s.size > 1:
            shape[axis] = -1
        return ((q - zp.reshape(shape)) * s.reshape(shape)).astype(np.float32)

    a_weights = {pairs[f"{k}_grad"].pair.a.name[: -len("_grad")]: k for k in WEIGHTS}
    jobs = [
        {"kind": "grads", "model": qa.SerializeToString(), "feeds": {"x": x},
         "wrt": {**{t: dequantized(t) for t in a_weights}, "x": x}, "outputs": [("y", dy)]},
        {"kind": "grads", "model": onnx.load(str(sample_path("mlp"))).SerializeToString(), "feeds": {"x": x},
         "wrt": {**{k: v.astype(np.float32) for k, v in _weights(sample_path("mlp")).items()}, "x": x},
         "outputs": [("y", dy)]},
    ]
    ta, tb = in_worker(jobs)
    assert "__unsupported__" not in ta, ta
    for t, k in list(a_weights.items()) + [("x", "x")]:
        r = pairs[f"{k}_grad"]
        want_max = float(np.abs(ta[t] - tb[k]).max())
        scale = float(np.abs(tb[k]).max())
        assert abs(r.metrics.max_abs - want_max) <= 2e-4 * scale, (k, r.metrics.max_abs, want_max)
        assert r.metrics.max_abs > 1e-4 * scale, k  # quantization did change the gradient


def test_dynamic_quantization_pairs_what_has_a_gradient(qdir):
    a_path = quantize("mlp", "dynamic", qdir)
    res = api.diff_grad(a_path, sample_path("mlp"), selection=api.Selection(all=True))
    pairs = _by_b(res)
    assert pairs["fc3.bias_grad"].pair.strategy == "name" and pairs["fc3.bias_grad"].metrics is not None
    # dynamic quantization cuts the gradient (DynamicQuantizeLinear rounds, MatMulInteger has no rule): the
    # weights behind it stay unmatched, and say why
    unmatched = {u.obs.name: u.reason for u in res.matching.unmatched_b}
    assert "integer (quantized) weight in A" in unmatched["fc1.weight_grad"]
    # a weight both hold, its gradient stopped in A: not compared, by the op that stops it (the verdict says so)
    assert unmatched["fc1.bias_grad"] == "no gradient for fc1.bias in A: the gradient stops at DynamicQuantizeLinear relu1_out_QuantizeLinear"
    assert res.verdict()[0] == "error" and "fc1.bias" in res.verdict()[1]
    assert any("no gradient for" in n and "DynamicQuantizeLinear" in n for n in res.notes), res.notes


def test_a_qoperator_model_says_where_its_backward_pass_stops(qdir):
    """A QOperator model's gradients stop at its integer ops (QLinearMatMul...), and its biases live inside them: B's
    gradients without a counterpart said "no counterpart in A" alone, as if A lacked the layer, and no note named the
    stops (grad alone names them). Each such reason and a note say where A's backward pass stops."""
    a_path = quantize("mlp", "qoperator", qdir)
    a = onnx.load(str(a_path))
    integer_ops = {n.op_type for n in a.graph.node} & {"QLinearMatMul", "MatMulInteger", "QLinearConv", "QGemm"}
    assert integer_ops, sorted({n.op_type for n in a.graph.node})
    res = api.diff_grad(a_path, sample_path("mlp"), selection=api.Selection(all=True))
    lone = [u for u in res.matching.unmatched_b if u.cause == "no-counterpart"]
    assert lone and all("A's backward pass stops at" in u.reason for u in lone), [(u.obs.name, u.reason) for u in lone]
    assert any(op in lone[0].reason for op in integer_ops)
    assert any("the backward pass stops at" in n for n in res.notes), res.notes


def test_wrt_keeps_only_those_gradients(tmp_path):
    res = api.diff_grad(_perturbed(tmp_path), sample_path("mlp"), api.GradSpec(wrt=("fc1.*",)),
                        selection=api.Selection(all=True))
    assert {r.pair.b.name for r in res.results} == {"fc1.weight_grad", "fc1.bias_grad"}
    # a pattern that names nothing is refused, as grad refuses it (it was ignored beside one that matched)
    from onnxprobe.errors import UsageError

    with pytest.raises(UsageError, match=r"wrt \(--wrt\) 'bogus'"):
        api.diff_grad(_perturbed(tmp_path), sample_path("mlp"), api.GradSpec(wrt=("fc1.*", "bogus")),
                      selection=api.Selection(all=True))


def test_cli_verdict_and_json(tmp_path):
    same = runner.invoke(app, ["diff", "--grad", str(sample_path("mlp")), str(sample_path("mlp"))])
    assert same.exit_code == 0, same.output
    assert "weight gradients pass" in same.stdout and "fc1.weight_grad" in same.stdout

    out = tmp_path / "r.json"
    dy = tmp_path / "dy.npy"
    np.save(dy, _inputs()[1])
    r = runner.invoke(app, ["diff", "--grad", str(_perturbed(tmp_path)), str(sample_path("mlp")),
                            "--output-grad", str(dy), "--json", str(out)])
    assert r.exit_code == 1, r.output
    d = json.loads(out.read_text())
    assert d["grad"]["loss"] == "output-grad" and d["grad"]["loss_a"] != d["grad"]["loss_b"]
    assert not d["outputs_passed"] and {"fc2.weight_grad", "fc1.bias_grad"} <= {p["b"] for p in d["pairs"]}


def test_a_forward_difference_is_said_and_no_backward_step_is_blamed(tmp_path):
    """The sample CNN with conv2.weight[3] scaled by 1.2 against the original: the losses differ, so the
    gradients differ from the forward pass on; ▶ and the footer blamed fc.weight_grad (a right backward
    step). A note says the forward passes differ and no pair is marked; the losses are onnxruntime's sums
    of each model's logits."""
    import onnxruntime as ort

    m = scale_weight_row(onnx.load(str(sample_path("cnn"))), "conv2.weight", 3, 1.2)
    a_path = tmp_path / "cnn_a.onnx"
    onnx.save(m, str(a_path))
    feed = sample_feeds("cnn")
    np.savez(tmp_path / "in.npz", **feed)
    losses = [float(ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, feed)[0].astype(np.float64).sum())
              for p in (a_path, sample_path("cnn"))]
    assert abs(losses[0] - losses[1]) > 1e-3  # the forward passes really differ
    out = tmp_path / "r.json"
    r = runner.invoke(app, ["diff", "--grad", str(a_path), str(sample_path("cnn")), "--inputs", str(tmp_path / "in.npz"),
                            "--device", "cpu", "--json", str(out)])
    assert r.exit_code == 1, r.output
    d = json.loads(out.read_text())
    assert d["grad"]["loss_a"] == pytest.approx(losses[0], rel=1e-5) and d["grad"]["loss_b"] == pytest.approx(losses[1], rel=1e-5)
    assert d["grad"]["forward_differs"] is True and d["first_failure"] is None and d["verdict"] == "fail"
    assert "the losses differ" in r.stderr and "forward pass" in r.stderr, r.stderr
    r = runner.invoke(app, ["diff", "--grad", str(a_path), str(sample_path("cnn")), "--inputs", str(tmp_path / "in.npz"),
                            "--device", "cpu"])
    assert r.exit_code == 1 and "FAIL" in r.stdout and "error starts" not in r.stdout and "▶" not in r.stdout, r.stdout


@pytest.mark.parametrize("args,needle", [
    (["--grad"], "two models"),
    (["--grad", "--vs-reference"], "two models"),
    (["MLP", "--loss", "mean"], "add --grad"),
    (["MLP", "--grad", "--loss", "mse"], "--target"),
    (["MLP", "--grad", "--target", "nothere.npy", "--loss", "mean"], "--target"),
    (["MLP", "--grad", "--wrt", "nothing*"], "--wrt"),
])
def test_bad_arguments(args, needle):
    args = [str(sample_path("mlp")) if a == "MLP" else a for a in args]
    r = runner.invoke(app, ["diff", str(sample_path("mlp")), *args])
    assert r.exit_code == 2, r.output
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def _bn_folded_cnn(tmp_path):
    """The sample CNN with bn1 folded into conv1 (as exporters and optimizers do), the folded weights under
    new names, the node names kept: a node-name match would pair conv1's weights across the two."""
    m = onnx.load(str(sample_path("cnn")))
    fold_bn1(m, {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}, ("conv1.folded_w", "conv1.folded_b"))
    p = tmp_path / "cnn_folded.onnx"
    onnx.save(m, p)
    return p


def test_a_bn_folded_weight_is_not_paired_with_the_raw_weight(tmp_path):
    a = _bn_folded_cnn(tmp_path)
    fwd = api.diff(a, sample_path("cnn"), config=api.RunConfig(device="cpu"))  # the forward models agree
    assert fwd.verdict()[0] == "pass", fwd.verdict()
    res = api.diff_grad(a, sample_path("cnn"), config=api.RunConfig(device="cpu", opt_level="off"))
    paired = {(r.pair.a.name, r.pair.b.name) for r in res.results}
    assert not any("conv1" in x and "conv1" in y for x, y in paired), paired
    refused = [u for u in res.matching.unmatched_a if u.obs.name == "conv1.folded_w_grad"]
    # a known export folding: cause "folded" (test_diff_grad_folding.py), which the verdict does not count as missing
    assert refused and refused[0].cause == "folded" and "different functions" in refused[0].reason
    assert "conv2.weight_grad" in {r.pair.b.name for r in res.results}  # the other layers still pair
    # and the refusal is reported, not silently dropped
    d = json.loads(runner.invoke(app, ["diff", "--grad", str(a), str(sample_path("cnn")), "--json", "-"]).stdout)
    assert any(u["cause"] == "folded" and "BatchNormalization" in u["reason"] for u in d["unmatched_b"])


def test_grad_columns_are_the_ones_its_table_has():
    """diff --grad --columns listed introduced_sqnr_db among its columns, then refused it after the run;
    it is refused at once, and the list offered is the one its table has."""
    r = runner.invoke(app, ["diff", "--grad", str(sample_path("mlp")), str(sample_path("mlp")), "--columns", "introduced_sqnr_db"])
    assert r.exit_code == 2 and "no introduced error" in r.stderr, r.output
    r = runner.invoke(app, ["diff", "--grad", str(sample_path("mlp")), str(sample_path("mlp")), "--columns", "tensor,mean_abs"])
    assert r.exit_code == 0 and "mean|a-b|" in r.stdout, r.output


def test_the_netron_attachment_of_diff_grad_targets_model_a_tensors(tmp_path):
    """diff --grad --netron targeted fc1.bias_grad, fc1_out_grad...: no value of model A, so Netron showed
    nothing. The metrics go on the forward tensors (as grad --netron's do)."""
    out = tmp_path / "n.json"
    r = CliRunner().invoke(app, ["diff", str(sample_path("mlp")), str(sample_path("mlp")), "--grad", "--netron", str(out)])
    assert r.exit_code == 0, r.output
    m = onnx.load(sample_path("mlp"))
    names = {i.name for i in m.graph.initializer} | {o for n in m.graph.node for o in n.output} | {i.name for i in m.graph.input}
    targets = {x["target"] for x in json.loads(out.read_text())["metrics"]}
    assert targets and targets <= names, targets - names


def test_the_depth_line_is_the_same_whatever_the_sort(tmp_path):
    """Gradient pairs share node indices (a weight and its node's output): the line's first and last
    values were taken in --sort order, 24 dB under topo and 23.9 dB under accumulated."""
    m = onnx.load(sample_path("mlp"))
    for init in m.graph.initializer:
        if init.name == "fc2.weight":
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * np.float32(1.1), init.name))
    onnx.save(m, tmp_path / "b.onnx")
    lines = set()
    for sort in ("topo", "accumulated"):
        r = CliRunner().invoke(app, ["diff", str(sample_path("mlp")), str(tmp_path / "b.onnx"), "--grad", "--sort", sort],
                               env={"COLUMNS": "200"})
        lines |= {ln for ln in r.stdout.splitlines() if ln.startswith("SQNR along depth")}
    assert len(lines) == 1, lines


@pytest.mark.parametrize("flag", [["--fp32-sensitivity", "3"], ["--separate-runs"]])
def test_forward_only_flags_are_refused_with_grad(flag):
    """--fp32-sensitivity and --separate-runs shape a forward diff; with --grad they were silently ignored."""
    m = str(sample_path("mlp"))
    r = runner.invoke(app, ["diff", m, m, "--grad", *flag])
    assert r.exit_code == 2 and flag[0] in r.stderr and "not with --grad" in r.stderr, r.output
    assert len(r.stderr.strip().splitlines()) == 1
