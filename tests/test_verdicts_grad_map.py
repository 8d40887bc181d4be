"""Earned verdicts for ``diff --grad`` (a NaN loss, no weights), ``grad``'s report of a NaN gradient,
``--map`` entries that cannot be used, and If/Loop/Scan body tensors that ``diff --all`` leaves out."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model, sample_path, transposing_model
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError

runner = CliRunner()
X = np.array([[0.2, 0.9, 0.4, 0.7], [0.6, 0.1, 0.8, 0.3]], np.float32)


def invoke(*args, env=None):
    return runner.invoke(app, [str(a) for a in args], env=env)


def nan_grad_model() -> onnx.ModelProto:
    """y = Sqrt(-(|x w| + 1)): NaN everywhere, so the sum loss and every gradient are NaN."""
    return make_model(
        [helper.make_node("Mul", ["x", "w"], ["xw"], name="mul"), helper.make_node("Abs", ["xw"], ["a"], name="abs"),
         helper.make_node("Add", ["a", "one"], ["b"], name="add"), helper.make_node("Neg", ["b"], ["c"], name="neg"),
         helper.make_node("Sqrt", ["c"], ["y"], name="sqrt")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [numpy_helper.from_array(np.full((4,), 0.5, np.float32), "w"), numpy_helper.from_array(np.ones((4,), np.float32), "one")])


def identity_model() -> onnx.ModelProto:
    return make_model([helper.make_node("Identity", ["x"], ["y"], name="id")],
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])


def save(tmp_path, name, m) -> str:
    p = tmp_path / f"{name}.onnx"
    onnx.save(m, str(p))
    return str(p)


def test_diff_grad_of_a_nan_loss_is_not_a_pass(tmp_path):
    m = save(tmp_path, "nan", nan_grad_model())
    np.save(tmp_path / "x.npy", X)
    r = invoke("diff", "--grad", m, m, "--input", f"x={tmp_path / 'x.npy'}", "--json", "-")
    assert r.exit_code == 1, r.output
    d = json.loads(r.stdout)  # a NaN loss is written (not an internal error on JSON's lack of NaN)
    assert d["verdict"] == "error" and d["grad"]["loss_a"] == "nan" and d["grad"]["loss_b"] == "nan"
    weights = [p for p in d["pairs"] if p["is_output"]]
    assert {p["a"] for p in weights} == {"w_grad", "one_grad"}
    assert all(p["passed"] is None and p["exact"] is False and p["cosine"] is None for p in weights)
    text = invoke("diff", "--grad", m, m, "--input", f"x={tmp_path / 'x.npy'}").stdout
    assert "loss sum: A nan, B nan" in text and "weight gradients pass" not in text


def test_diff_grad_with_no_weights_has_nothing_to_compare(tmp_path):
    m = save(tmp_path, "id", identity_model())
    r = invoke("diff", "--grad", m, m, "--json", "-")
    assert r.exit_code == 1, r.output
    d = json.loads(r.stdout)
    assert d["verdict"] == "error" and "nothing to compare" in d["verdict_reason"] and "no weights" in d["verdict_reason"]


def test_diff_grad_nan_loss_on_one_side_only_fails(tmp_path):
    """A: the NaN model; B: the same with Abs after the Neg (finite). The weight gradients differ in
    finiteness, so they fail; the verdict is not a pass whatever the metric."""
    a = save(tmp_path, "a", nan_grad_model())
    fixed = nan_grad_model()
    fixed.graph.node[-1].input[0] = "c2"
    fixed.graph.node.insert(4, helper.make_node("Abs", ["c"], ["c2"], name="abs2"))
    b = save(tmp_path, "b", fixed)
    np.save(tmp_path / "x.npy", X)
    r = invoke("diff", "--grad", a, b, "--input", f"x={tmp_path / 'x.npy'}", "--metric", "cosine", "--json", "-")
    assert r.exit_code == 1, r.output
    d = json.loads(r.stdout)
    assert d["verdict"] == "fail" and d["grad"]["loss_a"] == "nan" and isinstance(d["grad"]["loss_b"], float)


def test_grad_report_of_an_all_nan_gradient_says_nan_not_zero(tmp_path):
    m = save(tmp_path, "nan", nan_grad_model())
    np.save(tmp_path / "x.npy", X)
    r = invoke("grad", m, "--input", f"x={tmp_path / 'x.npy'}", "--json", "-")
    d = json.loads(r.stdout)
    w = next(g for g in d["gradients"] if g["tensor"] == "w")
    assert w["nan"] == 4 and w["norm"] == "nan" and w["ratio"] == "nan" and d["loss"]["value"] == "nan"
    text = invoke("grad", m, "--input", f"x={tmp_path / 'x.npy'}").stdout
    row = next(line for line in text.splitlines() if " w " in line and "Mul" in line)
    assert row.split()[6:8] == ["nan", "nan"], row  # |grad| and |g|/|t|, after the shape 4
    assert "= nan" in text


def test_a_map_entry_of_another_shape_is_refused_out_loud(tmp_path):
    (tmp_path / "map.json").write_text(json.dumps({"logits": "conv1_out"}))
    r = invoke("diff", sample_path("cnn"), sample_path("cnn"), "--map", tmp_path / "map.json")
    assert r.exit_code != 0 and "--map logits -> conv1_out" in r.stderr and "differ" in r.stderr, r.output
    try:
        api.diff(sample_path("cnn"), sample_path("cnn"), user_map={"logits": "conv1_out"})
    except UsageError as e:
        assert "1x10" in str(e)
    else:
        raise AssertionError("user_map with shapes that differ was dropped silently")


def test_a_scalar_in_a_refused_map_entry_is_named():
    from onnxprobe.match.pairs import shape_words as _shp

    assert _shp(()) == "scalar" and _shp((2, 4)) == "2x4" and _shp((None, 4)) == "?x4" and _shp(None) == "?"


def test_a_map_entry_used_twice_is_refused(tmp_path):
    try:
        api.diff(sample_path("cnn"), sample_path("cnn"), user_map={"conv1_out": "bn1_out", "relu1_out": "bn1_out"})
    except UsageError as e:
        assert "bn1_out" in str(e)
    else:
        raise AssertionError("two --map entries onto one tensor were accepted")


def test_a_tensor_whose_namesake_was_mapped_away_says_so(tmp_path):
    res = api.diff(sample_path("cnn"), sample_path("cnn"), selection=api.Selection(all=True),
                   user_map={"conv1_out": "bn1_out"})
    assert any(r.pair.strategy == "map" and r.pair.a.name == "conv1_out" and r.pair.b.name == "bn1_out" for r in res.results)
    ub = {u.obs.name: u.reason for u in res.matching.unmatched_b}
    assert "folded" not in ub["conv1_out"] and "--map" in ub["conv1_out"]


def test_diff_all_says_which_body_tensors_it_leaves_out(tmp_path):
    cf = sample_path("control_flow")
    r = invoke("diff", cf, cf, "--all", "--input", "n=3", "--input", "cond=false", "--json", "-")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    note = next(n for n in d["notes"] if "Loop/Scan bodies" in n)
    # the Loop/Scan body tensors the model holds, counted here from the graph itself (If branches' are
    # compared: a branch runs once or not at all)
    m = onnx.load(str(cf))

    def body(g, inside):
        n = 0
        for node in g.node:
            n += inside * len([o for o in node.output if o])
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    n += body(a.g, inside or node.op_type != "If")
        return n

    assert note.startswith(f"{body(m.graph, False)} selected tensor(s)")
    branch = {p["a"]: p for p in d["pairs"] if p["scope"]}
    assert "else_mul" in branch and branch["else_mul"]["exact"]  # cond=false: the else branch ran, both sides alike
    # the help says what is compared (rich wraps it in a box: words only)
    words = " ".join(invoke("diff", "--help", env={"COLUMNS": "200"}).stdout.replace("│", " ").split())
    assert "(tensors inside Loop/Scan bodies are not compared; a note lists them)" in words


def test_vs_npz_body_tensors_are_not_called_missing_from_a(tmp_path):
    cf = sample_path("control_flow")
    feeds = api.InputSpec(files={"n": "3", "cond": "false"})
    res = api.layers(cf, api.Selection(all=True), api.RunConfig(device="cpu"), feeds, save=True)
    np.savez(tmp_path / "acts.npz", **res.arrays)
    r = invoke("diff", cf, "--vs-npz", tmp_path / "acts.npz", "--all", "--input", "n=3", "--input", "cond=false",
               "--json", "-")
    d = json.loads(r.stdout)
    inside = [u for u in d["unmatched_b"] if u["name"] == "body_matmul"]
    assert inside and all("no counterpart" not in u["reason"] and "main-graph" in u["reason"] for u in inside)
    # an If branch's saved tensor is compared with A's (the branch ran: cond=false)
    assert any(p["a"] == "else_mul" and p["exact"] for p in d["pairs"])


def test_grad_all_says_which_body_tensors_get_no_row(tmp_path):
    cf = sample_path("control_flow")
    r = invoke("grad", cf, "--all", "--input", "n=3", "--input", "cond=false", "--json", "-")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    rows = {g["tensor"] for g in d["gradients"]}
    note = next(n for n in d["notes"] if "If/Loop/Scan bodies" in n)
    assert "else_mul" in note and "else_mul" not in rows and "not given a gradient row by grad" in note
    words = " ".join(invoke("grad", "--help", env={"COLUMNS": "200"}).stdout.replace("│", " ").split())
    assert "(tensors inside If/Loop/Scan bodies get no row; a note lists them)" in words


def test_a_map_file_that_is_not_an_object_of_names_is_one_usage_error(tmp_path):
    for text in ('["logits", "logits"]', '{"logits": 3}', "{not json"):
        (tmp_path / "map.json").write_text(text)
        r = invoke("diff", sample_path("cnn"), sample_path("cnn"), "--map", tmp_path / "map.json")
        assert r.exit_code == 2 and "--map" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.output


def test_a_map_pair_whose_shapes_differ_at_run_time_is_not_compared_and_no_pass(tmp_path):
    # QA: big enough for the one-run diff's rows (not summed on the host), whose Sub of [512, 256] and
    # [256, 512] failed the whole run; its note was cut off mid-path, and the pair a FAIL that no verdict read
    m = save(tmp_path, "m", transposing_model())
    (tmp_path / "map.json").write_text(json.dumps({"r": "t"}))
    for extra in ([], ["--separate-runs"]):
        r = invoke("diff", m, m, "--map", tmp_path / "map.json", "--shape", "x=512,256", "--json", "-", *extra)
        assert r.exit_code == 1, r.output
        d = json.loads(r.stdout)
        mapped = next(p for p in d["pairs"] if p["strategy"] == "map")  # reported, though no default op selects a Relu
        assert (mapped["a"], mapped["b"], mapped["passed"]) == ("r", "t", None), mapped
        assert mapped["problem"] == "shapes differ at run time: [512, 256] vs [256, 512]"
        assert mapped["runtime_shapes"] == [[512, 256], [256, 512]] and d["first_failure"] is None
        assert d["verdict"] == "error" and "given in --map could not be compared: 'r' -> 't'" in d["verdict_reason"]
        assert all(p["passed"] is True for p in d["pairs"] if p["is_output"]), d["pairs"]  # the rest still ran
        assert not any("one-run diff failed" in n for n in d["notes"]), d["notes"]
        if not extra:  # every pair measured in the one run (the mapped one left out of its graph, and said why)
            assert d["in_graph"] == len(d["pairs"]), d["in_graph"]
    text = invoke("diff", m, m, "--map", tmp_path / "map.json", "--shape", "x=512,256", env={"COLUMNS": "200"})
    assert "t: not compared: shapes differ at run time: [512, 256] vs [256, 512]" in text.stdout
    assert "outputs pass, but 1 pair(s) given in --map not compared" in text.stdout and "error starts" not in text.stdout
    # where the shapes agree at run time, the pair is compared (N == M: Relu(x) against x's transpose)
    ok = json.loads(invoke("diff", m, m, "--map", tmp_path / "map.json", "--shape", "x=256,256", "--json", "-").stdout)
    compared = next(p for p in ok["pairs"] if p["strategy"] == "map")
    assert compared["count"] == 256 * 256 and compared["passed"] is False and compared["runtime_shapes"] is None


@pytest.mark.parametrize("bias", [0.0, 0.5])
def test_diff_grad_footer_says_what_was_compared_when_a_weight_is_in_one_model_only(tmp_path, bias):
    """A weight that only A has makes the verdict an error, but the footer said "weight gradients not compared"
    after the other weight gradients had been compared and had passed (QA, GPT-2 legacy against dynamo): it says
    they pass, and how many were not compared. A bias of zeros that B's exporter dropped is no such weight: adding
    zeros changes nothing, so it is listed with that reason and no verdict hangs on it."""
    w = np.arange(12, dtype=np.float32).reshape(4, 3) / 7
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    with_bias = make_model([helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"), helper.make_node("Add", ["m", "bias"], ["y"], name="add")],
                           [x], [y], [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.full(3, bias, np.float32), "bias")])
    without = make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [x], [y], [numpy_helper.from_array(w, "w")])
    onnx.save(with_bias, tmp_path / "a.onnx")
    onnx.save(without, tmp_path / "b.onnx")
    np.save(tmp_path / "x.npy", X)
    r = invoke("diff", "--grad", tmp_path / "a.onnx", tmp_path / "b.onnx", "--input", f"x={tmp_path / 'x.npy'}", env={"COLUMNS": "200"})
    d = json.loads(invoke("diff", "--grad", tmp_path / "a.onnx", tmp_path / "b.onnx", "--input", f"x={tmp_path / 'x.npy'}", "--json", "-").stdout)
    w_row = next(p for p in d["pairs"] if p["a"] == "w_grad")
    assert w_row["passed"] is True  # dL/dw = x^T 1 in both: the bias does not change it
    if bias:
        assert r.exit_code == 1, r.output
        assert "weight gradients pass, but 1 not compared" in r.stdout, r.stdout
        assert "1 of the weight gradients could not be compared: A's 'bias_grad'" in r.stderr, r.stderr
        assert d["verdict"] == "error"
    else:
        assert r.exit_code == 0, r.output
        assert "weight gradients pass" in r.stdout and "not compared" not in r.stdout, r.stdout
        assert "all zeros" in r.stdout and "bias_grad" in r.stdout, r.stdout
        assert d["verdict"] == "pass"


def test_diff_grad_with_no_weight_reached_names_the_op_that_stops_it(tmp_path, det_without_rule):
    """(Det with its rule taken out.) `grad` names the op with no gradient rule in its error; `diff --grad` said only "the backward pass
    stops before every weight: see the notes" (QA): its error line names the op, per model."""
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"), helper.make_node("Det", ["m"], ["y"], name="the_det")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
                   [numpy_helper.from_array(np.array([[1.0, 0.5], [0.25, 2.0]], np.float32), "w")])
    path = save(tmp_path, "det", m)
    r = invoke("diff", "--grad", path, path)
    assert r.exit_code == 1, r.output
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("onnxprobe: error: nothing to compare") and "Det x1 in A" in line and "Det x1 in B" in line, line
