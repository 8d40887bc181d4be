"""`onnxprobe debug --script`: every command of the session on the sample models, checked against
independent oracles (onnx.reference.ReferenceEvaluator, numpy), plus the one-line error policy."""

from __future__ import annotations

import math
import re
import shlex

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from typer.testing import CliRunner

from conftest import make_model, nan_model, sample_path, sha256
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError
from onnxprobe.session import commands as C
from onnxprobe.session.parse import parse_selection, parse_slice, split
from onnxprobe.stats.conditions import parse_condition

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def Q(path) -> str:
    """``path`` as a script line writes it: quoted where it needs to be (a temporary folder with spaces in its
    path: the debugger splits a line as a shell does)."""
    return shlex.quote(str(path))


def script(tmp_path, models, lines, *extra, env=None, code=None):
    """Run lines through `onnxprobe debug MODEL [OTHER] --script FILE`; returns the result."""
    f = tmp_path / "session.txt"
    f.write_text("\n".join(lines) + "\n")
    r = runner.invoke(app, ["debug", *[str(m) for m in models], "--script", str(f), *map(str, extra)], env={**ENV, **(env or {})})
    if code is not None:
        assert r.exit_code == code, r.output
    assert "Traceback" not in r.output
    return r


def ok(tmp_path, models, lines, *extra):
    r = script(tmp_path, models, lines, *extra)
    assert r.exit_code == 0, r.output
    assert r.stderr == "", r.stderr
    return r.stdout


def reference(model_path, feeds) -> dict[str, np.ndarray]:
    return ReferenceEvaluator(onnx.load(str(model_path))).run(None, feeds, intermediate=True)


def table_rows(text: str, model_path) -> dict[str, list[str]]:
    """Rows of a `stats` (layers) table keyed by tensor name. The table may shorten a tensor name that
    starts with its node's name, so rows are keyed through the node column and the model."""
    out_of = {n.name: n.output[0] for n in onnx.load(str(model_path)).graph.node}
    rows = {}
    for line in text.splitlines():
        cells = line.split()
        if len(cells) >= 12 and cells[0].isdigit() and cells[1] in out_of:
            rows[out_of[cells[1]]] = cells
    return rows


def close(text: str, value: float, rel: float = 1e-3) -> bool:
    """A number printed with 4 significant digits agrees with the oracle."""
    got = float(text)
    return math.isclose(got, value, rel_tol=rel, abs_tol=1e-6)


def numbers(text: str) -> list[float]:
    return [float(t) for t in re.sub(r"[\[\]]", " ", text).split()]


# -- test models -------------------------------------------------------------------------------------------


def deep_nan_model() -> onnx.ModelProto:
    """x -> Relu -> Sub(5) -> Sqrt -> Mul(2) -> y: the Sqrt of a negative number is the first NaN."""
    five = numpy_helper.from_array(np.array(5.0, np.float32), "five")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    return make_model(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Sub", ["r", "five"], ["d"], name="shift"),
         helper.make_node("Sqrt", ["d"], ["s"], name="sqrt"),
         helper.make_node("Mul", ["s", "two"], ["y"], name="double")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [five, two],
    )


@pytest.fixture
def deep_nan(tmp_path):
    p = tmp_path / "deep_nan.onnx"
    onnx.save(deep_nan_model(), p)
    return p


@pytest.fixture
def nan_path(tmp_path):
    p = tmp_path / "nan.onnx"
    onnx.save(nan_model(), p)
    return p


# -- the model: info, nodes, node -----------------------------------------------------------------------


def test_info_describes_the_model(tmp_path):
    out = ok(tmp_path, [sample_path("cnn")], ["info"])
    m = onnx.load(str(sample_path("cnn")))
    assert f"{len(m.graph.node)} nodes" in out
    assert f"{len(m.graph.initializer)} weights" in out
    assert "image float32 [1x3x32x32]" in out and "logits float32 [1x10]" in out
    assert "IR 8" in out and "ai.onnx 17" in out and "Conv ×2" in out


def test_nodes_lists_in_topological_order_and_filters(tmp_path):
    out = ok(tmp_path, [sample_path("cnn")], ["nodes", "nodes op:Conv", "nodes 're*'"])
    names = [n.name for n in onnx.load(str(sample_path("cnn"))).graph.node]
    listed = [ln.split()[1] for ln in out.splitlines() if ln.split() and ln.split()[0].isdigit() and " of " not in ln]
    assert listed[: len(names)] == names
    rest = listed[len(names):]
    assert rest == ["conv1", "conv2", "relu1", "relu2"]
    assert f"{len(names)} of {len(names)} nodes" in out and "2 of 9 nodes" in out


def test_node_shows_inputs_outputs_attributes_producers_consumers(tmp_path):
    out = ok(tmp_path, [sample_path("cnn")], ["node bn1"])
    assert "#1/8 bn1  BatchNormalization" in out
    assert re.search(r"in 0\s+conv1_out\s+1x8x32x32\s+float32.*← conv1", out)
    assert re.search(r"in 1\s+bn1.scale\s+8\s+float32.*weight", out)
    assert re.search(r"out 0\s+bn1_out\s+1x8x32x32\s+float32.*→ relu1", out)
    assert "attributes: epsilon=" in out


def test_node_of_a_model_output_and_a_graph_input(tmp_path):
    out = ok(tmp_path, [sample_path("cnn")], ["node fc", "node conv1"])
    assert re.search(r"out 0\s+logits.*model output", out)
    assert re.search(r"in 0\s+image.*graph input", out)


# -- inputs, input, seed ----------------------------------------------------------------------------------


def test_input_from_value_file_and_random(tmp_path, nan_path):
    x = np.array([4.0, 0.5, 1.0, 2.0], np.float32)
    np.save(tmp_path / "x.npy", x)
    out = ok(tmp_path, [nan_path], ["inputs", f"input x {tmp_path / 'x.npy'}", "show x", "input x [1, 2, 3, 4]", "show x",
                                    "inputs", "input x random", "inputs"])
    assert "random (seed 0)" in out
    shown = [numbers(b.split("\n")[0]) for b in out.split("values:\n")[1:]]
    assert shown[0] == pytest.approx(x.tolist())
    assert shown[1] == pytest.approx([1, 2, 3, 4])
    assert "[1, 2, 3, 4]" in out  # the source column of `inputs`


def test_input_random_with_a_new_shape_fills_a_dynamic_dimension(tmp_path):
    r = script(tmp_path, [sample_path("dynamic_batch")], ["input x random 3x3x8x8", "run", "show y"], code=0)
    assert "input x: dimension 'batch' unknown, set to 1 (use input x random DIMS" in r.stderr  # at start
    out = r.stdout
    assert "float32 [3x3x8x8]" in out
    assert "output y [3x2]" in out and "float32 [3x2]" in out


def test_seed_changes_the_random_inputs_and_the_results(tmp_path):
    out = ok(tmp_path, [sample_path("mlp")], ["seed", "show x [0, :4]", "seed 7", "show x [0, :4]", "seed 0", "show x [0, :4]"])
    assert "seed 0 (random inputs: x)" in out and "seed 7 (random inputs: x)" in out
    blocks = [numbers(b.split("\n")[0]) for b in out.split("→ [4]:\n")[1:]]
    assert blocks[0] != blocks[1] and blocks[0] == blocks[2]
    assert all(0 <= v < 1 for b in blocks for v in b)  # seeded floats in [0, 1)


def test_inputs_from_an_npz(tmp_path):
    np.savez(tmp_path / "all.npz", x=np.full((2, 4), 0.5, np.float32), n=np.array(2, np.int64), cond=np.array(False))
    out = ok(tmp_path, [sample_path("control_flow")], [f"inputs {Q(tmp_path / 'all.npz')}", "show cond", "show n"])
    assert f"from {tmp_path / 'all.npz'}" in out
    assert re.search(r"values:\nFalse", out) and re.search(r"values:\n2\b", out)


def test_bad_input_is_one_line_and_leaves_the_inputs_as_they_were(tmp_path, nan_path):
    r = script(tmp_path, [nan_path], ["input x [1, 2, 3, 4]", "input x [1, 2]", "input nope 3", "show x"], code=1)
    errs = r.stderr.strip().splitlines()
    assert len(errs) == 2
    assert errs[0].startswith("onnxprobe: error: line 2: input x") and "dimension 0 must be 4" in errs[0]
    assert errs[1].startswith("onnxprobe: error: line 3: unknown input name 'nope'")
    assert numbers(r.stdout.split("values:\n")[1].split("\n")[0]) == [1, 2, 3, 4]


# -- probes -----------------------------------------------------------------------------------------------


def test_probe_add_rm_list_clear(tmp_path):
    out = ok(tmp_path, [sample_path("mlp")], [
        "probe list", "probe add op:Relu,Tanh", "probe list", "probe rm --op Tanh", "probe add 'fc3*'",
        "probe list", "probe clear", "probe list"])
    lists = [[ln.split()[3] for ln in block.splitlines() if ln.split() and ln.split()[0].isdigit()]
             for block in re.split(r"^\d+ probes$", out, flags=re.M)]
    assert "added 2 probes" in out and "removed 1 probe " in out
    default = [r.ref.name for r in api.plan(api.load(sample_path("mlp"))).probes]
    assert lists[0] == default
    assert lists[1] == sorted(default + ["relu1_out", "tanh2_out"], key=["fc1_out", "relu1_out", "fc2_out", "tanh2_out", "fc3_matmul", "fc3_out", "y"].index)
    assert "tanh2_out" not in lists[2] and "relu1_out" in lists[2] and "fc3_out" in lists[2]
    assert "removed all" in out and out.rstrip().endswith("no probes (probe add SELECTION)")


def test_probe_selection_that_matches_nothing_is_an_error(tmp_path):
    r = script(tmp_path, [sample_path("mlp")], ["probe add op:Softmax", "probe frob"], code=1)
    errs = r.stderr.strip().splitlines()
    assert "no node of the model has this op type" in errs[0] and "unknown subcommand 'frob'" in errs[1]


# -- run, stats -------------------------------------------------------------------------------------------


def test_run_reruns_only_what_changed(tmp_path, nan_path):
    out = ok(tmp_path, [sample_path("mlp")], [
        "run", "run", "probe add op:Tanh", "run", "input x random 4x16", "seed 3", "run", "device cpu", "run"])
    lines = [ln for ln in out.splitlines() if ln.startswith(("ran ", "up to date"))]
    assert lines[0].startswith("ran ") and "(first run)" in lines[0]
    assert lines[1].startswith("up to date")
    assert lines[2].startswith("ran 1 tensor, ") and "(1 new tensor)" in lines[2]
    assert "(inputs changed)" in lines[3]
    assert lines[4].startswith("up to date")


def test_stats_agree_with_reference_evaluator(tmp_path):
    x = np.random.default_rng(11).standard_normal((4, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = ok(tmp_path, [sample_path("mlp")], [f"input x {tmp_path / 'x.npy'}", "stats --all"])
    expected = reference(sample_path("mlp"), {"x": x})
    rows = table_rows(out, sample_path("mlp"))
    assert len(rows) == 7
    for name, cells in rows.items():
        ref = expected[name].astype(np.float64)
        assert cells[4] == "x".join(map(str, ref.shape)), name
        for col, v in ((6, ref.min()), (7, ref.max()), (8, ref.mean()), (9, ref.std())):
            assert math.isclose(float(cells[col]), v, rel_tol=5e-4, abs_tol=0), (name, cells[col], v)
        assert cells[10:12] == ["0", "0"]


def test_stats_of_a_selection_and_of_the_second_model(tmp_path):
    out = ok(tmp_path, [sample_path("cnn"), sample_path("cnn")], ["stats op:Relu", "stats --model b op:MaxPool"])
    first, second = out.split("[a] cnn.onnx")
    assert set(table_rows(first, sample_path("cnn"))) == {"relu1_out", "relu2_out"}
    assert set(table_rows(second, sample_path("cnn"))) == {"pool1_out"}
    assert "pool1" in second and "[b] cnn.onnx · 1 tensor" in second


def test_stats_of_control_flow_reports_branches_not_taken(tmp_path):
    out = ok(tmp_path, [sample_path("control_flow")], ["input n 3", "input cond true", "stats --all"])
    assert "not run" in out  # the else branch
    assert "trace" in out and "3x1" in out


# -- show, save -------------------------------------------------------------------------------------------


def test_show_prints_statistics_values_and_histogram(tmp_path, nan_path):
    out = ok(tmp_path, [nan_path], ["input x [1, -2, 3, 0]", "show logx"])
    with np.errstate(all="ignore"):
        expected = np.log(np.array([1, -2, 3, 0], np.float32))
    assert "logx  from node log (Log) · float32 [4]" in out
    assert "NaN 1 · Inf 1" in out
    values = numbers(out.split("values:\n")[1].split("\n")[0])
    np.testing.assert_allclose(values, expected, rtol=5e-4)  # four significant digits, as the statistics
    assert "2 finite values; 2 NaN/Inf not drawn" in out


def test_show_slice_and_histogram_counts(tmp_path):
    x = np.random.default_rng(5).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "img.npy", x)
    out = ok(tmp_path, [sample_path("cnn")], [f"input image {tmp_path / 'img.npy'}", "show relu1_out [0, 1, 2:4, ::8] --bins 8"])
    ref = reference(sample_path("cnn"), {"image": x})["relu1_out"]
    part = ref[0, 1, 2:4, ::8]
    assert "values[0, 1, 2:4, ::8] → [2x4]:" in out
    block = out.split("→ [2x4]:\n")[1].split("histogram")[0]
    np.testing.assert_allclose(numbers(block), part.ravel(), rtol=5e-4, atol=1e-5)  # four significant digits
    hist = out.split("histogram (whole tensor):\n")[1].splitlines()
    counts = [int(ln.rsplit(None, 1)[1]) for ln in hist if "│" in ln]
    expected, _ = np.histogram(ref.astype(np.float64), bins=8, range=(float(ref.min()), float(ref.max())))
    assert counts == expected.tolist()


def test_show_errors_are_one_line(tmp_path, nan_path):
    r = script(tmp_path, [nan_path], ["show nope", "show logx [9]", "show logx [1:2:0]", "show logx [a]", "show",
                                      "show logx [99999999999999999999999]"], code=1)
    errs = r.stderr.strip().splitlines()
    assert len(errs) == 6
    assert "no tensor named 'nope'" in errs[0]
    assert "out of bounds" in errs[1]
    assert "step cannot be 0" in errs[2]
    assert "'a' is not an integer" in errs[3]
    assert "which tensor?" in errs[4]
    # an integer past int64: numpy called it no integer ('only integers, slices ... are valid indices')
    assert "index 99999999999999999999999 is out of bounds" in errs[5], errs[5]


def test_save_tensor_and_all(tmp_path):
    x = np.random.default_rng(2).random((4, 16), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    out = ok(tmp_path, [sample_path("mlp")], [
        f"input x {tmp_path / 'x.npy'}", f"save tanh2_out {Q(tmp_path / 't.npy')}", f"save tanh2_out {Q(tmp_path / 't.npz')}",
        f"save tanh2_out {Q(tmp_path / 't.pb')}", f"save all {Q(tmp_path / 'all.npz')}"])
    ref = reference(sample_path("mlp"), {"x": x})
    np.testing.assert_allclose(np.load(tmp_path / "t.npy"), ref["tanh2_out"], rtol=1e-5, atol=1e-6)
    with np.load(tmp_path / "t.npz") as z:
        np.testing.assert_allclose(z["tanh2_out"], ref["tanh2_out"], rtol=1e-5, atol=1e-6)
    t = onnx.TensorProto()
    t.ParseFromString((tmp_path / "t.pb").read_bytes())
    np.testing.assert_allclose(numpy_helper.to_array(t), ref["tanh2_out"], rtol=1e-5, atol=1e-6)
    with np.load(tmp_path / "all.npz") as z:
        probes = [r.ref.name for r in api.plan(api.load(sample_path("mlp"))).probes]
        assert sorted(z.files) == sorted(probes)
        for k in z.files:
            np.testing.assert_allclose(z[k], ref[k], rtol=1e-4, atol=1e-5)
    assert "saved 3 tensors" in out or f"saved {len(probes)} tensors" in out


def test_save_never_overwrites_the_model(tmp_path):
    m = tmp_path / "mlp.onnx"
    m.write_bytes(sample_path("mlp").read_bytes())
    before = sha256(m)
    r = script(tmp_path, [m], [f"save y {Q(m)}", f"save all {Q(tmp_path / 'x.txt')}"], code=1)
    errs = r.stderr.strip().splitlines()
    assert "refusing to overwrite" in errs[0] and "writes an .npz" in errs[1]
    assert sha256(m) == before


def test_save_to_stdout_is_refused_as_a_file_output_not_as_a_model(tmp_path):
    """`save y -` (and `save html -`): a tensor or a page, not a model, was refused as one: "the model is
    written to a file: give a file name, not '-'" (QA)."""
    r = script(tmp_path, [sample_path("mlp")], ["save y -", "save html -"], code=1)
    errs = r.stderr.strip().splitlines()
    assert len(errs) == 2 and all("not '-'" in e and "model" not in e for e in errs), errs


# -- where, goto, step, back -------------------------------------------------------------------------------


def test_where_nan_finds_the_node_that_produced_the_first_nan(tmp_path, deep_nan):
    x = np.array([[1, 2, 9], [16, 0.5, 30]], np.float32)  # relu(x) - 5 < 0 where x < 5: sqrt -> NaN
    np.save(tmp_path / "x.npy", x)
    out = ok(tmp_path, [deep_nan], [f"input x {tmp_path / 'x.npy'}", "where nan", "node"])
    with np.errstate(invalid="ignore"):
        s = np.sqrt(np.maximum(x, 0) - 5)
    assert "first tensor where nan: s (" in out
    assert "produced by node sqrt (Sqrt, #2)" in out
    assert f"{int(np.isnan(s).sum())} NaN, 0 Inf in 6 values" in out
    assert "#2/3 sqrt  Sqrt" in out  # the cursor moved to the producer
    assert re.search(r"in 0\s+d\s+2x3\s+float32\s+-4.5", out)  # its input: negative values, the cause


def test_where_inf_nan_next_absmax_std(tmp_path, nan_path):
    out = ok(tmp_path, [nan_path], ["input x [1, -2, 3, 0]", "where inf", "where nan --next", "where nan --next",
                                    "where absmax>2", "where std<1e-3", "where std<1e-3 --weights", "where max>100"])
    assert [f[1] for f in re.findall(r"(first tensor[^:]*): (\w+)", out)] == ["logx", "scaled", "y", "x", "w"]
    assert "produced by node scale (Mul, #1)" in out and "produced by node relu (Relu, #2)" in out
    assert "a graph input, read first by node log" in out and "a weight, read first by node scale" in out
    assert "no tensor where std<1e-3" in out and "no tensor where max>100" in out


def test_where_with_an_oracle_over_every_tensor(tmp_path):
    x = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32) * 3
    np.save(tmp_path / "x.npy", x)
    out = ok(tmp_path, [sample_path("mlp")], [f"input x {tmp_path / 'x.npy'}", "where absmax>4", "where std<0.3"])
    ref = reference(sample_path("mlp"), {"x": x})
    order = ["x"] + [o for n in onnx.load(str(sample_path("mlp"))).graph.node for o in n.output]
    first_absmax = next(n for n in order if np.abs(ref[n] if n != "x" else x).max() > 4)
    first_std = next(n for n in order if (ref[n] if n != "x" else x).astype(np.float64).std() < 0.3)
    hits = re.findall(r"first tensor where [^:]*: (\S+) ", out)
    assert hits == [first_absmax, first_std]


def test_goto_step_back_walk_the_graph(tmp_path):
    x = np.random.default_rng(4).random((1, 3, 32, 32), dtype=np.float32)
    np.save(tmp_path / "img.npy", x)
    out = ok(tmp_path, [sample_path("cnn")], [f"input image {tmp_path / 'img.npy'}", "goto relu1", "step", "back 2", "step 3",
                                              "goto #8", "goto gap_out", "goto conv2.weight"])
    heads = re.findall(r"^#(\d+)/8 (\S+)", out, flags=re.M)
    assert heads == [("2", "relu1"), ("3", "pool1"), ("1", "bn1"), ("4", "conv2"), ("8", "fc"), ("6", "gap"), ("4", "conv2")]
    ref = reference(sample_path("cnn"), {"image": x})
    block = out.split("#2/8 relu1")[1].split("#3/8")[0]
    row = next(ln.split() for ln in block.splitlines() if ln.startswith("out 0"))
    assert row[2] == "relu1_out" and close(row[5], float(ref["relu1_out"].min())) and close(row[6], float(ref["relu1_out"].max()))


def test_walking_past_either_end_is_a_one_line_error(tmp_path):
    r = script(tmp_path, [sample_path("cnn")], ["goto conv1", "back", "goto fc", "step", "goto nope", "step x"], code=1)
    errs = r.stderr.strip().splitlines()
    assert len(errs) == 4
    assert "already at the first node" in errs[0] and "already at the last node" in errs[1]
    assert "no node or tensor named 'nope'" in errs[2] and "N must be an integer" in errs[3]


def test_step_and_back_take_one_or_more_nodes(tmp_path):
    """`step 0` in the middle of the graph said 'already at the first node'."""
    r = script(tmp_path, [sample_path("cnn")], ["goto #4", "step 0", "back 0", "back -2", "step 2"], code=1)
    errs = r.stderr.strip().splitlines()
    assert len(errs) == 3 and all("1 or more" in e for e in errs) and "already at" not in r.stderr
    assert re.findall(r"^#(\d+)/8 (\S+)", r.stdout, flags=re.M)[-1] == ("6", "gap")


# -- two models, gradients ----------------------------------------------------------------------------------


def test_second_model_info_stats_and_diff(tmp_path):
    out = ok(tmp_path, [sample_path("mlp"), sample_path("mlp")], ["info --model b", "run", "diff", "match fc1_out"])
    assert "(--model b)" in out
    assert "[a] ran" in out and "[b] ran" in out
    assert "0 failing" in out and "outputs pass" in out
    assert "matched by name" in out


def test_save_html_writes_the_last_diff_not_a_match(tmp_path, monkeypatch):
    # QA: `match` ran a diff of its own (the default selection) in the slot of the last `diff`, so `save
    # html` after `diff --all` and `match` wrote the match's 4 pairs, not the 7 of the diff the user ran
    mlp = sample_path("mlp")
    monkeypatch.chdir(tmp_path)  # a short relative name: the message stays on one line however long tmp_path is
    page = "r.html"
    out = ok(tmp_path, [mlp, mlp], ["diff --all", "match fc1_out", f"save html {Q(page)}"])
    n = len(api.diff(mlp, mlp, selection=api.Selection(all=True), config=api.RunConfig(device="cpu")).results)
    assert n > 4 and f"wrote the report of the last diff (--all: {n} pairs) to {page}\n" in out, out
    assert "relu1_out" in (tmp_path / page).read_text()  # a Relu: no default selection has it
    # a match alone is no diff: the report is the probes' statistics, and it says why
    out = ok(tmp_path, [mlp, mlp], ["match fc1_out", f"save html {Q(page)}"])
    assert "matched by name" in out and "no diff of the current models and inputs to report: run `diff` first" in out
    out = ok(tmp_path, [mlp, mlp], ["match fc1_out", "diff", f"save html {Q(page)}"])
    assert "wrote the report of the last diff (the default selection: 4 pairs)" in out


def test_diff_without_a_second_model_is_an_error(tmp_path):
    r = script(tmp_path, [sample_path("mlp")], ["diff", "match y", "stats --model b"], code=1)
    errs = r.stderr.strip().splitlines()
    assert len(errs) == 3 and all("second model" in e for e in errs)


def sqrt_matmul_model() -> onnx.ModelProto:
    """y = sqrt(x) @ W: dL/dW = sqrt(x)^T @ dL/dy, and dL/dx = (dL/dy @ W^T) / (2 sqrt(x)), Inf where x = 0."""
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4) / 10, "W")
    return make_model(
        [helper.make_node("Sqrt", ["x"], ["s"], name="sqrt"), helper.make_node("MatMul", ["s", "W"], ["y"], name="matmul")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w])


def test_grad_gradients_work_in_show_stats_and_where(tmp_path):
    p = tmp_path / "sqrt_matmul.onnx"
    onnx.save(sqrt_matmul_model(), p)
    x = np.array([[0, 1, 4], [9, 16, 25]], np.float32)
    np.save(tmp_path / "x.npy", x)
    out = ok(tmp_path, [p], [f"input x {tmp_path / 'x.npy'}", "grad --wrt x --wrt W", "show W_grad", "stats '*_grad'",
                             "where inf", "show x_grad"])
    w = numpy_helper.to_array(sqrt_matmul_model().graph.initializer[0]).astype(np.float64)
    dy = np.ones((2, 4))  # loss sum
    expected_w = np.sqrt(x.astype(np.float64)).T @ dy
    with np.errstate(divide="ignore"):
        expected_x = (dy @ w.T) / (2 * np.sqrt(x.astype(np.float64)))
    shown = [numbers(b.split("histogram")[0]) for b in out.split("values:\n")[1:]]
    np.testing.assert_allclose(shown[0], expected_w.ravel(), rtol=1e-4)
    np.testing.assert_allclose(shown[1], expected_x.ravel(), rtol=1e-4)
    assert "backward graph attached" in out and "W_grad" in out.split("show W_grad")[0]
    assert re.search(r"first tensor where inf: x_grad \(tensor \d+ in topological order\), produced by node onnxprobe\.grad/", out)
    assert "1 NaN" not in out.split("where inf")[1].split("\n")[0]


def test_inputs_of_other_shapes_after_grad_drop_the_backward_graph(tmp_path):
    """The backward graph is made for the input shapes grad ran with; inputs of another shape that the
    model as loaded (x: [n, 3]) takes replace it with that model, with a note, and grad then runs again on
    them: its W gradient is sqrt(x)^T @ ones for the new x (numpy float64)."""
    m = sqrt_matmul_model()
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "n"
    m.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "n"
    p = tmp_path / "dyn.onnx"
    onnx.save(m, p)
    x3 = np.arange(9, dtype=np.float32).reshape(3, 3) + 1
    np.save(tmp_path / "x3.npy", x3)
    r = script(tmp_path, [p], ["grad --wrt W", f"input x {tmp_path / 'x3.npy'}", "info", "grad --wrt W", "show W_grad"], code=0)
    out = r.stdout
    before, after = out.split("input x ", 1)[1].split("loss sum", 1)
    assert "the backward graph was made for the old input shapes and is dropped; run `grad` again" in before
    assert "graph     2 nodes" in before  # the model as loaded again
    w = numpy_helper.to_array(m.graph.initializer[0]).astype(np.float64)
    assert w.shape == (3, 4)
    expected = np.sqrt(x3.astype(np.float64)).T @ np.ones((3, 4))
    np.testing.assert_allclose(numbers(after.split("values:\n")[1].split("histogram")[0]), expected.ravel(), rtol=1e-4)


# -- session commands, the error policy ---------------------------------------------------------------------


def test_device_help_quit(tmp_path):
    out = ok(tmp_path, [sample_path("cnn")], ["device", "device cpu", "help", "help show", "quit", "info"])
    assert "device cpu" in out
    for name in C.COMMANDS:
        assert re.search(rf"^\s+{name}\b", out, flags=re.M), name
    assert "show TENSOR [SLICE]" in out and "numpy-style" in out
    assert "IR 8" not in out  # `info` after `quit` did not run


def test_device_cuda_without_cuda_is_one_line(tmp_path):
    from onnxprobe.runtime.ort import cuda_usable

    if cuda_usable():
        pytest.skip("CUDA is usable here")
    r = script(tmp_path, [sample_path("cnn")], ["device cuda", "device"], code=1)
    assert len(r.stderr.strip().splitlines()) == 1 and "no usable CUDA provider" in r.stderr
    assert "device auto (cpu)" in r.stdout


def test_bad_commands_give_one_line_each_and_the_script_goes_on(tmp_path):
    r = script(tmp_path, [sample_path("cnn")], ["foo", "# a comment", "", "info extra", "show 'unbalanced", "seed x", "info"], code=1)
    errs = r.stderr.strip().splitlines()
    assert errs == [
        "onnxprobe: error: line 1: unknown command 'foo' (try help)",
        "onnxprobe: error: line 4: info: unexpected argument 'extra' (usage: info [--model a|b])",
        "onnxprobe: error: line 5: cannot read the command line: No closing quotation",
        "onnxprobe: error: line 6: seed: N must be an integer, got 'x' (usage: seed [N])",
    ]
    assert "producer" in r.stdout


def test_internal_errors_are_one_line_unless_debugging(tmp_path, monkeypatch):
    def boom(env, args):
        raise RuntimeError("kaput\nsecond line")

    monkeypatch.setitem(C.COMMANDS, "boom", C.Command("boom", boom, "boom", "test only", "session"))
    r = script(tmp_path, [sample_path("cnn")], ["boom", "seed"], code=1)
    assert r.stderr.strip() == ("onnxprobe: error: line 1: internal error: RuntimeError: kaput "
                                "(run with ONNXPROBE_DEBUG=1 for the traceback)")
    assert "seed 0" in r.stdout
    r = runner.invoke(app, ["debug", str(sample_path("cnn")), "--script", "-"], input="boom\n", env={**ENV, "ONNXPROBE_DEBUG": "1"})
    assert "Traceback" in r.stderr and "kaput" in r.stderr


def test_script_from_stdin_and_startup_options(tmp_path):
    r = runner.invoke(app, ["debug", str(sample_path("mlp")), "--script", "-", "--op", "Relu", "--seed", "3", "--device", "cpu"],
                      input="probe list\nseed\ndevice\n", env=ENV)
    assert r.exit_code == 0, r.output
    assert "relu1_out" in r.stdout and "1 probe\n" in r.stdout and "seed 3" in r.stdout and "device cpu" in r.stdout


def test_startup_errors_exit_with_one_line(tmp_path):
    r = runner.invoke(app, ["debug", str(tmp_path / "missing.onnx"), "--script", "-"], input="", env=ENV)
    assert r.exit_code == 1 and r.stderr.strip().endswith("no such file")
    r = runner.invoke(app, ["debug", str(sample_path("mlp")), "--input", "q=1", "--script", "-"], input="", env=ENV)
    assert r.exit_code == 2 and "unknown input name 'q'" in r.stderr
    r = runner.invoke(app, ["debug", str(sample_path("mlp")), "--script", str(tmp_path / "nope.txt")], env=ENV)
    assert r.exit_code == 2 and "no such script file" in r.stderr


# -- pure parsers ---------------------------------------------------------------------------------------------


def test_parse_slice():
    assert parse_slice("[0, :3, 5:10:2]") == (0, slice(None, 3), slice(5, 10, 2))
    assert parse_slice("[..., -1]") == (Ellipsis, -1)
    assert parse_slice("1, None, ::-1") == (1, None, slice(None, None, -1))
    assert parse_slice("[]") == ()
    a = np.arange(60).reshape(3, 4, 5)
    for text in ("[0, :3, 1:5:2]", "[..., 2]", "[-1]", "[1:, None, ::2]"):
        assert np.array_equal(a[parse_slice(text)], eval(f"a{text}")), text  # noqa: S307 - test oracle only
    for bad in ("[0", "[1+1]", "[__import__('os')]", "[1:2:3:4]", "[..., ...]", "[::0]"):
        with pytest.raises(UsageError):
            parse_slice(bad)


def test_parse_selection_and_condition():
    s = parse_selection(["op:Conv,Relu", "--name", "*attn*", "blk*", "--range", "3:9", "--include-constants"])
    assert s.ops == ("Conv", "Relu") and s.names == ("*attn*", "blk*") and s.range == "3:9" and s.include_constants
    assert parse_selection(["all"]).all and parse_selection(["range:a:b"]).range == "a:b"
    assert parse_selection([]).is_default
    with pytest.raises(UsageError):
        parse_selection(["--frob"])
    c = parse_condition("absmax > 1e4")
    assert (c.stat, c.op, c.value) == ("absmax", ">", 1e4)
    assert parse_condition("nan|inf").stat == "nonfinite" and parse_condition("std<=0").op == "<="
    for bad in ("", "foo>1", "std<", "mean ~ 3"):
        with pytest.raises(UsageError):
            parse_condition(bad)


def constant_chain_model() -> onnx.ModelProto:
    """x -> Add(c) -> Mul(c2) -> y, where c and c2 come from Constant nodes (and c2 from c alone)."""
    return make_model(
        [helper.make_node("Constant", [], ["c"], name="const", value=numpy_helper.from_array(np.array(1.0, np.float32))),
         helper.make_node("Add", ["x", "c"], ["a"], name="add"),
         helper.make_node("Neg", ["c"], ["c2"], name="neg_const"),
         helper.make_node("Mul", ["a", "c2"], ["y"], name="mul")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )


def test_step_and_back_pass_over_weight_only_nodes(tmp_path):
    p = tmp_path / "consts.onnx"
    onnx.save(constant_chain_model(), p)
    out = ok(tmp_path, [p], ["step", "step", "back", "back --weights", "step --weights 2", "info"])
    heads = re.findall(r"^#(\d+)/3 (\S+)", out, flags=re.M)
    assert heads == [("1", "add"), ("3", "mul"), ("1", "add"), ("0", "const"), ("2", "neg_const")]
    assert "1 weight (4 B)" in out  # Constant nodes hold weights too


def test_show_log_histogram_and_full_values(tmp_path):
    x = np.concatenate([np.zeros(200), np.ones(3)]).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    p = tmp_path / "relu.onnx"
    onnx.save(make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [203])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [203])]), p)
    out = ok(tmp_path, [p], [f"input x {tmp_path / 'x.npy'}", "show y --bins 2", "show y --bins 2 --log", "show y --full"])
    linear, log = [b.split("finite values")[0] for b in out.split("histogram:\n")[1:3]]
    bars = [[ln.split("│")[1].rsplit(None, 1)[0].strip() for ln in block.splitlines() if "│" in ln] for block in (linear, log)]
    assert [ln.rsplit(None, 1)[1] for ln in linear.splitlines() if "│" in ln] == ["200", "3"]
    assert len(bars[1][1]) > len(bars[0][1]) >= 1  # a small bin still shows; log scale makes it longer
    assert "bars on a log scale" in out
    full = out.split("values:\n")[3].split("histogram")[0]
    assert "..." not in full and len(numbers(full)) == 203


def test_piped_commands_run_as_a_script_and_echo(tmp_path):
    r = runner.invoke(app, ["debug", str(sample_path("mlp"))], input="seed 4\nfoo\n", env=ENV)
    assert r.exit_code == 1 and "seed 4" in r.stdout and "line 2: unknown command 'foo'" in r.stderr
    r = runner.invoke(app, ["debug", str(sample_path("mlp")), "--script", "-", "--echo"], input="seed 4\n", env=ENV)
    assert r.stdout.splitlines()[:2] == ["> seed 4", "seed 4 (random inputs: x)"]


def test_a_path_the_system_refuses_is_one_line_naming_it(tmp_path):
    long = tmp_path / ("a" * 300 + ".npz")
    r = script(tmp_path, [sample_path("cnn")], [f"save all {Q(long)}", "info"], code=1)
    errs = r.stderr.strip().splitlines()
    assert len(errs) == 1 and "File name too long" in errs[0] and "internal error" not in errs[0], errs
    assert "graph" in r.stdout  # the script went on


def test_grad_points_from_output_to_loss_output(tmp_path):
    r = script(tmp_path, [sample_path("mlp")], ["grad --output y"], code=1)
    assert "--loss-output" in r.stderr


def test_stats_footer_breaks_between_phrases_at_a_narrow_width(tmp_path):
    """The session's `stats` footer is broken between its phrases as the command line's is: no phrase such
    as 'device cpu' is cut in two, and every footer line fits the width."""
    r = script(tmp_path, [sample_path("cnn")], ["stats --all"], env={"COLUMNS": "36"}, code=0)
    lines = r.stdout.rstrip("\n").splitlines()
    start = lines.index(next(ln for ln in lines if "tensors · " in ln))
    footer = lines[start:start + 4]
    assert all(len(ln) <= 36 for ln in footer), footer
    assert any("device cpu" in ln for ln in footer) and any(ln.endswith("opt-level off") for ln in footer), footer


def test_a_tensor_without_finite_values_shows_dashes_not_nan(tmp_path):
    """Log(0) = -inf everywhere: min, max, mean, std and abs mean of no finite values read '-' in show's
    statistics line, as in the layers table (the mean and std read 'nan' beside a '-' min)."""
    p = tmp_path / "nan.onnx"
    onnx.save(nan_model(), p)
    x = tmp_path / "x.npy"
    np.save(x, np.zeros(4, np.float32))
    out = ok(tmp_path, [p], [f"input x {x}", "run", "show logx"])
    line = next(ln for ln in out.splitlines() if "mean" in ln and "Inf 4" in ln)
    assert "nan" not in line.replace("NaN", ""), line
    assert re.search(r"min - · max - · mean - · std - · abs_mean -", line), line


def test_help_of_a_command_fits_the_terminal_and_lists_its_examples(tmp_path):
    """`help COMMAND` reflows its text to the terminal (it kept the source's ~100-column lines, which an
    80-column terminal broke again) and lists its examples one a line; every command has some."""
    from onnxprobe.session.commands import COMMANDS

    lines = [f"help {name}" for name in COMMANDS]
    r = script(tmp_path, [sample_path("cnn")], lines, env={"COLUMNS": "80"}, code=0)
    out = r.stdout.splitlines()
    usages = {c.usage for c in COMMANDS.values()}
    assert all(len(ln) <= 80 for ln in out if ln not in usages and not ln.startswith(tuple(usages))), \
        [ln for ln in out if len(ln) > 80]
    assert r.stdout.count("  Examples:\n") == len(COMMANDS), r.stdout
    show = r.stdout.split("show TENSOR", 1)[1]
    assert "\n    show conv1_out [0, :3] --bins 32\n" in show


def test_save_all_leaves_out_the_branch_that_did_not_run(tmp_path):
    """`save all` with a probe in the If branch not taken writes what ran (as layers --save), and says
    how many it left out; `show` of such a tensor says it did not run (both failed with "no value (a
    tensor inside a subgraph whose type is unknown)", and nothing was written). Oracle: onnx.reference."""
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "acts.npz"
    args = ("--input", f"x={tmp_path / 'x.npy'}", "--input", "n=3", "--input", "cond=true")
    r = script(tmp_path, [sample_path("control_flow")], ["probe add --all", f"save all {Q(out)}"], *args, code=0)
    assert "2 that did not run" in r.stdout, r.stdout
    saved = np.load(out)
    assert "then_out" in saved.files and "else_out" not in saved.files and "else_mul" not in saved.files
    want = reference(sample_path("control_flow"), {"x": x, "n": np.array(3, np.int64), "cond": np.array(True)})
    np.testing.assert_allclose(saved["y"], want["y"], rtol=1e-6)
    r = script(tmp_path, [sample_path("control_flow")], ["show else_out"], *args, code=1)
    assert "else_out: not run on these inputs" in r.output, r.output


def test_a_lone_hash_starts_a_comment_as_in_the_readme(tmp_path):
    """The README's session lines end in `# comments`: they run as written (each was an error: "unexpected
    argument '#'", a condition or a slice holding the comment). '#3' and quoted '#' are words."""
    assert split("run   # runs what changed") == ["run"]
    assert split("node #3") == ["node", "#3"] and split("a#b") == ["a#b"]
    assert split('show "a # b"  # c') == ["show", "a # b"] and split("show 'a ' # b") == ["show", "a "]
    out = ok(tmp_path, [sample_path("cnn")], ["run                      # runs what changed",
                                               "where nan                # first NaN",
                                               "show conv1_out [0, :3, 5:10:2]   # statistics, values, histogram"])
    assert "conv1_out" in out and "[0, :3, 5:10:2]" in out


@pytest.mark.parametrize("line", ["where nan --bogus", "save conv1_out out.npy --bogus", "inputs --bogus",
                                  "show conv1_out --bogus", "input image random --bogus", "nodes --bogus", "stats --bogus"])
def test_an_unknown_option_is_named_as_one(line, tmp_path):
    """An option a command does not take is said to be one (it was read as a condition, a file, a slice,
    a shape or a name glob: "condition 'nan --bogus'", "slice '--bogus'"...)."""
    r = script(tmp_path, [sample_path("cnn")], [line], code=1)
    assert f"{line.split()[0]}: unknown option '--bogus'" in r.output, r.output


def test_the_options_a_command_names_still_work(tmp_path):
    out = ok(tmp_path, [sample_path("cnn")], ["stats --all --wide", "show conv1_out --bins=4 --log", "where nan --weights",
                                              "probe add --op Conv --model a"])
    assert "conv1_out" in out


def test_a_backward_graph_of_a_zero_size_batch_is_dropped_for_other_shapes(tmp_path):
    """grad at a 0-size batch, then a batch of 2: the backward graph (made for the empty batch) was kept,
    and the next run blamed the model ("the model fails on these inputs as it is"); it is dropped with
    the note, as for any other change of shape, and the run works. Now grad refuses the empty batch up front
    (no loss to differentiate), so no backward graph is made for it; the next runs work all the same."""
    r = script(tmp_path, [sample_path("dynamic_batch")], ["input x random 0x3x8x8", "grad", "input x random 2x3x8x8", "run", "grad"],
               code=1)
    assert "empty batch has no loss to differentiate" in r.stderr and "fails on these inputs" not in r.output, r.output
    assert r.stderr.count("error") == 1, r.stderr


def test_an_empty_value_reads_empty_not_not_run(tmp_path):
    """A 0-size input and the output it makes are values of no element: they read "empty" (they read "not
    run (inside an If branch that was not taken, or empty)" for main-graph tensors)."""
    out = script(tmp_path, [sample_path("dynamic_batch")], ["input x random 0x3x8x8", "show x", "run"], code=0).stdout
    assert "empty (no element" in out and "not run" not in out, out


def test_script_output_has_no_lines_padded_with_spaces(tmp_path):
    """help's table padded every line out to the width with spaces (Rich fills a table's last column):
    a script's output in a file or a pipe ends each line at its last character."""
    r = script(tmp_path, [sample_path("cnn")], ["help", "nodes", "node #0", "run", "stats"], code=0)
    lines = r.stdout.splitlines()
    assert len(lines) > 20 and "help COMMAND" in r.stdout
    padded = [x for x in lines if x != x.rstrip()]
    assert not padded, padded[:3]


def test_quit_with_an_argument_is_refused(tmp_path):
    """`quit now` ended the session as `quit` does, the word ignored: an argument quit does not take is an
    error, and the session goes on."""
    r = script(tmp_path, [sample_path("cnn")], ["quit now", "nodes"], code=1)
    assert "quit: unexpected argument 'now'" in r.stderr and "9 of 9 nodes" in r.stdout


def test_the_node_table_tells_offset_values_apart(tmp_path):
    """node / goto / where / step read 1e+04 1e+04 1e+04 for values near 10000 (layers and stats show as many
    digits as the spread needs): the same rule."""
    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1000])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1000])])
    onnx.save(m, tmp_path / "off.onnx")
    x = (10000.5 + np.random.default_rng(0).uniform(-0.5, 0.5, 1000)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = script(tmp_path, [tmp_path / "off.onnx"], ["run", "node #0"], "--input", f"x={tmp_path / 'x.npy'}", code=0)
    (row,) = [ln.split() for ln in r.stdout.splitlines() if ln.startswith("out 0")]
    lo, hi, mean = (float(v) for v in row[5:8])
    x64 = x.astype(np.float64)
    assert lo == pytest.approx(x64.min(), abs=1e-3) and hi == pytest.approx(x64.max(), abs=1e-3)
    assert mean == pytest.approx(x64.mean(), abs=1e-3)


def test_the_histogram_of_a_constant_is_labelled_with_its_value(tmp_path):
    """show's histogram of a constant 10000.5 labelled its one bar '1e+04'."""
    m = make_model([helper.make_node("Identity", ["x"], ["y"], name="id")], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])])
    onnx.save(m, tmp_path / "c.onnx")
    np.save(tmp_path / "x.npy", np.full(8, 10000.5, np.float32))
    r = script(tmp_path, [tmp_path / "c.onnx"], ["run", "show y"], "--input", f"x={tmp_path / 'x.npy'}", code=0)
    assert any(ln.startswith("10000.5 │") for ln in r.stdout.splitlines()), r.stdout


@pytest.mark.parametrize("stdin", [False, True])
def test_a_script_that_starts_with_a_byte_order_mark_runs(tmp_path, stdin):
    """Windows editors start UTF-8 files with a BOM (and end lines with CRLF): it was read as part of the
    first command ("unknown command '\\ufeffinfo'")."""
    data = "\ufeffinfo\r\nseed\r\n".encode("utf-8")
    f = tmp_path / "bom.txt"
    f.write_bytes(data)
    args = ["debug", str(sample_path("cnn")), "--script", "-" if stdin else str(f)]
    r = runner.invoke(app, args, input=data if stdin else None, env=ENV)
    assert r.exit_code == 0, r.output
    assert "unknown command" not in r.output and "seed 0" in r.stdout


def test_node_view_after_run_shows_the_fed_inputs_statistics(tmp_path):
    """`node branch` after `run` read 'in 0 cond scalar bool - - -' though cond was fed (a run measures
    node outputs; statistics appeared only once `where` fetched the input). They come from the feed."""
    out = ok(tmp_path, [sample_path("control_flow")], ["input n 2", "input cond 1", "run", "node loop"])
    n_row = next(ln for ln in out.splitlines() if re.match(r"in 0\s+n\s", ln))
    assert n_row.split()[5:11] == ["2", "2", "2", "0", "0", "0"], n_row  # min max mean std NaN Inf of n = 2
    out = ok(tmp_path, [sample_path("control_flow")], ["input n 2", "input cond 1", "input x [[0.5,0.5,0.5,0.5],[0.5,0.5,0.5,0.5]]", "run", "node proj"])
    x_row = next(ln for ln in out.splitlines() if re.match(r"in 0\s+x\s", ln))
    assert x_row.split()[5:8] == ["0.5", "0.5", "0.5"], x_row


def test_the_name_a_listing_shows_for_an_unnamed_body_node_is_taken_by_every_command(tmp_path):
    """An unnamed node in an If branch: `nodes` listed 'If/then_branch/Neg_1', which `node`, `nodes GLOB`
    and `layers --name` refused (only 'Neg_1' worked) and `inspect --nodes` spelled a third way. The path
    a listing shows is taken everywhere, beside the bare name; inspect lists the same spelling."""
    vi = helper.make_tensor_value_info
    then = helper.make_graph([helper.make_node("Neg", ["x"], ["t_out"])], "then", [], [vi("t_out", TensorProto.FLOAT, [2])])
    other = helper.make_graph([helper.make_node("Abs", ["x"], ["e_out"])], "else", [], [vi("e_out", TensorProto.FLOAT, [2])])
    m = make_model([helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)],
                   [vi("x", TensorProto.FLOAT, [2]), vi("cond", TensorProto.BOOL, [])], [vi("y", TensorProto.FLOAT, [2])])
    p = tmp_path / "if.onnx"
    onnx.save(m, p)
    listed = [ln.split()[1] for ln in ok(tmp_path, [p], ["nodes"]).splitlines() if re.match(r"\s*\d+\s", ln)]
    neg = next(n for n in listed if "/Neg_" in n)
    bare = neg.rsplit("/", 1)[1]
    assert neg.startswith("If") and neg.count("/") == 2, listed
    for name in (neg, bare):
        out = ok(tmp_path, [p], [f"node {name}"])
        assert re.search(rf"{bare}\s+Neg", out) and "t_out" in out, out
    out = ok(tmp_path, [p], [f"nodes {neg.rsplit('/', 1)[0]}/*"])
    assert bare in out and "Abs" not in out, out
    r = runner.invoke(app, ["layers", str(p), "--name", neg, "--input", "cond=1"])
    assert r.exit_code == 0 and "t_out" in r.stdout and "e_out" not in r.stdout, r.output
    r = runner.invoke(app, ["inspect", str(p), "--nodes"], env=ENV)
    assert neg in r.stdout, r.stdout
