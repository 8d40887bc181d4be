"""`onnxprobe diff`: matching through quantization, metrics against numpy, SQNR against onnxruntime's
qdq_loss_debug, the introduced-error column, the verdict and the CLI."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import SAMPLE_NAMES, bench_models, empty_slice_model, make_model, sample_feeds, sample_path
from onnxprobe import api
from onnxprobe.runtime.runners import base as base_runner
from onnxprobe.cli.main import app
from onnxprobe.errors import OnnxProbeError, UsageError
from onnxprobe.match.engine import DIFFERENT_FUNCTION, FOLDED
from quantize_fixtures import RandomReader, quantize

runner = CliRunner()
QUANT_KINDS = ["dynamic", "qdq", "qoperator"]
QUANT_SAMPLES = ["cnn", "mlp", "transformer_block"]


@pytest.fixture(scope="session")
def qdir(tmp_path_factory):
    return tmp_path_factory.mktemp("quantized")


def _run_with_outputs(path, names, feeds):
    """Plain onnxruntime with the named tensors appended as outputs by hand (the oracle's own way)."""
    m = onnx.load(str(path))
    have = {o.name for o in m.graph.output}
    for n in names:
        if n not in have:
            m.graph.output.append(onnx.ValueInfoProto(name=n))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip(names, s.run(names, feeds)))


def _graph_names(path) -> set[str]:
    m = onnx.load(str(path))
    return {o for n in m.graph.node for o in n.output}


@pytest.mark.parametrize("kind", QUANT_KINDS)
@pytest.mark.parametrize("name", QUANT_SAMPLES)
def test_every_surviving_layer_output_is_matched(name, kind, qdir):
    q = quantize(name, kind, qdir)
    res = api.diff(q, sample_path(name), selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))
    fp32 = onnx.load(str(sample_path(name)))
    layer_outputs = [n.output[0] for n in fp32.graph.node if n.op_type in ("Conv", "Gemm", "MatMul")]
    names = _graph_names(q)  # QOperator models keep the float name with a "_quantized" suffix
    surviving = [t for t in layer_outputs if t in names or f"{t}_quantized" in names]
    assert surviving, "the quantizer kept no layer output name; the test would prove nothing"
    paired_b = {r.pair.b.name for r in res.results}
    # a layer whose Relu the quantizer folded into its range (zero point 0) holds the Relu's output: it is
    # compared there (the unmatched layer output says so), never with the value before the Relu
    relu_of = {n.input[0]: n.output[0] for n in fp32.graph.node if n.op_type == "Relu"}
    folded = {u.obs.name for u in res.matching.unmatched_b if u.cause == FOLDED}
    assert [t for t in surviving if t not in paired_b and not (t in folded and relu_of.get(t) in paired_b)] == []
    # never a pair of different shapes, and every pair says how it was made
    for r in res.results:
        assert r.shape is not None and r.pair.strategy and r.pair.reason


@pytest.mark.parametrize("kind", QUANT_KINDS)
@pytest.mark.parametrize("name", QUANT_SAMPLES)
def test_the_default_selection_reports_every_quantized_layer(name, kind, qdir):
    """The default selection (the layer ops) reports every pair whose quantized side stands for a layer's
    output, though the node that holds that value is a DequantizeLinear (a QLinearConv feeding a float op)
    or an Add (a ConvInteger's rescale), and the float side's tensor is a folded BatchNormalization's."""
    q = quantize(name, kind, qdir)
    every = api.diff(q, sample_path(name), selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))
    layers = {r.pair.b.name for r in every.results if r.pair.a.kind != "float" and r.pair.a.effective_op in ("Conv", "Gemm", "MatMul")}
    assert layers, "no quantized layer paired: the test would prove nothing"
    default = api.diff(q, sample_path(name), config=api.RunConfig(device="cpu"))
    assert layers <= {r.pair.b.name for r in default.results}


def test_a_folded_layer_held_by_a_dequantization_is_in_the_default_report(tmp_path):
    """QOperator: QLinearConv (BatchNormalization folded in, so its value has the BN output's name) whose
    float consumer makes the quantizer write a DequantizeLinear: the pair is a layer's, in the default
    report, and the first failing layer is found among them."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    bn = [numpy_helper.from_array(np.ones(4, np.float32), "s"), numpy_helper.from_array(np.zeros(4, np.float32), "b"),
          numpy_helper.from_array(np.zeros(4, np.float32), "mu"), numpy_helper.from_array(np.ones(4, np.float32), "var")]
    fp = helper.make_model(helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["conv"], pads=[1, 1, 1, 1]),
         helper.make_node("BatchNormalization", ["conv", "s", "b", "mu", "var"], ["bn"]),
         helper.make_node("HardSigmoid", ["bn"], ["y"])], "g", [x], [y], [numpy_helper.from_array(w, "w"), *bn]),
        opset_imports=[helper.make_opsetid("", 13)])
    f = lambda v, n: numpy_helper.from_array(np.array(v, np.float32), n)  # noqa: E731
    u = lambda v, n: numpy_helper.from_array(np.array(v, np.uint8), n)  # noqa: E731
    qw = np.clip(np.round(w / 0.02) + 128, 0, 255).astype(np.uint8)
    q = helper.make_model(helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["x_quantized"]),
         helper.make_node("QLinearConv", ["x_quantized", "xs", "xz", "wq", "ws", "wz", "ys", "yz"], ["bn_quantized"], pads=[1, 1, 1, 1]),
         helper.make_node("DequantizeLinear", ["bn_quantized", "ys", "yz"], ["bn"]),
         helper.make_node("HardSigmoid", ["bn"], ["y"])], "g", [x], [y],
        [f(0.02, "xs"), u(128, "xz"), numpy_helper.from_array(qw, "wq"), f(0.02, "ws"), u(128, "wz"), f(0.05, "ys"), u(128, "yz")]),
        opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(fp, str(tmp_path / "fp.onnx"))
    onnx.save(q, str(tmp_path / "q.onnx"))
    res = api.diff(str(tmp_path / "q.onnx"), str(tmp_path / "fp.onnx"), config=api.RunConfig(device="cpu"))
    assert "bn" in {r.pair.b.name for r in res.results}
    assert next(r for r in res.results if r.pair.b.name == "bn").pair.a.effective_op == "Conv"


@pytest.mark.parametrize("dq_name", ["mm", "deq"])
@pytest.mark.parametrize("zero_point, folded", [(0, True), (3, False)])
def test_a_relu_folded_into_a_quantization_range_is_compared_after_the_relu(tmp_path, zero_point, folded, dq_name):
    """A QOperator MatMul whose output range starts at 0 (uint8, zero point 0) holds Relu(MatMul): the
    quantizer dropped the float model's Relu (behind an Identity). It is paired with the Relu's output,
    either way round, never with the MatMul's (a different function: its negative values); with a zero
    point above 0 the range holds negatives, and the MatMul's output is its counterpart. Its dequantized
    value named after the float tensor ("mm", as quantizers name it) is paired by that name; named
    otherwise, the structural alignment never pairs it with the MatMul's output either."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 6)).astype(np.float32)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6])
    fp = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Identity", ["mm"], ["mm_id"]),
         helper.make_node("Relu", ["mm_id"], ["relu"]), helper.make_node("Sigmoid", ["relu"], ["y"])],
        "g", [x], [y], [numpy_helper.from_array(w, "w")]), opset_imports=[helper.make_opsetid("", 13)])
    f = lambda v, n: numpy_helper.from_array(np.array(v, np.float32), n)  # noqa: E731
    u = lambda v, n: numpy_helper.from_array(np.array(v, np.uint8), n)  # noqa: E731
    q = helper.make_model(helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["x_quantized"]),
         helper.make_node("QLinearMatMul", ["x_quantized", "xs", "xz", "wq", "ws", "wz", "ys", "yz"], ["mm_quantized"]),
         helper.make_node("DequantizeLinear", ["mm_quantized", "ys", "yz"], [dq_name]),
         helper.make_node("Sigmoid", [dq_name], ["y"])], "g", [x], [y],
        [f(0.03, "xs"), u(128, "xz"), numpy_helper.from_array(np.clip(np.round(w / 0.02) + 128, 0, 255).astype(np.uint8), "wq"),
         f(0.02, "ws"), u(128, "wz"), f(0.05, "ys"), u(zero_point, "yz")]), opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(fp, str(tmp_path / "fp.onnx"))
    onnx.save(q, str(tmp_path / "q.onnx"))
    feeds = {"x": rng.standard_normal((2, 8)).astype(np.float32)}
    want = "relu" if folded else "mm"
    if dq_name == "deq" and folded:
        res = api.diff(str(tmp_path / "q.onnx"), str(tmp_path / "fp.onnx"), selection=api.Selection(all=True),
                       config=api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays=feeds))
        assert "mm" not in {r.pair.b.name for r in res.results if r.pair.a.name == "deq"}
        return
    for a, b, side in (("q", "fp", "b"), ("fp", "q", "a")):
        res = api.diff(str(tmp_path / f"{a}.onnx"), str(tmp_path / f"{b}.onnx"), selection=api.Selection(all=True),
                       config=api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays=feeds))
        paired = {getattr(r.pair, side).name: r for r in res.results}
        other = {"mm", "relu"} - {want}
        assert want in paired and not (other & paired.keys() and getattr(paired[other.pop()].pair, "a" if side == "b" else "b").kind != "float")
        quantized = paired[want].pair.a if side == "b" else paired[want].pair.b
        assert quantized.kind == "qoperator"
    if folded:  # the quantized value is Relu(MatMul): nothing below 0, as the oracle's Relu output
        oracle = _run_with_outputs(tmp_path / "fp.onnx", ["relu", "mm"], feeds)
        assert oracle["mm"].min() < 0 <= oracle["relu"].min()


def test_structural_alignment_never_pairs_a_node_with_one_that_reads_other_tensors(tmp_path):
    """Two exports of one computation, tensor names all different: Relu(x) pairs with Relu(x) by op order
    and shape, but Shape(Relu(x)) must not pair with Shape(m), though op and shape agree: what it reads
    is paired with a tensor the other is not computed from (another function of the data), nor r * e with
    0.5 * e, e = Sigmoid(r) (what both read is paired, and differs, though r is upstream of both: GELU's two
    exports). Reordered products (r * e * 0.5 against r * (0.5 * e)) still pair at their outputs."""
    v = (lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]))
    half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
    a = make_model([helper.make_node("Relu", ["x"], ["ra"]), helper.make_node("Shape", ["ra"], ["sa"]),
                    helper.make_node("Sigmoid", ["ra"], ["ea"]),
                    helper.make_node("Mul", ["ra", "ea"], ["pa"]), helper.make_node("Mul", ["pa", "half"], ["qa"]),
                    helper.make_node("Add", ["qa", "m"], ["y"])],
                   [v("x"), v("m")], [v("y"), helper.make_tensor_value_info("sa", TensorProto.INT64, [2])], [half])
    b = make_model([helper.make_node("Relu", ["x"], ["rb"]), helper.make_node("Shape", ["m"], ["sb"]),
                    helper.make_node("Sigmoid", ["rb"], ["eb"]),
                    helper.make_node("Mul", ["half", "eb"], ["pb"]), helper.make_node("Mul", ["rb", "pb"], ["qb"]),
                    helper.make_node("Add", ["qb", "m"], ["y"])],
                   [v("x"), v("m")], [v("y"), helper.make_tensor_value_info("sb", TensorProto.INT64, [2])], [half])
    onnx.save(a, str(tmp_path / "a.onnx"))
    onnx.save(b, str(tmp_path / "b.onnx"))
    res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))
    pairs = {(r.pair.a.name, r.pair.b.name) for r in res.results}
    assert ("ra", "rb") in pairs and ("qa", "qb") in pairs and ("y", "y") in pairs
    assert not any(p[0] == "sa" for p in pairs)
    assert ("ea", "eb") in pairs and ("pa", "pb") not in pairs
    why = next(u for u in res.matching.unmatched_a if u.obs.name == "sa")
    assert why.cause == DIFFERENT_FUNCTION


@pytest.mark.parametrize("fuse", [False, True])
def test_metrics_agree_with_numpy(qdir, fuse):
    """Host metrics (separate runs) are float64 sums: 1e-9. In-graph metrics (one run of both models)
    are float32 partial sums added in float64: within float32 rounding, 1e-6."""
    q = quantize("cnn", "qdq", qdir)
    feeds = sample_feeds("cnn")
    res = api.diff(q, sample_path("cnn"), selection=api.Selection(all=True), config=api.RunConfig(device="cpu"),
                   inputs=api.InputSpec(arrays=feeds), fuse=fuse)
    assert not any("one-run diff failed" in n for n in res.notes)
    rel = 1e-6 if fuse else 1e-9
    checked = 0
    for r in res.results:
        a_name, b_name = r.pair.a.name, r.pair.b.name
        va = _run_with_outputs(q, [a_name], feeds)[a_name].astype(np.float64)
        vb = _run_with_outputs(sample_path("cnn"), [b_name], feeds)[b_name].astype(np.float64)
        d = np.abs(va - vb)
        m = r.metrics
        assert m.max_abs == pytest.approx(d.max(), rel=1e-9, abs=1e-12)
        assert m.mean_abs == pytest.approx(d.mean(), rel=rel, abs=1e-12)
        assert m.rmse == pytest.approx(np.sqrt((d ** 2).mean()), rel=rel, abs=1e-12)
        # (its own name: reusing ``rel`` once left the cosine, SQNR and every later pair's checks at rel = max_rel)
        max_rel = (d / np.maximum(np.abs(vb), 1e-45)).max()  # float32 tensors: its smallest subnormal, inf past its range
        assert m.max_rel == (np.inf if max_rel > np.finfo(np.float32).max else pytest.approx(max_rel, rel=1e-6))
        cos = (va * vb).sum() / np.sqrt((va ** 2).sum() * (vb ** 2).sum())
        assert m.cosine == pytest.approx(cos, rel=rel)
        assert m.sqnr_db == pytest.approx(10 * np.log10((vb ** 2).sum() / (d ** 2).sum()), rel=rel)
        assert tuple(m.worst) == np.unravel_index(np.argmax(d), d.shape)
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize("name", ["cnn", "mlp"])
def test_sqnr_agrees_with_qdq_loss_debug(name, qdir, tmp_path):
    from onnxruntime.quantization.qdq_loss_debug import (
        collect_activations, compute_activation_error, create_activation_matching, modify_model_output_intermediate_tensors,
    )

    q = quantize(name, "qdq", qdir)
    fp = sample_path(name)
    qa, fa = tmp_path / "q_aug.onnx", tmp_path / "f_aug.onnx"
    modify_model_output_intermediate_tensors(str(q), str(qa))
    modify_model_output_intermediate_tensors(str(fp), str(fa))
    reader = RandomReader(fp, n=1, seed=11)
    feeds = reader.batches[0]
    qact = collect_activations(str(qa), RandomReader(fp, n=1, seed=11))
    fact = collect_activations(str(fa), RandomReader(fp, n=1, seed=11))
    theirs = {k: v["xmodel_err"] for k, v in compute_activation_error(create_activation_matching(qact, fact)).items() if "xmodel_err" in v}
    res = api.diff(q, fp, selection=api.Selection(all=True), config=api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays=feeds))
    ours = {r.pair.b.name: r.metrics.sqnr_db for r in res.results if r.pair.strategy == "qdq"}
    common = set(theirs) & set(ours)
    assert len(common) >= 3
    for k in common:
        assert ours[k] == pytest.approx(theirs[k], abs=1e-3), k


def _perturbed_mlp(tmp_path, layer_weight="fc2.weight", scale=0.3):
    m = onnx.load(str(sample_path("mlp")))
    for init in m.graph.initializer:
        if init.name == layer_weight:
            w = numpy_helper.to_array(init)
            w = w + scale * np.random.default_rng(0).normal(size=w.shape).astype(np.float32) * np.abs(w).mean()
            init.CopyFrom(numpy_helper.from_array(w.astype(np.float32), init.name))
    p = tmp_path / "mlp_bad_fc2.onnx"
    onnx.save(m, p)
    return p


def test_introduced_error_points_at_the_damaged_layer(tmp_path):
    names = {i.name for i in onnx.load(str(sample_path("mlp"))).graph.initializer}
    weight = next(n for n in names if n.startswith("fc2") and "weight" in n)
    bad = _perturbed_mlp(tmp_path, weight)
    res = api.diff(bad, sample_path("mlp"), selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))
    by = {r.pair.b.name: r for r in res.results}
    assert by["fc1_out"].metrics.max_abs == 0  # before the damage: identical
    assert by["fc2_out"].introduced.max_abs > 1e-3  # fc2 introduces the error...
    for later in ("tanh2_out", "fc3_matmul", "y"):  # ...later layers only carry it
        assert by[later].metrics.max_abs > 1e-4
        assert by[later].introduced.max_abs < 1e-6, later
    assert res.first_failure.pair.b.name == "fc2_out"


def test_relu_dropped_by_the_quantizer_does_not_fool_matching(tmp_path, qdir):
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array((rng.normal(size=(8, 3, 3, 3)) / 5).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((rng.normal(size=(4, 8, 3, 3)) / 8).astype(np.float32), "w2")
    m = make_model(
        [helper.make_node("Conv", ["x", "w1"], ["conv1_out"], name="conv1", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["conv1_out"], ["relu1_out"], name="relu1"),
         helper.make_node("Conv", ["relu1_out", "w2"], ["y"], name="conv2", pads=[1, 1, 1, 1])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [w1, w2], opset=17)
    fp = tmp_path / "conv_relu.onnx"
    onnx.save(m, fp)
    q = quantize(str(fp), "qdq", qdir)
    qm = onnx.load(str(q))
    assert "Relu" not in {n.op_type for n in qm.graph.node}, "quantizer kept the Relu; the trap is not set"
    res = api.diff(q, fp, selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))
    pair = next(r for r in res.results if r.pair.b.name == "relu1_out")
    assert pair.pair.strategy == "qdq"
    assert pair.metrics.sqnr_db > 25  # the raw conv output (negatives kept) would give a few dB


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_vs_reference_runs_on_every_sample_model(name):
    r = runner.invoke(app, ["diff", str(sample_path(name)), "--vs-reference", "--all", "--json", "-", "--device", "cpu"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["pairs"] and d["outputs_passed"] and d["first_failure"] is None


def _conv_bn(opset: int) -> onnx.ModelProto:
    """Conv -> BatchNormalization (momentum set, as exporters write it) -> Relu, with running statistics far
    from the batch's own: inference and training mode differ by orders of magnitude."""
    rng = np.random.default_rng(7)
    init = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
            numpy_helper.from_array(rng.random(4).astype(np.float32) + 0.5, "scale"),
            numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "bias"),
            numpy_helper.from_array(rng.standard_normal(4).astype(np.float32) * 3, "mean"),
            numpy_helper.from_array(rng.random(4).astype(np.float32) * 4 + 0.1, "var")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["bn"], name="bn", epsilon=1e-3, momentum=0.9),
             helper.make_node("Relu", ["bn"], ["y"], name="relu")]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 8, 8])], init, opset=opset, ir=7)


@pytest.mark.parametrize("opset", [7, 9, 13, 14, 15])
def test_vs_reference_takes_batchnormalization_in_inference_mode_at_every_opset(opset, tmp_path):
    """onnx.reference runs BatchNormalization-7..13 in training mode (the batch's own statistics): the
    reference runner corrects it, so that onnxruntime is not blamed for onnx.reference's mistake. The
    oracle: the inference formula in numpy float64 on onnxruntime's own Conv output."""
    m = _conv_bn(opset)
    p = tmp_path / "bn.onnx"
    onnx.save(m, p)
    x = np.random.default_rng(8).standard_normal((2, 3, 8, 8)).astype(np.float32)
    res = api.diff(p, vs_reference=True, selection=api.Selection(all=True), inputs=api.InputSpec(arrays={"x": x}))
    assert res.verdict()[0] == "pass" and {r.pair.a.name for r in res.results} >= {"c", "bn", "y"}, res.verdict()
    conv = _run_with_outputs(p, ["c"], {"x": x})["c"].astype(np.float64)
    t = {i.name: numpy_helper.to_array(i).astype(np.float64).reshape(-1, 1, 1) for i in m.graph.initializer if i.name != "w"}
    want = t["scale"] * (conv - t["mean"]) / np.sqrt(t["var"] + 1e-3) + t["bias"]
    obs = next(r.pair.b for r in res.results if r.pair.b.name == "bn")
    got = res.b.values([obs], {"x": x})[obs.probe]  # what onnx.reference computes for B
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_json_schema_and_exit_code_on_failing_output(tmp_path):
    bad = _perturbed_mlp(tmp_path, next(i.name for i in onnx.load(str(sample_path("mlp"))).graph.initializer if i.name.startswith("fc2")))
    out = tmp_path / "d.json"
    r = runner.invoke(app, ["diff", str(bad), str(sample_path("mlp")), "--json", str(out)])
    assert r.exit_code == 1, r.output
    d = json.loads(out.read_text())
    assert {"a", "b", "pairs", "unmatched_a", "unmatched_b", "first_failure"} <= d.keys()
    p = d["pairs"][0]
    assert {"a", "b", "strategy", "shape", "max_abs", "mean_abs", "max_rel", "rmse", "cosine", "sqnr_db", "introduced_sqnr_db", "passed"} <= p.keys()
    assert d["first_failure"] == "fc2_out"
    # each side machine-readable, as layers' JSON says what ran
    assert d["sides"]["a"] == {"model": str(bad), "runtime": "onnxruntime", "device": "cpu", "opt_level": "off",
                               "providers": ["CPUExecutionProvider"], "precision": None, "runtime_options": {}}
    assert d["sides"]["b"]["model"] == str(sample_path("mlp")) and d["sides"]["b"]["runtime"] == "onnxruntime"
    # a loose enough tolerance on the output passes
    r = runner.invoke(app, ["diff", str(bad), str(sample_path("mlp")), "--metric", "sqnr", "--min-sqnr", "-100"])
    assert r.exit_code == 0, r.output


def test_per_tensor_tolerance_map_and_sort(tmp_path):
    bad = _perturbed_mlp(tmp_path, next(i.name for i in onnx.load(str(sample_path("mlp"))).graph.initializer if i.name.startswith("fc2")))
    mp = tmp_path / "map.json"
    mp.write_text(json.dumps({"fc3_matmul": "fc3_out"}))
    r = runner.invoke(app, ["diff", str(bad), str(sample_path("mlp")), "--all", "--map", str(mp), "--atol", "y:10",
                            "--sort", "introduced", "--json", "-"])
    d = json.loads(r.stdout)
    pair = next(p for p in d["pairs"] if p["a"] == "fc3_matmul")
    assert pair["b"] == "fc3_out" and pair["strategy"] == "map"
    assert d["outputs_passed"] and r.exit_code == 0  # y passes with its own atol of 10
    intro = [p["introduced_sqnr_db"] for p in d["pairs"] if p["introduced_sqnr_db"] is not None]
    assert intro == sorted(intro)


def test_vs_npz_and_vs_device(tmp_path):
    feeds = sample_feeds("cnn")
    acts = _run_with_outputs(sample_path("cnn"), ["conv1_out", "relu1_out", "logits"], feeds)
    acts["relu1_out"] = acts["relu1_out"] + 0.5  # as if another framework disagreed at this layer
    npz = tmp_path / "acts.npz"
    np.savez(npz, **acts)
    np.savez(tmp_path / "in.npz", **feeds)
    r = runner.invoke(app, ["diff", str(sample_path("cnn")), "--vs-npz", str(npz), "--all", "--inputs", str(tmp_path / "in.npz"), "--json", "-"])
    d = json.loads(r.stdout)
    by = {p["a"]: p for p in d["pairs"]}
    assert set(by) == {"conv1_out", "relu1_out", "logits"}
    assert by["conv1_out"]["max_abs"] == 0 and by["relu1_out"]["max_abs"] == pytest.approx(0.5)
    assert d["first_failure"] == "relu1_out"
    assert d["sides"]["b"]["runtime"] == "npz" and d["sides"]["b"]["device"] is None
    r = runner.invoke(app, ["diff", str(sample_path("cnn")), "--vs-device", "cpu", "--json", "-"])
    assert r.exit_code == 0 and all(p["max_abs"] == 0 for p in json.loads(r.stdout)["pairs"])


@pytest.mark.parametrize("args, needle", [
    (["--vs-reference", "--vs-device", "cpu"], "exactly one reference"),
    ([], "exactly one reference"),
    (["--vs-reference", "--metric", "psnr"], "--metric"),
    (["--vs-reference", "--atol", "x:abc"], "--atol"),
    (["--vs-reference", "--sort", "random"], "--sort"),
])
def test_bad_arguments(args, needle):
    r = runner.invoke(app, ["diff", str(sample_path("cnn")), *args])
    assert r.exit_code == 2, r.output
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_models_with_different_inputs_are_refused():
    r = runner.invoke(app, ["diff", str(sample_path("cnn")), str(sample_path("mlp"))])
    assert r.exit_code == 2 and "different inputs" in r.stderr


def test_small_memory_budget_gives_the_same_report(tmp_path):
    bad = _perturbed_mlp(tmp_path, next(i.name for i in onnx.load(str(sample_path("mlp"))).graph.initializer if i.name.startswith("fc2")))
    whole = api.diff(bad, sample_path("mlp"), selection=api.Selection(all=True), config=api.RunConfig(device="cpu"), fuse=False)
    calls = []
    chunked = api.diff(bad, sample_path("mlp"), selection=api.Selection(all=True), config=api.RunConfig(device="cpu"),
                       max_memory=1024, progress=lambda d, t: calls.append((d, t)), fuse=False)
    assert len(calls) == len(whole.results) > 1  # one pair per run
    for r1, r2 in zip(whole.results, chunked.results):
        assert r1.pair.b.name == r2.pair.b.name and r1.metrics == r2.metrics
        assert (r1.introduced is None) == (r2.introduced is None)
        if r1.introduced is not None:
            assert r1.introduced == r2.introduced


def test_device_resident_metrics_match_host_metrics(tmp_path):
    """The metrics model that runs where the tensors are (used on CUDA) gives the host's numbers; forced
    on here so that the CPU exercises the same path."""
    bad = _perturbed_mlp(tmp_path, next(i.name for i in onnx.load(str(sample_path("mlp"))).graph.initializer if i.name.startswith("fc2")))
    host = api.diff(bad, sample_path("mlp"), selection=api.Selection(all=True), config=api.RunConfig(device="cpu"), fuse=False)
    from onnxprobe.compare.diff import diff as core_diff
    from onnxprobe.compare.sides import model_side
    from onnxprobe.runtime.runners.ort import OrtRunner

    cfg = api.RunConfig(device="cpu")
    a = model_side(str(bad), api.load(bad), lambda proto: OrtRunner(proto, cfg))
    b = model_side("mlp", api.load(sample_path("mlp")), lambda proto: OrtRunner(proto, cfg))
    dev = core_diff(a, b, api.feeds(a.model).values, api.Selection(all=True), api.Tolerance(), device_metrics=True, fuse=False)
    assert [r.pair.b.name for r in dev.results] == [r.pair.b.name for r in host.results]
    for r1, r2 in zip(host.results, dev.results):
        for k in ("max_abs", "mean_abs", "rmse", "cosine", "sqnr_db", "max_rel"):
            assert getattr(r2.metrics, k) == pytest.approx(getattr(r1.metrics, k), rel=1e-6, abs=1e-12), k
        assert r1.metrics.worst == r2.metrics.worst
        if r1.introduced is not None:
            assert r2.introduced.max_abs == pytest.approx(r1.introduced.max_abs, rel=1e-6, abs=1e-12)


def float_pairs(res) -> int:
    """Main-graph pairs whose A tensor is not known to be other than float32: the one-run diff measures
    them all (and small pairs of other types too, summed on the host); If-branch pairs go through the
    separate runs, which read a branch that did not run as no value."""
    from onnxprobe.graph.shapes import value_types

    types = value_types(res.a.model.proto)

    def other(name: str) -> bool:
        t = types.get(name)
        return t is not None and t.HasField("tensor_type") and t.tensor_type.elem_type not in (0, onnx.TensorProto.FLOAT)

    return sum(1 for r in res.results if not other(r.pair.a.probe) and not r.pair.a.scope)


FUSED_METRICS = ("max_abs", "mean_abs", "rmse", "cosine", "sqnr_db", "max_rel", "allclose_excess", "b_absmax")
INTRODUCED_METRICS = ("max_abs", "mean_abs", "rmse", "cosine", "sqnr_db")  # what an IntroducedError holds


def assert_same_metrics(host, fused, rel: float = 1e-6) -> None:
    """In-graph metrics against the host's float64 ones: the same pairs, numbers within float32 rounding
    of the sums, the same worst element, the same verdicts; introduced error likewise."""
    assert [r.pair.b.name for r in fused.results] == [r.pair.b.name for r in host.results]
    assert [r.passed for r in fused.results] == [r.passed for r in host.results]
    for r1, r2 in zip(host.results, fused.results):
        for m1, m2 in ((r1.metrics, r2.metrics), (r1.introduced, r2.introduced)):
            assert (m1 is None) == (m2 is None), r1.pair.b.name
            if m1 is None:
                continue
            for k in (FUSED_METRICS if m1 is r1.metrics else INTRODUCED_METRICS):
                if k == "allclose_excess" and r1.tolerance.metric != "allclose":
                    continue  # only allclose reads it; the in-graph row leaves it out otherwise
                v1, v2 = getattr(m1, k), getattr(m2, k)
                if k == "sqnr_db" and math.isinf(v1):
                    assert v2 == v1
                elif k == "sqnr_db":  # in dB: float32 rounding of the sums is ~1e-6 dB
                    assert v2 == pytest.approx(v1, abs=1e-4), (r1.pair.b.name, k)
                elif k == "allclose_excess":  # |d| - rtol |b|: the row's float32 rounds each term (the host's is
                    # float64), by ~6e-8 of |d| and rtol |b|, which the difference can cancel down to
                    scale = m1.max_abs + r1.tolerance.rtol * m1.b_absmax
                    assert v2 == pytest.approx(v1, rel=rel, abs=rel * scale), (r1.pair.b.name, k)
                else:
                    assert v2 == pytest.approx(v1, rel=rel, abs=1e-9 if k == "cosine" else 1e-12), (r1.pair.b.name, k)
            assert m1.exact == m2.exact
            if not m1.exact:
                assert m1.worst == m2.worst or m1.max_abs == pytest.approx(m2.max_abs, rel=1e-6)


@pytest.mark.parametrize("name", SAMPLE_NAMES)
@pytest.mark.parametrize("on_host", [True, False], ids=["small-on-host", "all-in-graph"])
def test_in_graph_metrics_equal_host_metrics_on_every_sample(name, tmp_path, on_host, monkeypatch):
    """One run of both models (metrics and introduced error in the graph) against separate runs measured
    on the host in float64, on each sample model against a copy with perturbed weights."""
    if not on_host:
        monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (0, 0))
    summed = _count_host_sums(monkeypatch)
    src = sample_path(name)
    try:
        pert = bench_models().perturbed(src, tmp_path / "p.onnx")
    except ValueError:
        pytest.skip(f"{name} has no weight to perturb")
    kw = dict(selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))
    try:
        host = api.diff(pert, src, fuse=False, **kw)
    except OnnxProbeError as e:
        pytest.skip(f"{name}: not a diffable pair ({e})")
    summed.clear()
    fused = api.diff(pert, src, fuse=True, **kw)
    assert not any("one-run diff failed" in n for n in fused.notes), fused.notes
    assert fused.in_graph >= float_pairs(fused) and host.in_graph == 0  # really measured in the graph
    assert bool(summed) == on_host  # the small pairs' values left the one run and were summed on the host
    assert_same_metrics(host, fused)


def _count_host_sums(monkeypatch) -> list:
    """Counts the pairs the one-run diff sums on the host (its small pairs)."""
    import onnxprobe.compare.fused as fused

    calls, real = [], fused.pair_sums_many
    monkeypatch.setattr(fused, "pair_sums_many", lambda pairs, *a, **k: calls.extend([1] * len(pairs)) or real(pairs, *a, **k))
    return calls


@pytest.mark.parametrize("on_host", [True, False], ids=["small-on-host", "all-in-graph"])
@pytest.mark.parametrize("kind", QUANT_KINDS)
def test_in_graph_metrics_equal_host_metrics_on_quantized_pairs(kind, qdir, on_host, monkeypatch):
    if not on_host:
        monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (0, 0))
    q = quantize("cnn", kind, qdir)
    kw = dict(selection=api.Selection(all=True), config=api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays=sample_feeds("cnn")))
    host = api.diff(q, sample_path("cnn"), fuse=False, **kw)
    fused = api.diff(q, sample_path("cnn"), fuse=True, **kw)
    assert not any("one-run diff failed" in n for n in fused.notes), fused.notes
    assert fused.in_graph >= float_pairs(fused) and host.in_graph == 0  # really measured in the graph
    assert_same_metrics(host, fused)


def test_keeping_one_layer_in_fp32_matches_a_hand_made_model(qdir):
    """keep_in_fp32 splices B's float nodes into the QDQ model; here the same model is built by hand (the
    Conv reads the fp32 weights, the dropped Relu comes back, the output's Q/DQ pair goes) and both must
    give the same outputs."""
    from onnxprobe.compare.sensitivity import keep_in_fp32

    q = quantize("cnn", "qdq", qdir)
    feeds = sample_feeds("cnn")
    res = api.diff(q, sample_path("cnn"), selection=api.Selection(all=True), config=api.RunConfig(device="cpu"),
                   inputs=api.InputSpec(arrays=feeds), fp32_sensitivity=20)  # every QDQ layer of this small CNN
    b_to_a = {p.b.name: p.a.name for p in res.matching.pairs if p.b.kind == "float"}
    ours = keep_in_fp32(res.a.model.proto, res.b.model.proto, "relu2_out", b_to_a)

    # by hand
    qm, fm = onnx.load(str(q)), onnx.load(str(sample_path("cnn")))
    fw = {i.name: i for i in fm.graph.initializer}
    g = qm.graph
    conv = next(n for n in g.node if n.op_type == "Conv" and n.output[0] == "relu2_out")
    for k, name in ((1, "conv2.weight"), (2, "conv2.bias")):
        t = onnx.TensorProto()
        t.CopyFrom(fw[name])
        t.name = f"hand.{name}"
        g.initializer.append(t)
        conv.input[k] = t.name
    conv.output[0] = "hand.conv2_out"
    qn = next(n for n in g.node if n.op_type == "QuantizeLinear" and n.input[0] == "relu2_out")
    dq = next(n for n in g.node if n.op_type == "DequantizeLinear" and n.input[0] == qn.output[0])
    for n in g.node:
        n.input[:] = ["relu2_out" if i == dq.output[0] else i for i in n.input]
    g.node.remove(qn)
    g.node.remove(dq)
    idx = list(g.node).index(conv)
    g.node.insert(idx + 1, helper.make_node("Relu", ["hand.conv2_out"], ["relu2_out"], name="hand.relu2"))

    def run(m):
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(["logits"], feeds)[0]

    np.testing.assert_allclose(run(ours), run(qm), rtol=1e-5, atol=1e-6)
    # and the report's numbers are what these outputs give
    ref = run(fm)
    s = next(x for x in res.sensitivity if x.layer == "relu2_out")
    d = run(qm).astype(np.float64) - ref
    assert s.output_sqnr_db_fp32 == pytest.approx(10 * np.log10((ref.astype(np.float64) ** 2).sum() / (d ** 2).sum()), abs=1e-3)
    assert res.sensitivity and all(np.isfinite(x.output_sqnr_db_fp32) for x in res.sensitivity)


def test_a_one_run_diff_that_fails_says_why_in_full_and_the_rest_is_measured(monkeypatch):
    # QA: the note kept 160 characters of onnxruntime's first line, which ends in the reason after a long
    # source path; the reason was cut off
    from onnxprobe.compare import measure
    from onnxprobe.errors import ExecutionError

    why = "onnxruntime: Non-zero status code returned while running Foo node. Status Message: /" + "x" * 200 + " the reason"

    def failing(*args, **kwargs):
        raise ExecutionError(why + "\nsecond line")

    monkeypatch.setattr(measure, "run", failing)
    res = api.diff(sample_path("mlp"), sample_path("mlp"), config=api.RunConfig(device="cpu"),
                   inputs=api.InputSpec(arrays=sample_feeds("mlp")))
    note = next(n for n in res.notes if "one-run diff failed" in n)
    assert note == f"the one-run diff failed ({why}); measured in separate runs"
    assert res.verdict()[0] == "pass" and res.in_graph == 0 and res.compared == len(res.results)


def test_a_mapped_float_tensor_of_a_qdq_model_says_it_is_compared_quantized(qdir):
    """--map naming a float tensor of a QDQ model pairs its quantized value (the Q -> DQ copy the next layer
    reads, as the default matching does); the pair's reason says so, and the values compared are that copy's."""
    q = quantize("cnn", "qdq", qdir)
    res = api.diff(q, sample_path("cnn"), selection=api.Selection(all=True), config=api.RunConfig(device="cpu"),
                   inputs=api.InputSpec(arrays=sample_feeds("cnn")), user_map={"conv1_out": "conv1_out"})
    (r,) = [r for r in res.results if r.pair.strategy == "map"]
    assert r.pair.a.name != "conv1_out" and r.pair.a.key == "conv1_out"
    assert f"A's 'conv1_out' compared as {r.pair.a.name!r}" in r.pair.reason
    feeds = sample_feeds("cnn")
    va = _run_with_outputs(q, [r.pair.a.name], feeds)[r.pair.a.name].astype(np.float64)
    vb = _run_with_outputs(sample_path("cnn"), ["conv1_out"], feeds)["conv1_out"].astype(np.float64)
    assert r.metrics.max_abs == pytest.approx(np.abs(va - vb).max(), rel=1e-6)
    plain = api.diff(sample_path("cnn"), sample_path("cnn"), config=api.RunConfig(device="cpu"), user_map={"conv1_out": "conv1_out"})
    (p,) = [r for r in plain.results if r.pair.strategy == "map"]
    assert p.pair.reason == "given in --map"  # a float model's own tensor: nothing to say


def test_map_files_that_are_not_maps_say_what_is_wrong(tmp_path):
    """--map whose value is a list said "expected a dict ..., got dict"; --map - said "(FileNotFoundError)";
    JSON that does not parse says where."""
    bad = tmp_path / "m.json"
    bad.write_text('{"a": [1, 2]}')
    broken = tmp_path / "b.json"
    broken.write_text("{bad")
    for arg, needle in ((bad, "an entry 'a': [1, 2] that is not two names"), ("-", "no such JSON file"), (broken, "not JSON (")):
        r = runner.invoke(app, ["diff", str(sample_path("mlp")), str(sample_path("mlp")), "--map", str(arg)])
        assert r.exit_code == 2 and needle in r.stderr and r.stderr.count("\n") == 1, r.output


def test_a_tensor_beside_an_unmatched_one_of_a_is_not_called_folded(tmp_path):
    """A: x -> Neg a2 -> Identity ya; B: x -> Abs b2 -> Identity yb. The outputs pair; b2 is not "folded into
    Identity 'yb' in A" (A has its own a2 there): it is unmatched, its values compared as yb, which the Identity
    keeps (a copy)."""
    def chain(op, mid, out):
        return make_model([helper.make_node(op, ["x"], [mid], name=f"n_{mid}"), helper.make_node("Identity", [mid], [out], name=f"o_{out}")],
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])], [helper.make_tensor_value_info(out, TensorProto.FLOAT, [4, 4])])

    res = api.diff(chain("Neg", "a2", "ya"), chain("Abs", "b2", "yb"), selection=api.Selection(all=True))
    why = {u.obs.name: (u.cause, u.reason) for u in res.matching.unmatched_b}
    assert why["b2"][0] == "copy" and "'yb'" in why["b2"][1] and "folded" not in why["b2"][1], why


@pytest.mark.parametrize("metric, flag, header", [("rmse", "--atol", "RMSE"), ("mean_abs", "--atol", "mean|a-b|"),
                                                  ("max_rel", "--rtol", "max rel")])
def test_the_judged_metric_is_a_column(qdir, metric, flag, header):
    """--metric rmse / mean_abs / max_rel judges each pair by a number the default columns do not show:
    the table shows it beside the verdict (and --columns can ask for it under any metric); its CSV values
    are the JSON's, which the metrics tests check against numpy."""
    q = str(quantize("cnn", "qdq", qdir))
    args = ["diff", q, str(sample_path("cnn")), "--all", "--device", "cpu", "--metric", metric, flag, "0.05"]
    table = runner.invoke(app, args, env={"COLUMNS": "200"})
    head = next(line for line in table.stdout.splitlines() if line.lstrip().startswith("#"))  # the column headers
    assert table.exit_code in (0, 1) and header in head, table.output
    data = json.loads(runner.invoke(app, [*args, "--json", "-"]).stdout)
    csv = runner.invoke(app, [*args, "--format", "csv", "--columns", f"index,{metric},pass"]).stdout.splitlines()
    assert csv[0] == f"index,{metric},pass"
    for line, p in zip(csv[1:], data["pairs"]):
        # float() reads JSON's "inf" too (max_rel where B is 0 and A is not)
        assert float(line.split(",")[1]) == pytest.approx(float(p[metric]), rel=1e-12) and p["metric"] == metric
    other = runner.invoke(app, ["diff", q, str(sample_path("cnn")), "--device", "cpu", "--columns", f"index,{metric}"])
    assert other.exit_code in (0, 1) and header in other.stdout, other.output


def test_pairs_not_compared_are_counted_apart_and_the_reference_flag_is_named(tmp_path):
    """A pair of empty tensors is a pair, not a comparison: the HTML header counts it apart (it read "3
    compared" for 1 measured); a bad --vs-opt-level is named as that flag, not as --opt-level."""
    from onnxprobe.report.diff import diff_dict
    from onnxprobe.report.html import _facts

    m = empty_slice_model()
    onnx.save(m, str(tmp_path / "a.onnx"))
    onnx.save(m, str(tmp_path / "b.onnx"))
    res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))
    d = diff_dict(res)
    assert len(d["pairs"]) == 3 and d["compared"] == 1
    line = dict((k, t) for k, t, _ in _facts("diff", d, None))["pairs"]
    assert line.startswith("3 (1 compared, 0 failing, 2 not compared)"), line
    r = runner.invoke(app, ["diff", str(tmp_path / "a.onnx"), "--vs-opt-level", "bogus"])
    assert r.exit_code == 2 and "--vs-opt-level" in r.stderr and "(--opt-level)" not in r.stderr


def test_saved_activations_are_compared_on_the_inputs_saved_with_them(tmp_path):
    """--vs-npz with the model's input saved beside the activations: A runs on that input (random data
    compared other computations, every pair failing, and the input read as a tensor with no counterpart);
    an input the user gives still wins. Oracle: the activations are plain onnxruntime's own."""
    feeds = sample_feeds("cnn")
    names = [n.output[0] for n in onnx.load(str(sample_path("cnn"))).graph.node]
    saved = {**_run_with_outputs(sample_path("cnn"), names, feeds), **feeds}
    npz = tmp_path / "acts.npz"
    np.savez(npz, **saved)
    res = api.diff(sample_path("cnn"), vs_npz=str(npz), selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))
    assert res.results and all(r.metrics is not None and r.metrics.exact for r in res.results)
    assert not res.matching.unmatched_b and any("saved in acts.npz" in n for n in res.notes)
    other = {k: v + 1 for k, v in feeds.items()}
    res = api.diff(sample_path("cnn"), vs_npz=str(npz), selection=api.Selection(all=True), config=api.RunConfig(device="cpu"),
                   inputs=api.InputSpec(arrays=other))
    assert not any(r.metrics.exact for r in res.results if r.metrics is not None)


def test_saved_activations_without_inputs_say_what_a_ran_on(tmp_path):
    """--vs-npz with an .npz holding no model input (what layers --save writes): A ran on its default
    seeded inputs, and a snapshot saved with --seed 7 read FAIL everywhere with no hint (QA). A note names
    the inputs that were random and the seed; with the snapshot's own seed every pair is exact. Oracle: the
    activations are plain onnxruntime's own, on the inputs of seed 7."""
    from onnxprobe.runtime.feeds import make_feeds

    feeds = make_feeds(onnx.load(str(sample_path("mlp"))), api.InputSpec(seed=7)).values
    names = [n.output[0] for n in onnx.load(str(sample_path("mlp"))).graph.node]
    npz = tmp_path / "snap.npz"
    np.savez(npz, **_run_with_outputs(sample_path("mlp"), names, feeds))  # no inputs in it
    res = api.diff(sample_path("mlp"), vs_npz=str(npz), selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))
    note = [n for n in res.notes if "seeded random" in n]
    assert note and "seed (--seed) 0" in note[0] and "give the seed or the input arrays" in note[0] and "'x'" in note[0] and "snap.npz" in note[0], res.notes
    res = api.diff(sample_path("mlp"), vs_npz=str(npz), selection=api.Selection(all=True), config=api.RunConfig(device="cpu"),
                   inputs=api.InputSpec(seed=7))
    assert res.results and all(r.metrics.exact for r in res.results)
    r = runner.invoke(app, ["diff", str(sample_path("mlp")), "--vs-npz", str(npz)])
    assert "seeded random data (--seed 0) for 'x'" in r.output, r.output
    np.savez(npz, **_run_with_outputs(sample_path("mlp"), names, feeds), **feeds)  # with its inputs: no such note
    res = api.diff(sample_path("mlp"), vs_npz=str(npz), config=api.RunConfig(device="cpu"))
    assert not any("seeded random" in n for n in res.notes), res.notes


def test_saved_activations_are_read_once(tmp_path, monkeypatch):
    """--vs-npz reads the file once: A's saved inputs and side B's arrays come from the same read (it
    was read twice, the second time for B)."""
    import importlib

    api_diff = importlib.import_module("onnxprobe.api.diff")  # the module: onnxprobe.api.diff is the function

    feeds = sample_feeds("cnn")
    npz = tmp_path / "acts.npz"
    np.savez(npz, **feeds)
    reads = []
    real = api_diff.read_arrays
    monkeypatch.setattr(api_diff, "read_arrays", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    res = api.diff(sample_path("cnn"), vs_npz=str(npz), config=api.RunConfig(device="cpu"))
    assert reads == [str(npz)], reads
    assert any("saved in acts.npz" in n for n in res.notes)


def test_a_reference_at_the_same_opt_level_says_so():
    """--vs-opt-level naming A's own level compares the model with itself run the same way: a note says
    so (it read as a check of onnxruntime's optimizations); another level has no such note."""
    same = api.diff(sample_path("cnn"), vs_opt_level="off", config=api.RunConfig(device="cpu"))
    assert any("is A's own opt-level" in n for n in same.notes)
    other = api.diff(sample_path("cnn"), vs_opt_level="all", config=api.RunConfig(device="cpu"))
    assert not any("is A's own opt-level" in n for n in other.notes)


def _output_y_fails(paths: dict, x: np.ndarray):
    """The diff of models a and b of ``paths`` on ``x``: their output y is compared and fails, by the max
    |a-b| of onnxruntime's plain outputs (the oracle, in numpy float64)."""
    ya, yb = (ort.InferenceSession(str(paths[k]), providers=["CPUExecutionProvider"]).run(["y"], {"x": x})[0] for k in "ab")
    res = api.diff(paths["a"], paths["b"], config=api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays={"x": x}))
    (row,) = [r for r in res.results if r.pair.a.name == "y"]
    assert row.metrics.max_abs == np.abs(ya.astype(np.float64) - yb).max() > 0 and not row.passed
    return res


def test_an_integer_output_of_its_own_is_compared(tmp_path):
    """A uint8 output made by a Cast (no quantizer behind it, so no scale) is compared as its integers, as
    int32 and bool are: it was left out of both sides, with no unmatched entry, and "outputs pass" held
    for outputs that differ. Oracle: onnxruntime's plain outputs, compared in numpy."""
    x = np.random.default_rng(0).random((2, 8), dtype=np.float32)
    paths = {}
    for key, k in (("a", 300.0), ("b", 100.0)):
        g = helper.make_graph([helper.make_node("Mul", ["x", "k"], ["r"], name="mul"),
                               helper.make_node("Cast", ["r"], ["y"], to=TensorProto.UINT8, name="cast")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [2, 8])],
                              [numpy_helper.from_array(np.array(k, np.float32), "k")])
        paths[key] = tmp_path / f"{key}.onnx"
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), paths[key])
    _output_y_fails(paths, x)
    same = api.diff(paths["b"], paths["b"], config=api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays={"x": x}))
    assert [r.pair.a.name for r in same.results] == ["y"] and same.results[0].metrics.exact


def test_flags_a_runtime_does_not_take_are_refused_and_self_references_noted():
    """--opt-level is onnxruntime's: with another runtime it was accepted and recorded, doing nothing;
    onnx.reference on cuda ran on the CPU. A reference that is A run the same way (--vs-runtime of A's
    runtime, --vs-device of A's device) gets a note, as --vs-opt-level does."""
    from onnxprobe.errors import UsageError

    with pytest.raises(UsageError, match="does not take one"):
        api.layers(sample_path("cnn"), config=api.RunConfig(device="cpu", opt_level="all"), runtime="reference")
    with pytest.raises(UsageError, match="does not take one"):
        api.diff(sample_path("cnn"), vs_opt_level="all", runtime="reference", config=api.RunConfig(device="cpu"))
    with pytest.raises(UsageError, match="onnx.reference runs on the CPU"):
        api.layers(sample_path("cnn"), config=api.RunConfig(device="cuda"), runtime="reference")
    same = api.diff(sample_path("cnn"), vs_runtime="ort", config=api.RunConfig(device="cpu"))
    assert any("is A's own runtime" in n for n in same.notes)
    same = api.diff(sample_path("cnn"), vs_device="cpu", config=api.RunConfig(device="cpu"))
    assert any("is A's own device" in n for n in same.notes)
    assert not any("give --device for A" in n for n in same.notes)  # A's device given already: no hint to give it
    same = api.diff(sample_path("cnn"), vs_device="cpu")  # A's device "auto" is the CPU here: the same run (QA)
    assert any("is A's own device" in n for n in same.notes) == (same.a.runner.device == "cpu")
    assert any("give --device for A" in n for n in same.notes) == (same.a.runner.device == "cpu")
    other = api.diff(sample_path("cnn"), vs_runtime="reference", config=api.RunConfig(device="cpu"))
    assert not any("own runtime" in n for n in other.notes)


def test_unmatched_tensors_outside_the_selection_are_not_listed_as_selected(tmp_path):
    """A's tensor with no counterpart in B, outside --op Relu: it was listed (and counted) as unmatched,
    marked "selected": true; now the JSON marks it not selected and the footer counts the selection's."""
    f = (lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]))
    a = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Neg", ["r"], ["t"], name="neg"),
                           helper.make_node("Neg", ["t"], ["y"], name="neg2")], "a", [f("x")], [f("y")])
    b = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Identity", ["r"], ["y"], name="id")],
                          "b", [f("x")], [f("y")])
    for g, name in ((a, "a"), (b, "b")):
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / f"{name}.onnx")
    r = runner.invoke(app, ["diff", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--op", "Relu", "--json", "-"])
    d = json.loads(r.stdout)
    assert [u["selected"] for u in d["unmatched_a"] if u["name"] == "t"] == [False], d["unmatched_a"]
    r = runner.invoke(app, ["diff", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--op", "Relu"], env={"COLUMNS": "200"})
    assert "unmatched: 0 in A" in r.stdout and "unmatched in A" not in r.stdout, r.stdout
    r = runner.invoke(app, ["diff", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--all"], env={"COLUMNS": "200"})
    assert "unmatched in A: t" in r.stdout, r.stdout


def test_include_constants_reaches_diff(tmp_path):
    """--include-constants made layers show a tensor computed from weights alone; diff left it out
    (observed only layers), and a Mul of two constants read as "a dynamic quantization scale"."""
    f = (lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]))
    g = helper.make_graph([helper.make_node("Mul", ["c1", "c2"], ["cfold"], name="cmul"),
                           helper.make_node("Add", ["x", "cfold"], ["y"], name="add")], "g", [f("x")], [f("y")],
                          [numpy_helper.from_array(np.full(4, 2.0, np.float32), "c1"),
                           numpy_helper.from_array(np.arange(4, dtype=np.float32), "c2")])
    p = tmp_path / "c.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), p)
    sel = api.Selection(names=("cfold",), include_constants=True)
    res = api.diff(p, p, selection=sel, config=api.RunConfig(device="cpu"))
    (row,) = [r for r in res.results if r.pair.a.name == "cfold"]
    assert row.metrics.exact
    # without it the selection holds nothing: refused, as layers refuses it (not the outputs alone, silently)
    with pytest.raises(UsageError, match="matches no tensor.*--include-constants"):
        api.diff(p, p, selection=api.Selection(names=("cfold",)), config=api.RunConfig(device="cpu"))


def test_a_qdq_output_is_paired_once(tmp_path):
    """A QDQ model whose output is DequantizeLinear(QuantizeLinear(x)) against itself: the output was
    paired twice (once as the quantizer's value, once as the output), counted twice in the pairs."""
    f = (lambda n, t=TensorProto.FLOAT: helper.make_tensor_value_info(n, t, [4]))
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                           helper.make_node("QuantizeLinear", ["r", "s", "z"], ["q"], name="q"),
                           helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq")], "g", [f("x")], [f("y")],
                          [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
                           numpy_helper.from_array(np.array(0, np.uint8), "z")])
    p = tmp_path / "qdq.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), p)
    res = api.diff(p, vs_opt_level="all", selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))
    outs = [r for r in res.results if r.pair.a.name == "y"]
    assert len(outs) == 1 and outs[0].pair.a.is_output and outs[0].metrics.exact, [(r.pair.a.name, r.pair.reason) for r in res.results]


def test_parallel_branches_listed_in_another_order_pair_by_their_weights(tmp_path):
    """Two 1x1 Convs of one shape on the same input, every tensor renamed and the nodes listed in the other
    order: alignment by op order paired Conv(x, W2) with Conv(x, W1) (false FAILs, "error starts at" a
    layer that is right, and an exact output with a damaged introduced error). The weights they read, the
    same values in both models, pair them; the Mul and Add behind follow their paired inputs."""
    rng = np.random.default_rng(0)
    w1, w2 = (numpy_helper.from_array(rng.standard_normal((4, 3, 1, 1)).astype(np.float32), n) for n in ("W1", "W2"))
    two = numpy_helper.from_array(np.array(2, np.float32), "two")

    def model(path, a, b, c, swap):
        n1, n2 = helper.make_node("Conv", ["x", "W1"], [a]), helper.make_node("Conv", ["x", "W2"], [b])
        m = make_model(([n2, n1] if swap else [n1, n2]) + [helper.make_node("Mul", [b, "two"], [c]),
                                                          helper.make_node("Add", [a, c], ["out"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                       [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 8, 8])], [w1, w2, two])
        onnx.save(m, path)
        return str(path)

    ref, ren = model(tmp_path / "ref.onnx", "ya", "yb", "yc", False), model(tmp_path / "ren.onnx", "p", "q", "r", True)
    res = api.diff(ren, ref, selection=api.Selection(all=True))
    pairs = {(r.pair.a.name, r.pair.b.name) for r in res.results}
    assert {("p", "ya"), ("q", "yb"), ("r", "yc"), ("out", "out")} == pairs, pairs
    assert all(r.passed and r.metrics.exact for r in res.results)
    assert not res.matching.unmatched_a and not res.matching.unmatched_b


def test_the_anchor_chain_is_a_longest_increasing_one():
    """match.align.monotonic (the anchors of the alignment) kept every chain, O(n^2) in time and memory
    (seconds at 8,000 pairs); its O(n log n) form gives a chain as long as brute force does."""
    import itertools
    import random

    from onnxprobe.match.align import monotonic as _monotonic

    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(0, 8)
        idx = list(zip(rng.sample(range(12), n), rng.sample(range(12), n)))
        best = max((len(c) for r in range(n + 1) for c in itertools.combinations(sorted(idx), r)
                    if all(x[1] < y[1] for x, y in zip(c, c[1:]))), default=0)
        got = _monotonic(idx)
        assert len(got) == best and set(got) <= set(idx)
        assert all(x[0] < y[0] and x[1] < y[1] for x, y in zip(got, got[1:]))


def test_fresh_names_are_the_same_with_the_remembered_suffixes():
    """graph.builder.Names remembers the suffix each base took (a pass adding thousands of one base tried
    '.1', '.2'... from the start each time); the names it gives are those a plain set gives."""
    from onnxprobe.graph.builder import Names, fresh_name

    plain, kept = {"a", "a.2", "b"}, Names({"a", "a.2", "b"})
    for base in ["a", "a", "b", "a", "c", "c", "a.1", "a"]:
        assert fresh_name(plain, base) == fresh_name(kept, base)
    assert plain == kept


def test_a_float16_model_against_its_float32_original(tmp_path):
    """diff fp16.onnx fp32.onnx was refused (input x: dtype float16 in A but float32 in B), the usual check
    after a conversion to half precision. Both get the same values (ones float16 holds exactly), each in
    its own type; the numbers are numpy's over what onnxruntime computes from them; the default criterion
    is the half-precision one, in either order."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 8)).astype(np.float32)
    paths = {}
    for name, elem, dt in (("h16", TensorProto.FLOAT16, np.float16), ("h32", TensorProto.FLOAT, np.float32)):
        m = make_model([helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"), helper.make_node("Relu", ["m"], ["y"], name="relu")],
                       [helper.make_tensor_value_info("x", elem, [2, 8])], [helper.make_tensor_value_info("y", elem, [2, 8])],
                       [numpy_helper.from_array(w.astype(dt), "W")])
        paths[name] = tmp_path / f"{name}.onnx"
        onnx.save(m, paths[name])
    x = rng.standard_normal((2, 8)).astype(np.float32)
    x16 = x.astype(np.float16)  # A's type; B gets the same values in float32
    res = api.diff(paths["h16"], paths["h32"], inputs=api.InputSpec(arrays={"x": x16}), selection=api.Selection(all=True))
    assert any("different float types" in n for n in res.notes)
    assert res.criterion.startswith("SQNR >= 20 dB") and "float16" in res.criterion, res.criterion
    a = _run_with_outputs(paths["h16"], ["m"], {"x": x16})["m"].astype(np.float64)
    b = _run_with_outputs(paths["h32"], ["m"], {"x": x16.astype(np.float32)})["m"].astype(np.float64)
    (r,) = [r for r in res.results if r.pair.a.name == "m"]
    assert r.metrics.sqnr_db == pytest.approx(10 * np.log10((b ** 2).sum() / ((a - b) ** 2).sum()), rel=1e-6)
    assert all(r.passed for r in res.results)
    back = api.diff(paths["h32"], paths["h16"], inputs=api.InputSpec(arrays={"x": x}))  # rounded to float16 for both
    assert back.criterion.startswith("SQNR") and all(r.passed for r in back.results)
    (r,) = [r for r in back.results if r.pair.a.name == "m"]
    assert r.metrics.sqnr_db == pytest.approx(10 * np.log10((a ** 2).sum() / ((a - b) ** 2).sum()), rel=1e-6)
    with pytest.raises(api.UsageError, match="float type"):
        api.diff_grad(paths["h16"], paths["h32"])
    # values float16 cannot hold: both models ran on Inf (the user's 1e6 said nowhere, a numpy warning leaked, and
    # one finite value left among them passed): one clear error, no warning
    big = x.copy()
    big[1] = 1e6
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(api.UsageError, match=r"input 'x' holds 8 value\(s\) beyond float16's range .* model \(B\)"):
            api.diff(paths["h32"], paths["h16"], inputs=api.InputSpec(arrays={"x": big}))


def test_one_float16_model_run_two_ways_gets_the_half_criterion(tmp_path):
    """A float16 model on onnxruntime (which keeps float32 between the nodes it runs in float32) against
    onnx.reference (which rounds every tensor to float16) got the 60 dB float32 criterion of one model on two
    runtimes: fp16 rounding alone is about that, and a healthy model failed with exit code 1."""
    rng = np.random.default_rng(0)
    w = (0.3 * rng.standard_normal((64, 64))).astype(np.float16)
    nodes, prev = [], "x"
    for k in range(6):
        nodes += [helper.make_node("MatMul", [prev, "W"], [f"m{k}"]), helper.make_node("Tanh", [f"m{k}"], [f"t{k}"])]
        prev = f"t{k}"
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [4, 64])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [4, 64])], [numpy_helper.from_array(w, "W")])
    onnx.save(m, tmp_path / "h.onnx")
    res = api.diff(tmp_path / "h.onnx", vs_runtime="reference", selection=api.Selection(all=True),
                   inputs=api.InputSpec(arrays={"x": rng.standard_normal((4, 64)).astype(np.float16)}))
    assert res.criterion.startswith("SQNR >= 20 dB") and "float16" in res.criterion, res.criterion


def test_the_default_criterion_of_a_quantized_pair_in_either_order(qdir):
    """A float model against its quantized copy (the order reversed) was judged by allclose, every layer
    FAIL: the quantized default, SQNR, whichever side is quantized, and for two quantized models."""
    q = quantize("cnn", "qdq", qdir)
    for a, b, what in ((q, sample_path("cnn"), "a quantized model against a float one"),
                       (sample_path("cnn"), q, "a float model against a quantized one"),
                       (q, quantize("cnn", "qoperator", qdir), "two quantized models")):
        res = api.diff(a, b)
        assert res.criterion.startswith("SQNR") and what in res.criterion, res.criterion


def test_a_quantized_model_against_itself_is_one_computation_not_a_float_model(qdir, tmp_path):
    """A quantized file diffed against itself, or against a byte copy at another path, run the same way: judged as one
    computation (allclose, every pair exact), in words that say so; the file given twice was worded "the default
    for float models", and its copy got the SQNR rule of two quantized models."""
    q = quantize("cnn", "qdq", qdir)
    copy = tmp_path / "copy.onnx"
    copy.write_bytes(Path(q).read_bytes())
    for b in (q, copy):
        res = api.diff(q, b)
        assert res.criterion.startswith("|a-b| <=") and "one model against itself or its copy" in res.criterion, res.criterion
        assert "float" not in res.criterion and res.verdict()[0] == "pass" and res.compared, res.criterion
        assert all(r.metrics.exact for r in res.results if r.metrics is not None)


def test_a_copy_of_a_big_quantized_model_is_one_only_while_every_weight_byte_is_the_same(tmp_path):
    """Weights of a file of 4 MiB or more stay there (read when compared): a copy is one model with it while every byte
    of its weights is the same; one int8 code changed makes it another quantized model (the SQNR rule)."""
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (1024, 4608), dtype=np.int8)  # 4.5 MiB of int8 weights, behind DequantizeLinear
    nodes = [helper.make_node("DequantizeLinear", ["W", "s"], ["Wf"]), helper.make_node("MatMul", ["x", "Wf"], ["y"])]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4608])],
                   [numpy_helper.from_array(w, "W"), numpy_helper.from_array(np.array(0.01, np.float32), "s")])
    onnx.save(m, tmp_path / "q.onnx")
    data = (tmp_path / "q.onnx").read_bytes()
    assert len(data) >= 4 << 20
    (tmp_path / "copy.onnx").write_bytes(data)
    w2 = w.copy()
    w2[1023, 4607] ^= 1  # the last code, another value
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array(w2, "W"))
    onnx.save(m, tmp_path / "other.onnx")
    same = api.diff(tmp_path / "q.onnx", tmp_path / "copy.onnx")
    other = api.diff(tmp_path / "q.onnx", tmp_path / "other.onnx")
    assert "one model against itself or its copy" in same.criterion, same.criterion
    assert other.criterion.startswith("SQNR") and "two quantized models" in other.criterion, other.criterion


def test_nothing_compared_counts_the_unmatched_as_the_footer_does(tmp_path):
    """Without --all the footer said "unmatched: 3 in A, 1 in B" and the error "(9 unmatched in A, 2 in B)":
    both count the selection's."""
    m = make_model([helper.make_node("Sigmoid", ["image"], ["a"]), helper.make_node("Tanh", ["a"], ["logits"])],
                   [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 3, 32, 32])])
    onnx.save(m, tmp_path / "u.onnx")
    r = CliRunner().invoke(app, ["diff", str(sample_path("cnn")), str(tmp_path / "u.onnx")], env={"COLUMNS": "200"})
    import re

    (foot,) = re.findall(r"unmatched: (\d+) in A, (\d+) in B", r.stdout)
    (err,) = re.findall(r"\((\d+) unmatched in A, (\d+) in B", r.stderr)
    assert r.exit_code == 1 and foot == err, r.output


def test_a_qdq_model_against_itself_fused_says_what_each_side_measured(qdir):
    """--vs-opt-level extended: the header said "simulated: the QDQ graph as written, not fused" though B ran
    onnxruntime's fused int8 kernels."""
    q = quantize("cnn", "qdq", qdir)
    res = api.diff(q, vs_opt_level="extended")
    assert res.measured.startswith("A simulated") and "B deployed" in res.measured, res.measured
    assert res.criterion.startswith("SQNR >= 10 dB") and "run two ways" in res.criterion


def test_an_exact_copy_with_parallel_branches_reordered_pairs_every_tensor_with_its_own(tmp_path):
    """Three branches Conv -> Mul(Unsqueeze(s)) -> Add(Unsqueeze(b)) -> Relu, then Concat; B the same model with
    every tensor renamed and the nodes listed in another valid order. The alignment by order paired Adds and
    Relus of different branches (false FAILs on an exact copy, 'error starts at' a right layer): every pair
    is now the tensor's own, exact."""
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(np.array([1, 2], np.int64), "ax")]
    branches = []
    for i in range(3):
        inits += [numpy_helper.from_array((rng.standard_normal((8, 8, 1, 1)) * 0.3).astype(np.float32), f"W{i}"),
                  numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), f"s{i}"),
                  numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), f"b{i}")]
        branches.append([helper.make_node("Conv", ["x", f"W{i}"], [f"c{i}"]), helper.make_node("Unsqueeze", [f"s{i}", "ax"], [f"us{i}"]),
                         helper.make_node("Mul", [f"c{i}", f"us{i}"], [f"m{i}"]), helper.make_node("Unsqueeze", [f"b{i}", "ax"], [f"ub{i}"]),
                         helper.make_node("Add", [f"m{i}", f"ub{i}"], [f"a{i}"]), helper.make_node("Relu", [f"a{i}"], [f"r{i}"])])
    concat = helper.make_node("Concat", ["r0", "r1", "r2"], ["y"], axis=1)
    io = ([helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx.save(make_model([n for br in branches for n in br] + [concat], *io, inits), tmp_path / "a.onnx")
    keep = {"x", "y", "ax"} | {i.name for i in inits}
    ren = lambda t: t if t in keep else f"t_{t}"  # noqa: E731
    step = {f"{op}{i}": branches[i][k] for i in range(3) for k, op in enumerate(("c", "us", "m", "ub", "a", "r"))}
    order = [step[t] for t in ("us1", "c2", "ub2", "us2", "m2", "a2", "ub1", "c0", "r2", "us0", "c1", "m0", "ub0", "a0", "m1",
                               "a1", "r0", "r1")]  # an order a random topological sort gave
    b_nodes = []
    for n in order + [concat]:
        c = onnx.NodeProto()
        c.CopyFrom(n)
        c.input[:] = [ren(t) for t in n.input]
        c.output[:] = [ren(t) for t in n.output]
        b_nodes.append(c)
    onnx.save(make_model(b_nodes, *io, inits), tmp_path / "b.onnx")
    res = api.diff(tmp_path / "a.onnx", tmp_path / "b.onnx", selection=api.Selection(all=True))
    pairs = {(r.pair.a.name, r.pair.b.name) for r in res.results}
    wrong = {(x, y) for x, y in pairs if y != ren(x)}
    assert not wrong and len(pairs) >= 13, (wrong, pairs)
    assert all(r.passed for r in res.results)


def test_a_node_reading_one_weight_more_still_pairs(tmp_path):
    """The legacy exporter's Gemm adds a zero bias (Identity of a merged zero parameter) that the dynamo
    exporter's leaves out: reading a weight more is no other function of the data. GPT-2's four c_proj
    Gemms and BERT's pooler went unmatched when any extra shared weight counted against a pair."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 6)).astype(np.float32), "W")
    z = numpy_helper.from_array(np.zeros(6, np.float32), "Z")
    io = ([helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6])])
    a = make_model([helper.make_node("Gemm", ["x", "W", "Z"], ["ga"]), helper.make_node("Relu", ["ga"], ["ra"]),
                    helper.make_node("Add", ["ra", "Z"], ["y"])], *io, [w, z])
    b = make_model([helper.make_node("Gemm", ["x", "W"], ["g"]), helper.make_node("Relu", ["g"], ["r"]),
                    helper.make_node("Add", ["r", "Z"], ["y"])], *io, [w, z])
    onnx.save(a, tmp_path / "a.onnx")
    onnx.save(b, tmp_path / "b.onnx")
    res = api.diff(tmp_path / "a.onnx", tmp_path / "b.onnx", selection=api.Selection(all=True))
    pairs = {(r.pair.a.name, r.pair.b.name) for r in res.results}
    assert ("ga", "g") in pairs and ("ra", "r") in pairs, pairs
    assert all(r.passed for r in res.results)


def test_a_quantized_reference_says_why_intro_db_is_empty(tmp_path):
    """A QDQ model against itself at another opt-level: B's tensors are quantized values, which get no
    introduced error; the column was empty without a word (QA). A float B gets intro dB and no note."""
    from quantize_fixtures import quantize

    q = str(quantize("cnn", "qdq", tmp_path))
    res = api.diff(q, vs_opt_level="all", config=api.RunConfig(device="cpu", cache=False))
    assert all(r.introduced is None for r in res.results)
    assert any("intro dB is not measured" in n and f"{len(res.results)} pair" in n for n in res.notes), res.notes
    res = api.diff(q, str(sample_path("cnn")), config=api.RunConfig(device="cpu", cache=False))
    assert any(r.introduced is not None for r in res.results) and not any("intro dB is not measured" in n for n in res.notes)


def test_the_fp32_sensitivity_lines_say_outputs_are_left_out_and_are_as_wide_as_their_names(tmp_path):
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app
    from quantize_fixtures import quantize

    q = str(quantize("cnn", "qdq", tmp_path))
    r = CliRunner().invoke(app, ["diff", q, str(sample_path("cnn")), "--fp32-sensitivity", "2"], env={"COLUMNS": "200"})
    assert r.exit_code in (0, 1), r.output
    assert "inner QDQ layers" in r.output and "model outputs" in r.output
    lines = [x for x in r.output.splitlines() if "intro" in x and "→" in x]
    assert len(lines) == 2 and all(re.match(r"  \S+  \S+  intro", x) for x in lines if len(x.split()[0]) == max(len(y.split()[0]) for y in lines)), lines


def test_vs_npz_array_of_strings_is_left_unmatched_with_a_reason(tmp_path):
    """Saved strings have no difference to measure: that tensor is unmatched, saying why; the rest compare."""
    from onnx.reference import ReferenceEvaluator

    x = sample_feeds("mlp")["x"]
    m = onnx.load(str(sample_path("mlp")))
    m.graph.output.append(helper.make_tensor_value_info("fc1_out", TensorProto.FLOAT, None))
    fc1 = ReferenceEvaluator(m).run(["fc1_out"], {"x": x})[0]  # the oracle: onnx.reference
    np.savez(tmp_path / "vs.npz", x=x, fc1_out=fc1, y=np.array(["a"] * 32).reshape(4, 8))
    r = runner.invoke(app, ["diff", str(sample_path("mlp")), "--vs-npz", str(tmp_path / "vs.npz"), "--json", "-"])
    assert "internal error" not in r.output and "Traceback" not in r.output, r.output
    d = json.loads(r.stdout)
    assert d["compared"] == 1 and all(p["passed"] for p in d["pairs"]), d["pairs"]
    y = next(u for u in d["unmatched_a"] if u["name"] == "y")
    assert "not numbers" in y["reason"]


def test_models_that_cannot_share_one_graph_say_they_ran_apart(tmp_path):
    """Two opsets: the one-run diff is not used; the JSON's in_graph 0 was explained nowhere (QA)."""
    for name, opset in (("a", 17), ("b", 18)):
        m = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], opset=opset)
        onnx.save(m, str(tmp_path / f"{name}.onnx"))
    res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), config=api.RunConfig(device="cpu", cache=False))
    assert any("run apart" in n and "17" in n and "18" in n for n in res.notes), res.notes
    assert res.verdict()[0] == "pass"


def test_vs_npz_entries_that_pair_with_nothing_are_counted_and_named(tmp_path):
    """.npz entries of names the model does not hold were in JSON's unmatched_b with selected false, and
    neither counted in "unmatched: N in B" nor named (QA). Counted and named with their reason; --op leaves
    them out, as it does every tensor of another op. Oracle: onnx.reference for the saved tensors."""
    from onnx.reference import ReferenceEvaluator

    x = sample_feeds("mlp")["x"]
    m = onnx.load(str(sample_path("mlp")))
    y = ReferenceEvaluator(m).run(["y"], {"x": x})[0]
    np.savez(tmp_path / "vs.npz", x=x, y=y, stray=np.ones(3, np.float32), other_out=np.zeros((4, 8), np.float32))
    r = runner.invoke(app, ["diff", str(sample_path("mlp")), "--vs-npz", str(tmp_path / "vs.npz")])
    assert r.exit_code == 0 and "unmatched: 3 in A, 2 in B" in r.output, r.output
    assert "stray (no counterpart in A)" in r.output and "other_out (no counterpart in A)" in r.output
    d = json.loads(runner.invoke(app, ["diff", str(sample_path("mlp")), "--vs-npz", str(tmp_path / "vs.npz"), "--json", "-"]).stdout)
    assert {u["name"] for u in d["unmatched_b"] if u["selected"]} == {"stray", "other_out"}
    r = runner.invoke(app, ["diff", str(sample_path("mlp")), "--vs-npz", str(tmp_path / "vs.npz"), "--op", "Gemm"])
    assert "0 in B" in r.output and "stray" not in r.output, r.output


@pytest.mark.parametrize("elem", [TensorProto.UINT8, TensorProto.INT8], ids=["uint8", "int8"])
def test_an_integer_tensor_moved_from_an_input_is_compared(tmp_path, elem):
    """A uint8/int8 tensor that an input's bytes make through moves alone (an image Transposed to NCHW) is
    compared as its integers, as one a Cast makes is: it was hidden on both sides as 'no known scale' (an
    input was taken for quantized codes), so two models whose uint8 outputs differ read "outputs pass",
    with nothing unmatched. Oracle: onnxruntime's plain outputs, compared in numpy."""
    dt = helper.tensor_dtype_to_np_dtype(elem)
    x = np.random.default_rng(0).integers(np.iinfo(dt).min, np.iinfo(dt).max, (1, 4, 4), endpoint=True).astype(dt)
    paths = {}
    for key, perm in (("a", [0, 1, 2]), ("b", [0, 2, 1])):
        g = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], perm=perm, name="tr"),
                               helper.make_node("Cast", ["x"], ["z"], to=TensorProto.FLOAT, name="cast")], "g",
                              [helper.make_tensor_value_info("x", elem, [1, 4, 4])],
                              [helper.make_tensor_value_info("y", elem, [1, 4, 4]),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4, 4])])
        paths[key] = tmp_path / f"{key}.onnx"
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), paths[key])
    res = _output_y_fails(paths, x)
    assert res.verdict()[0] == "fail"
    same = api.diff(paths["b"], paths["b"], config=api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays={"x": x}))
    assert sorted(r.pair.a.name for r in same.results) == ["y", "z"] and all(r.metrics.exact for r in same.results)


def test_the_unmatched_list_keeps_each_name_whole_beside_its_reason(tmp_path):
    """At 80 columns the 'unmatched in A:' line broke '/model/decoder/Identity_output_0' in two and glued each
    reason to the next name: one entry a line, names whole, the reason wrapped between words."""
    f = (lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]))
    names = ["/model/decoder/block_0/Identity_output_0", "/model/decoder/block_1/Identity_output_0"]
    a = helper.make_graph([helper.make_node("Relu", ["x"], [names[0]], name="r0"), helper.make_node("Neg", [names[0]], [names[1]], name="n1"),
                           helper.make_node("Neg", [names[1]], ["y"], name="n2")], "a", [f("x")], [f("y")])
    b = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r0")], "b", [f("x")], [f("y")])
    for g, name in ((a, "a"), (b, "b")):
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / f"{name}.onnx")
    for width in (50, 80):
        r = runner.invoke(app, ["diff", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--all"], env={"COLUMNS": str(width)})
        lines = r.stdout.splitlines()
        at = next(i for i, ln in enumerate(lines) if ln.startswith("unmatched in A"))
        tail = lines[at:]
        assert all(len(ln) <= width for ln in tail), tail
        for n in names:  # each name whole on a line that starts with it, its reason after it
            at = next((i for i, ln in enumerate(tail) if ln.strip() == n or ln.strip().startswith(f"{n} (")), None)
            assert at is not None and "(" in (tail[at] + tail[at + 1]), tail
