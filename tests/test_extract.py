"""`onnxprobe extract`: an extracted subgraph, fed the original model's intermediate values, reproduces
the original's values at its outputs (plain onnxruntime on the original is the oracle); cuts that leak
are refused with the leaking tensors named; external data, IR 3 models, models over 2 GB."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import BIG_N, SAMPLES, big_value, make_model, sample_feeds, sample_path, sha256
from onnxprobe.cli.main import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def _session(model_or_path):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    src = model_or_path.SerializeToString() if isinstance(model_or_path, onnx.ModelProto) else str(model_or_path)
    return ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])


def original_values(path, feeds, names) -> dict[str, np.ndarray]:
    """The original model's tensors ``names``: added as plain (untyped) outputs by hand, run in onnxruntime."""
    m = onnx.load(str(path))
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in have and n not in feeds)
    want = [n for n in names if n not in feeds]
    got = dict(zip(want, _session(m).run(want, feeds)))
    return {n: feeds[n] if n in feeds else got[n] for n in names}


def run(path, feeds) -> dict[str, np.ndarray]:
    s = _session(path)
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(names, feeds)))


def extract(model, out, *args):
    r = invoke("extract", model, "-o", out, *args)
    assert r.exit_code == 0, r.output
    return r


def check_reproduces(name, out, feeds=None):
    """Feed the extracted model the original's values at its inputs; compare at its outputs."""
    m = onnx.load(str(out))
    ins, outs = [i.name for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}], [o.name for o in m.graph.output]
    feeds = feeds if feeds is not None else sample_feeds(name)
    ref = original_values(sample_path(name), feeds, ins + outs)
    got = run(out, {n: ref[n] for n in ins})
    for o in outs:
        np.testing.assert_allclose(got[o], ref[o], rtol=1e-6, atol=1e-6, err_msg=o)
    onnx.checker.check_model(str(out), full_check=True)
    return m


@pytest.mark.parametrize("name, inputs, outputs, nodes", [
    ("cnn", "relu1_out", "logits", None),
    ("cnn", "conv1_out", "pool1_out", None),
    ("mlp", "relu1_out", "fc3_out", ["fc2", "tanh2", "fc3/matmul", "fc3/bias"]),
    ("transformer_block", "resid1", "y", None),  # resid1 feeds both the MLP and the residual Add
    ("transformer_block", "q_t,k_t,v_t", "context", None),
    ("control_flow", "h,cond", "branch_out", ["branch"]),  # an If whose branches read h and a weight
    ("control_flow", "branch_out,n", "y,trace", ["loop"]),  # a Loop reading outer-scope weights
    ("dynamic_batch", "x", "y", None),
])
def test_extracted_subgraph_reproduces_the_original(name, inputs, outputs, nodes, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a short relative name: 'wrote sub.onnx' on one line however long tmp_path is
    out = Path("sub.onnx")
    r = extract(sample_path(name), out, "--from", inputs, "--to", outputs)
    m = check_reproduces(name, out)
    assert [i.name for i in m.graph.input] == inputs.split(",")
    assert [o.name for o in m.graph.output] == outputs.split(",")
    if nodes is not None:
        assert [n.name for n in m.graph.node] == nodes
    src = onnx.load(str(sample_path(name)))
    order = [n.name for n in src.graph.node]
    kept = [n.name for n in m.graph.node]
    assert kept == [n for n in order if n in kept]  # original order and names
    assert f"wrote {out}" in r.stdout


def test_control_flow_both_branches(tmp_path):
    out = tmp_path / "sub.onnx"
    extract(sample_path("control_flow"), out, "--from", "x,cond", "--to", "branch_out")
    for cond in (True, False):
        check_reproduces("control_flow", out, {**sample_feeds("control_flow"), "cond": np.array(cond)})


def test_defaults_are_the_model_inputs_and_outputs(tmp_path):
    extract(sample_path("cnn"), tmp_path / "head.onnx", "--from", "pool1_out")
    m = check_reproduces("cnn", tmp_path / "head.onnx")
    assert [o.name for o in m.graph.output] == ["logits"]
    extract(sample_path("cnn"), tmp_path / "stem.onnx", "--to", "relu1_out")
    m = check_reproduces("cnn", tmp_path / "stem.onnx")
    assert [i.name for i in m.graph.input] == ["image"]
    # only the model inputs the outputs need
    extract(sample_path("control_flow"), tmp_path / "h.onnx", "--to", "h")
    assert [i.name for i in onnx.load(str(tmp_path / "h.onnx")).graph.input] == ["x"]


def test_metadata_records_the_cut(tmp_path):
    out = tmp_path / "sub.onnx"
    extract(sample_path("mlp"), out, "--from", "relu1_out", "--to", "y")
    meta = {p.key: p.value for p in onnx.load(str(out)).metadata_props}
    assert json.loads(meta["onnxprobe.extracted"]) == {"inputs": ["relu1_out"], "outputs": ["y"]}


def test_leak_names_the_graph_input_that_bypasses_the_cut(tmp_path):
    r = invoke("extract", sample_path("transformer_block"), "-o", tmp_path / "s.onnx", "--from", "ln1_out", "--to", "y")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1
    assert "does not cut" in r.stderr and "graph input 'x' reaches" in r.stderr
    assert not (tmp_path / "s.onnx").exists()


def test_leak_names_the_tensor_that_goes_around(tmp_path):
    # a = Relu(x); b = Neg(a); c = Exp(Sin(x)); y = b + c. Cutting at a leaves c going around it.
    m = make_model(
        [helper.make_node("Relu", ["x"], ["a"], name="relu"), helper.make_node("Neg", ["a"], ["b"], name="neg"),
         helper.make_node("Sin", ["x"], ["s"], name="sin"), helper.make_node("Exp", ["s"], ["c"], name="exp"),
         helper.make_node("Add", ["b", "c"], ["y"], name="add")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    r = invoke("extract", p, "-o", tmp_path / "s.onnx", "--from", "a", "--to", "y")
    assert r.exit_code == 2 and "tensor 'c' reaches the outputs around them (computed from graph input 'x')" in r.stderr
    # adding it makes a valid cut
    extract(p, tmp_path / "s.onnx", "--from", "a,c", "--to", "y")
    x = np.array([-1, 0.5, 2], np.float32)
    got = run(tmp_path / "s.onnx", {"a": np.maximum(x, 0), "c": np.exp(np.sin(x))})
    np.testing.assert_allclose(got["y"], -np.maximum(x, 0) + np.exp(np.sin(x)), rtol=1e-6)


def test_the_suggested_swap_is_quoted_for_the_shell(tmp_path):
    """Names with spaces or brackets in the swap hint are shell-quoted: the suggested flags paste as they read."""
    import shlex

    m = make_model([helper.make_node("Relu", ["x"], ["a b"], name="r1"), helper.make_node("Relu", ["a b"], ["c[0]"], name="r2"),
                    helper.make_node("Neg", ["c[0]"], ["y"], name="n")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(m, tmp_path / "m.onnx")
    r = invoke("extract", tmp_path / "m.onnx", "-o", tmp_path / "s.onnx", "--from", "c[0]", "--to", "a b")
    assert r.exit_code == 2, r.output
    hint = r.stderr.strip().split("swap them: ", 1)[1]
    assert shlex.split(hint) == ["--from", "a b", "--to", "c[0]"], hint


def test_from_and_to_the_wrong_way_round_say_so_and_suggest_swapping(tmp_path):
    # QA: conv1_out is computed before relu1_out; the leak message advised adding conv1_out to --from,
    # which makes no cut of anything
    cnn = sample_path("cnn")
    r = invoke("extract", cnn, "-o", tmp_path / "s.onnx", "--from", "relu1_out", "--to", "conv1_out")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
    assert ("--to 'conv1_out' does not depend on --from 'relu1_out': it is computed before it (upstream of it)"
            in r.stderr and "swap them: --from conv1_out --to relu1_out" in r.stderr and "add it" not in r.stderr)
    assert not (tmp_path / "s.onnx").exists()
    # the swap it suggests is a cut
    extract(cnn, tmp_path / "s.onnx", "--from", "conv1_out", "--to", "relu1_out")
    # an output that goes around the cut without being upstream of it keeps the leak's advice
    r = invoke("extract", sample_path("transformer_block"), "-o", tmp_path / "t.onnx", "--from", "ln1_out", "--to", "y")
    assert "does not cut" in r.stderr and "swap" not in r.stderr


def test_leak_through_a_subgraph_read(tmp_path):
    # the If branches read h from the outer graph: cutting at cond alone leaks h
    r = invoke("extract", sample_path("control_flow"), "-o", tmp_path / "s.onnx", "--from", "cond", "--to", "branch_out")
    assert r.exit_code == 2 and "'h'" in r.stderr and "does not cut" in r.stderr


@pytest.mark.parametrize("args, needle", [
    (["--from", "relu1", "--to", "logits"], "no tensor named 'relu1' in the main graph; did you mean 'relu1_out'?"),
    (["--from", "conv1_out", "--to", "nothing_like_it"], "no tensor named 'nothing_like_it'"),
    ([], "give the tensors to cut at"),
])
def test_unknown_names_are_one_line(tmp_path, args, needle):
    r = invoke("extract", sample_path("cnn"), "-o", tmp_path / "s.onnx", *args)
    assert r.exit_code == 2 and needle in r.stderr and r.stderr.count("\n") == 1, r.output


def test_tensor_inside_a_body_is_explained(tmp_path):
    r = invoke("extract", sample_path("control_flow"), "-o", tmp_path / "s.onnx", "--from", "s_next", "--to", "y")
    assert r.exit_code == 2 and "lives inside loop/body" in r.stderr and r.stderr.count("\n") == 1


def test_output_folder_must_exist(tmp_path):
    r = invoke("extract", sample_path("cnn"), "-o", tmp_path / "nope" / "s.onnx", "--to", "logits")
    assert r.exit_code == 2 and "does not exist" in r.stderr and r.stderr.count("\n") == 1


def test_external_data_keeps_only_the_used_weights_beside_out(tmp_path):
    src, data = sample_path("external_data"), SAMPLES / "external_data.onnx.data"
    before = sha256(src), sha256(data)
    listing = sorted(p.name for p in SAMPLES.iterdir())
    out = tmp_path / "tail.onnx"
    extract(src, out, "--from", "relu2_out")
    check_reproduces("external_data", out)
    assert (sha256(src), sha256(data)) == before and sorted(p.name for p in SAMPLES.iterdir()) == listing
    m = onnx.load(str(out), load_external_data=False)
    assert {t.name for t in m.graph.initializer} == {"fc3.weight", "fc3.bias"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tail.onnx", "tail.onnx.data"]
    assert (tmp_path / "tail.onnx.data").stat().st_size == 64 * 10 * 4  # fc3.weight only; the bias stays inline


def test_ir3_model_lists_its_initializers_as_inputs(tmp_path):
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4), "w")
    m = make_model(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("MatMul", ["r", "w"], ["y"], name="mm")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]), helper.make_tensor_value_info("w", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w], opset=9, ir=3)
    p = tmp_path / "ir3.onnx"
    onnx.save(m, str(p))
    extract(p, tmp_path / "s.onnx", "--from", "r")
    sub = onnx.load(str(tmp_path / "s.onnx"))
    assert [i.name for i in sub.graph.input] == ["r", "w"]
    onnx.checker.check_model(sub)
    r = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(run(tmp_path / "s.onnx", {"r": r})["y"], r @ numpy_helper.to_array(w))


def test_api(tmp_path):
    from onnxprobe import api

    res = api.extract(sample_path("mlp"), tmp_path / "s.onnx", ["relu1_out"], ["tanh2_out"])
    assert res.nodes == 2 and [t.name for t in res.inputs] == ["relu1_out"] and res.outputs[0].shape == (4, 32)


def test_help_has_an_example():
    r = invoke("extract", "--help")
    assert r.exit_code == 0 and "onnxprobe extract model.onnx -o" in r.stdout


@pytest.mark.slow
def test_model_over_2gb_round_trips_through_mark_and_extract(big_model):
    """3 x 800 MB of weights in external data: inspect, mark and extract it; run the copies."""
    src_dir = big_model.parent
    work = src_dir.parent / "out"
    work.mkdir()
    listing = sorted(p.name for p in src_dir.iterdir())
    x = np.array([0, 7, 123_456_789, BIG_N - 1], np.int64)
    g = [big_value(k, x) for k in range(3)]
    want_s, want_y = g[0] + g[1], (g[0] + g[1]) * g[2]

    r = invoke("inspect", big_model, "--json", "-")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["initializers"]["bytes"] == 3 * BIG_N * 4 and d["external_data"][0]["bytes"] == 3 * BIG_N * 4

    marked = work / "marked.onnx"
    r = invoke("mark", big_model, "-o", marked, "--all")
    assert r.exit_code == 0, r.output
    assert (work / "marked.onnx.data").stat().st_size >= 3 * BIG_N * 4
    onnx.checker.check_model(str(marked))
    got = run(marked, {"x": x})
    for k in range(3):
        np.testing.assert_array_equal(got[f"g{k}"], g[k])
    np.testing.assert_array_equal(got["s"], want_s)
    np.testing.assert_array_equal(got["y"], want_y)
    del got

    sub = work / "sub.onnx"
    r = invoke("extract", marked, "-o", sub, "--from", "s,x", "--to", "y")
    assert r.exit_code == 0, r.output
    m = onnx.load(str(sub), load_external_data=False)
    assert [t.name for t in m.graph.initializer] == ["w2"]
    assert (work / "sub.onnx.data").stat().st_size == BIG_N * 4
    onnx.checker.check_model(str(sub))
    np.testing.assert_array_equal(run(sub, {"x": x, "s": want_s})["y"], want_y)

    assert sorted(p.name for p in src_dir.iterdir()) == listing  # nothing written beside the input
    assert not [p for p in work.iterdir() if p.name.startswith(".")]  # no temporary files left


def test_the_old_flag_names_point_to_from_and_to(tmp_path):
    """(--outputs was said to name "an input .npz file in the other commands": no command has --outputs)"""
    for old in ("--inputs", "--outputs"):
        r = invoke("extract", sample_path("mlp"), "-o", tmp_path / "s.onnx", old, "relu1_out")
        assert r.exit_code == 2 and "--from and --to" in r.stderr and old in r.stderr
        assert ("input .npz file" in r.stderr) == (old == "--inputs"), r.stderr
        assert not (tmp_path / "s.onnx").exists()


def test_a_model_whose_external_tensors_are_all_small_is_written_without_an_empty_data_file(tmp_path):
    """extract and mark of a model with only small external tensors wrote an empty OUT.data beside the
    output (and said "weights in OUT.data"): the tensors are inline, and no data file is written."""
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], [numpy_helper.from_array(w, "w")])
    src = tmp_path / "src"
    src.mkdir()
    onnx.save(m, str(src / "m.onnx"), save_as_external_data=True, location="m.bin", size_threshold=0)
    for argv, out in ((["extract", src / "m.onnx", "-o", tmp_path / "e.onnx", "--to", "y"], tmp_path / "e.onnx"),
                      (["mark", src / "m.onnx", "-o", tmp_path / "k.onnx", "--all", "--stats"], tmp_path / "k.onnx")):
        r = invoke(*argv)
        assert r.exit_code == 0, r.output
        assert not Path(str(out) + ".data").exists() and ".data" not in r.stdout, r.stdout
        got = onnx.load(str(out))
        np.testing.assert_array_equal(numpy_helper.to_array(next(t for t in got.graph.initializer if t.name == "w")), w)


def test_a_tensor_named_by_spaces_can_be_cut_at(tmp_path):
    """--from ' ' names the tensor ' ' when the model has one (it was stripped to nothing, and the cut
    fell back to the model's inputs); spaces around a name that is not one still go. Oracle: onnxruntime
    on the extracted model against numpy."""
    f = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [3])  # noqa: E731
    m = make_model([helper.make_node("Relu", ["a"], [" "], name="relu"), helper.make_node("Neg", [" "], ["y"], name="neg")],
                   [f("a")], [f("y")])
    p = tmp_path / "spaces.onnx"
    onnx.save(m, p)
    out = tmp_path / "cut.onnx"
    r = CliRunner().invoke(app, ["extract", str(p), "-o", str(out), "--from", " ", "--to", " y"])
    assert r.exit_code == 0, r.output
    cut = onnx.load(out)
    assert [i.name for i in cut.graph.input] == [" "] and [o.name for o in cut.graph.output] == ["y"]
    v = np.array([-1.5, 0.0, 2.0], np.float32)
    (y,) = ort.InferenceSession(out.read_bytes(), providers=["CPUExecutionProvider"]).run(None, {" ": v})
    assert y.tolist() == (-v).tolist()


@pytest.mark.parametrize("args", [["--from", "x", "--to", "x"], ["--to", "x"]])
def test_a_cut_with_no_node_is_refused(args, tmp_path):
    """--from x --to x wrote a model of no node (input x is output x); the reversed pair was refused."""
    out = tmp_path / "cut.onnx"
    r = CliRunner().invoke(app, ["extract", str(sample_path("mlp")), "-o", str(out), *args])
    assert r.exit_code == 2 and "no node lies between them" in r.output and not out.exists(), r.output


@pytest.mark.parametrize("args", [[], ["--to", ","], ["--from", " , ", "--to", ""]])
def test_no_cut_names_the_flags_on_the_command_line_and_the_parameters_in_the_api(tmp_path, args):
    """The command line said 'cut_inputs (--from T1,T2) and/or cut_outputs (--to T3)': the API's
    parameter names, which a command-line user has no use for. Each side names its own."""
    from onnxprobe import api
    from onnxprobe.errors import NothingToCut

    r = invoke("extract", sample_path("cnn"), "-o", tmp_path / "s.onnx", *args)
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
    assert "--from" in r.stderr and "--to" in r.stderr and "cut_inputs" not in r.stderr and "cut_outputs" not in r.stderr
    with pytest.raises(NothingToCut) as e:
        api.extract(sample_path("cnn"), tmp_path / "s.onnx", ",", [])
    assert "cut_inputs" in str(e.value) and "--from" not in str(e.value)
    assert not (tmp_path / "s.onnx").exists()


@pytest.mark.parametrize("args, needle", [
    (["--from", ",", "--to", "logits"], "--from ',': an empty tensor name"),
    (["--from", "image,,", "--to", "logits"], "--from 'image,,': an empty tensor name"),
    (["--to", "logits,"], "--to 'logits,': an empty tensor name"),
    (["--from", "logits"], "--from 'logits': is the model output"),
])
def test_empty_names_and_a_from_at_the_output_are_said_as_given(tmp_path, args, needle):
    """--from ',' --to logits silently cut at the model's inputs; --from logits (no --to) blamed
    "--to 'logits'", a flag the user did not give."""
    out = tmp_path / "s.onnx"
    r = invoke("extract", sample_path("cnn"), "-o", out, *args)
    assert r.exit_code == 2 and needle in r.stderr and r.stderr.count("\n") == 1, r.output
    assert "--to 'logits'" not in r.stderr or "--to" in args
    assert not out.exists()


def test_advice_never_names_the_to_itself_nor_a_to_never_given(tmp_path):
    """`--from cond --to s` where s depends on no --from said "tensor 's' reaches the outputs around them; add
    it to --from" (s is the --to: a dead end); `--from b` without --to, a model output 'a' upstream of b,
    blamed "--to 'a'" and suggested a swap. Now: what s is computed from, and the model output by name with
    the outputs that --from does compute; each advice, followed, cuts (checked against numpy)."""
    f = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [3])  # noqa: E731
    m = make_model([helper.make_node("Relu", ["x"], ["a"], name="relu"), helper.make_node("Exp", ["a"], ["b"], name="exp"),
                    helper.make_node("Neg", ["b"], ["c"], name="neg"), helper.make_node("Add", ["x", "k"], ["s"], name="add"),
                    helper.make_node("Mul", ["s", "c"], ["d"], name="mul")],
                   [f("x"), f("k")], [f("a"), f("d")])
    p, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(m, str(p))
    r = invoke("extract", p, "-o", out, "--from", "b", "--to", "s")
    assert r.exit_code == 2 and "--to 's' does not depend on --from 'b'" in r.stderr and "--from x,k" in r.stderr, r.output
    assert "add it to --from" not in r.stderr
    r = invoke("extract", p, "-o", out, "--from", "x,k", "--to", "s")  # the advice followed
    assert r.exit_code == 0, r.output
    r = invoke("extract", p, "-o", out, "--from", "b,s")
    assert r.exit_code == 2 and "model output 'a'" in r.stderr and "--to 'a'" not in r.stderr and "swap" not in r.stderr, r.output
    assert "--to d" in r.stderr, r.output
    r = invoke("extract", p, "-o", out, "--from", "b,s", "--to", "d")  # the advice followed
    assert r.exit_code == 0, r.output
    b, s = np.array([0.5, 1.0, 2.0], np.float32), np.array([1.0, -2.0, 3.0], np.float32)
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"b": b, "s": s})[0]
    np.testing.assert_allclose(got, s.astype(np.float64) * -b.astype(np.float64), rtol=1e-6)


def _comma_model(tmp_path, with_parts: bool):
    """x -> Relu -> 'a,b' -> Neg -> c, y = 'a,b' + c; with_parts: tensors 'a' and 'b' too (model outputs)."""
    f = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [3])  # noqa: E731
    nodes = [helper.make_node("Relu", ["x"], ["a,b"], name="relu"), helper.make_node("Neg", ["a,b"], ["c"], name="neg"),
             helper.make_node("Add", ["a,b", "c"], ["y"], name="add")]
    outs = [f("y")]
    if with_parts:
        nodes += [helper.make_node("Sigmoid", ["x"], ["a"], name="sig"), helper.make_node("Tanh", ["x"], ["b"], name="tanh")]
        outs += [f("a"), f("b")]
    p = tmp_path / ("parts.onnx" if with_parts else "comma.onnx")
    onnx.save(make_model(nodes, [f("x")], outs), p)
    return p


def test_a_comma_name_among_others_in_one_flag_is_read_as_the_model_names_it(tmp_path):
    """--to 'a,b,c' where the model has tensors 'a,b' and 'c' (and no 'a' nor 'b') was split into a, b, c and
    refused: "no tensor named 'a'", and --from 'a,b,c' asked to add 'a,b' to --from, the tensor the user gave.
    The one reading whose parts are all tensor names is taken. Oracle: numpy on the boundary values."""
    p = _comma_model(tmp_path, with_parts=False)
    out = tmp_path / "cut.onnx"
    r = invoke("extract", p, "-o", out, "--to", "a,b,c")
    assert r.exit_code == 0, r.output
    cut = onnx.load(out)
    assert [o.name for o in cut.graph.output] == ["a,b", "c"]
    x = np.array([-1.5, 0.0, 2.0], np.float32)
    ab, c = _session(out).run(["a,b", "c"], {"x": x})
    np.testing.assert_array_equal(ab, np.maximum(x, 0))
    np.testing.assert_array_equal(c, -np.maximum(x, 0))
    out2 = tmp_path / "cut2.onnx"
    r = invoke("extract", p, "-o", out2, "--from", "a,b, c", "--to", "y")
    assert r.exit_code == 0, r.output
    assert [i.name for i in onnx.load(out2).graph.input] == ["a,b", "c"]
    (y,) = _session(out2).run(None, {"a,b": x, "c": 2 * x})
    np.testing.assert_array_equal(y, x + 2 * x)


@pytest.mark.parametrize("api_call", [False, True])
def test_a_flag_value_that_reads_two_ways_is_refused_naming_both(tmp_path, api_call):
    """--to 'a,b,c' where the model has 'a,b', 'a', 'b' and 'c' means ['a,b', 'c'] or ['a', 'b', 'c']: the cut
    took the second silently. It is refused with both readings and how to give one name a flag."""
    from onnxprobe import api
    from onnxprobe.errors import UsageError

    p = _comma_model(tmp_path, with_parts=True)
    out = tmp_path / "cut.onnx"
    if api_call:
        with pytest.raises(UsageError) as e:
            api.extract(p, out, None, "a,b,c")
        msg = str(e.value)
    else:
        r = invoke("extract", p, "-o", out, "--to", "a,b,c")
        assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
        msg = r.stderr
    assert "'a,b', 'c'" in msg and "'a', 'b', 'c'" in msg, msg
    assert not out.exists()
    # a value that is itself a tensor name stays whole (README), and one name a flag is never split
    r = invoke("extract", p, "-o", out, "--to", "a,b", "--to", "c")
    assert r.exit_code == 0, r.output
    assert [o.name for o in onnx.load(out).graph.output] == ["a,b", "c"]


@pytest.mark.parametrize("args", [["--to", "fc1.weight"], ["--from", "relu1_out", "--to", "fc2.weight"]])
def test_a_to_that_is_a_weight_alone_is_said_to_be_a_weight(args, tmp_path):
    """--to fc1.weight (no --from) said "is among the cut's inputs ... give a --to computed from the --from
    tensors": no --from was given, and a weight is no input of the cut; it is stored, no node computes it."""
    out = tmp_path / "cut.onnx"
    r = invoke("extract", sample_path("mlp"), "-o", out, *args)
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
    assert f"{args[-1]!r}: is a weight" in r.stderr and "among the cut's inputs" not in r.stderr, r.stderr
    assert ("--from" in r.stderr) == ("--from" in args) and not out.exists()


def test_a_marked_models_metadata_lists_only_the_outputs_the_cut_keeps(tmp_path):
    """Extracting from a marked model copied its onnxprobe.exposed whole: it listed outputs ('relu1_out',
    'tanh2_out'...) the extracted model does not have, and a later mark merged them on (kind 'mixed')."""
    marked, cut, again = tmp_path / "m.onnx", tmp_path / "cut.onnx", tmp_path / "again.onnx"
    r = invoke("mark", sample_path("mlp"), "-o", marked, "--all")
    assert r.exit_code == 0, r.output
    extract(marked, cut, "--to", "fc2_out")
    m = onnx.load(str(cut))
    meta = {p.key: json.loads(p.value) for p in m.metadata_props}
    assert [o.name for o in m.graph.output] == ["fc2_out"]
    assert meta["onnxprobe.exposed"] == {"kind": "raw", "outputs": {"fc2_out": "fc2_out"}}
    r = invoke("mark", cut, "-o", again, "--all", "--stats")
    assert r.exit_code == 0, r.output
    m = onnx.load(str(again))
    meta = json.loads({p.key: p.value for p in m.metadata_props}["onnxprobe.exposed"])
    assert set(meta["outputs"]) <= {o.name for o in m.graph.output} and meta["outputs"]["fc2_out"] == "fc2_out"
    plain = tmp_path / "plain.onnx"  # (cut.onnx was read above: this process writes it no more)
    extract(marked, plain, "--to", "y")  # the model's own output only: nothing marked is left
    assert "onnxprobe.exposed" not in {p.key for p in onnx.load(str(plain)).metadata_props}


def _many_leaks(tmp_path, k=9):
    """t = Sigmoid(x) and y = sum_i (t + Relu_i(x)): --from t leaves k tensors r_i reaching y around it."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Sigmoid", ["x"], ["t"], name="sig")]
    for i in range(k):
        nodes += [helper.make_node("Relu", ["x"], [f"/block.{i}/relu_output_{i}"], name=f"relu{i}"),
                  helper.make_node("Add", ["t", f"/block.{i}/relu_output_{i}"], [f"s{i}"], name=f"add{i}")]
    nodes.append(helper.make_node("Sum", [f"s{i}" for i in range(k)], ["y"], name="sum"))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    p = tmp_path / "leaks.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    return p, ["t"] + [f"/block.{i}/relu_output_{i}" for i in range(k)]


def test_the_advice_to_add_tensors_to_from_lists_them_all_ready_to_paste(tmp_path):
    """The advice named 5 tensors 'and 4 more': on a transformer the user retried several times. The error
    now gives the whole --from value, which cuts in one go (the oracle: onnxruntime runs the cut, and it
    computes y as numpy does from the values it is given); the API's error holds the list."""
    import shlex

    import numpy as np
    import onnxruntime as ort
    from typer.testing import CliRunner

    from onnxprobe import api
    from onnxprobe.cli.main import app
    from onnxprobe.errors import CutLeaks

    path, want = _many_leaks(tmp_path)
    with pytest.raises(CutLeaks) as e:
        api.extract(path, tmp_path / "no.onnx", "t")
    assert e.value.cut_inputs == want and e.value.tensors == want[1:]
    r = CliRunner().invoke(app, ["extract", str(path), "-o", str(tmp_path / "no.onnx"), "--from", "t"])
    line = r.stderr.strip()
    assert r.exit_code == 2 and "more" not in line.split("; add them")[-1], line
    args = shlex.split(line.split("add them to --from: ", 1)[1])  # the value, as a shell reads it
    assert args[0] == "--from" and [n.strip() for n in args[1].split(",")] == want, args
    out = tmp_path / "cut.onnx"
    r = CliRunner().invoke(app, ["extract", str(path), "-o", str(out), *args])
    assert r.exit_code == 0, r.output
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal((2, 3)).astype(np.float32) for n in want}
    (y,) = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(["y"], feeds)
    np.testing.assert_allclose(y, sum(feeds["t"].astype(np.float64) + feeds[n] for n in want[1:]), rtol=1e-5)


def test_a_custom_op_before_the_cut_does_not_stop_typing_its_outputs(tmp_path):
    """--to u, computed by an op shape inference does not know (com.microsoft Gelu), was typed by running the
    whole model, which failed on a custom op before the cut (my.custom Foo, which no runtime here has): 'cannot
    find the type of u'. The cut alone, fed at its typed inputs, types it. Oracle: onnxruntime runs the written
    cut, and it computes Gelu as float64 numpy and math.erf do."""
    import math

    g = helper.make_graph(
        [helper.make_node("Foo", ["x"], ["a"], name="foo", domain="my.custom"), helper.make_node("Relu", ["a"], ["t"], name="r"),
         helper.make_node("Gelu", ["t"], ["u"], name="gelu", domain="com.microsoft"), helper.make_node("Neg", ["u"], ["y"], name="n")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        value_info=[helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3])])  # t is typed, u is not
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.custom", 1),
                                            helper.make_opsetid("com.microsoft", 1)])
    path, out = tmp_path / "custom.onnx", tmp_path / "cut.onnx"
    onnx.save(m, str(path))
    r = invoke("extract", path, "-o", out, "--from", "t", "--to", "u")
    assert r.exit_code == 0, r.output
    t = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    (u,) = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(["u"], {"t": t})
    want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in t.astype(np.float64).ravel()]).reshape(2, 3)
    np.testing.assert_allclose(u, want, rtol=1e-5, atol=1e-6)


def test_a_stale_declared_shape_does_not_pin_the_cut(tmp_path):
    """An export whose input is Nx4 but whose value_info says 1x4 (traced at batch 1): the cut at those tensors
    declared its input 1x4, and onnxruntime refused the 3x4 the whole model runs on. The cut's boundary takes
    the dims the model's inputs give; the original runs the same (the oracle: onnxruntime on the whole model)."""
    from onnxprobe import api

    nodes = [helper.make_node("Relu", ["X"], ["a"], name="r"), helper.make_node("Neg", ["a"], ["b"], name="n"),
             helper.make_node("Abs", ["b"], ["Y"], name="ab")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 4])],
                          value_info=[helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 4]),
                                      helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    onnx.save(m, tmp_path / "stale.onnx")
    before = sha256(tmp_path / "stale.onnx")
    res = api.extract(tmp_path / "stale.onnx", tmp_path / "cut.onnx", ["a"], ["b"])
    assert any("stale export" in n for n in res.notes), res.notes
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    whole = m.SerializeToString()
    mm = onnx.load_from_string(whole)
    mm.graph.ClearField("value_info")  # the oracle's own run of a and b at batch 3
    mm.graph.output.extend([helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("a", "b")])
    a, b = ort.InferenceSession(mm.SerializeToString(), providers=["CPUExecutionProvider"]).run(["a", "b"], {"X": x})
    (got,) = ort.InferenceSession(str(tmp_path / "cut.onnx"), providers=["CPUExecutionProvider"]).run(None, {"a": a})
    np.testing.assert_array_equal(got, b)
    cut = onnx.load(str(tmp_path / "cut.onnx"))
    assert [d.dim_param or d.dim_value for d in cut.graph.input[0].type.tensor_type.shape.dim] == ["N", 4]
    assert sha256(tmp_path / "stale.onnx") == before


def test_declared_shapes_the_inputs_agree_with_are_kept(tmp_path):
    """A static model's cut keeps its declared dims, and says nothing of stale shapes."""
    from onnxprobe import api

    src = onnx.load(str(sample_path("cnn")))
    outs = [o.name for o in src.graph.output]
    res = api.extract(sample_path("cnn"), tmp_path / "cut.onnx", [i.name for i in src.graph.input], outs)
    assert not any("stale export" in n for n in res.notes), res.notes
    cut = onnx.load(str(tmp_path / "cut.onnx"))
    assert [i.type for i in src.graph.input] == [i.type for i in cut.graph.input]
    assert [o.type for o in src.graph.output] == [o.type for o in cut.graph.output]


def test_cut_names_are_typed_as_listings_print_them(tmp_path):
    """--from/--to took a name holding a newline or an escape only as its raw characters, where --name and the tables
    take it as listed ('new\\nline'); the hint for a near miss repeated the escaped form back doubled."""
    names = ["new\nline", "\x1b[31mred", "plain"]
    nodes, prev = [], "X"
    for i, n in enumerate(names):
        nodes.append(helper.make_node("Neg" if i % 2 == 0 else "Exp", [prev], [n], name=f"n{i}"))
        prev = n
    m = helper.make_model(helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])],
                                            [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [2, 3])]),
                          opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    onnx.save(m, tmp_path / "m.onnx")
    r = CliRunner().invoke(app, ["extract", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "cut.onnx"),
                                 "--from", "new\\nline", "--to", "\\x1b[31mred"])
    assert r.exit_code == 0, r.output
    cut = onnx.load(str(tmp_path / "cut.onnx"))
    assert [i.name for i in cut.graph.input] == ["new\nline"] and [o.name for o in cut.graph.output] == ["\x1b[31mred"]
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    (got,) = ort.InferenceSession(str(tmp_path / "cut.onnx"), providers=["CPUExecutionProvider"]).run(None, {"new\nline": x})
    np.testing.assert_allclose(got, np.exp(x), rtol=1e-6)  # the oracle: the one node of the cut, Exp
    r = CliRunner().invoke(app, ["extract", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "c2.onnx"), "--from", "new\\nlin"])
    assert r.exit_code == 2 and "did you mean 'new\\nline'?" in r.stderr, r.stderr


def test_a_to_that_is_a_graph_input_is_said_so(tmp_path):
    """`--to` a graph input: nothing computes it, so 'give a --from it is computed from' could not be followed (and
    --from of it is refused as among the cut's inputs). It is said to be a graph input."""
    m = make_model([helper.make_node("Sigmoid", ["x"], ["w"], name="sig"), helper.make_node("Add", ["w", "k"], ["y"], name="add")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("k", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(m, tmp_path / "m.onnx")
    r = invoke("extract", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "o.onnx"), "--from", "w", "--to", "k")
    assert r.exit_code == 2 and "'k' is a graph input (no node computes it): give a --to a node computes" in r.stderr, r.output
    assert "computed without" not in r.stderr and not (tmp_path / "o.onnx").exists()


def test_the_advice_of_a_cut_without_to_is_true_and_pastes_whole(tmp_path):
    """A graph input also given as an output was said to be 'computed before' --from; an output listed twice was
    suggested twice; a 300-character output name in the --to to paste was cut with '…'."""
    import shlex

    long = "L" * 300
    f = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2])  # noqa: E731
    nodes = [helper.make_node("Relu", ["x"], ["drop"], name="r"), helper.make_node("Neg", ["drop"], ["final"], name="n"),
             helper.make_node("Abs", ["drop"], [long], name="a")]
    m = make_model(nodes, [f("x")], [f("x"), f("final"), f("final"), f(long)])
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    r = invoke("extract", p, "-o", tmp_path / "s.onnx", "--from", "drop")
    assert r.exit_code == 2, r.output
    line = r.stderr.strip()
    assert "model output 'x' does not depend on --from 'drop': it is a graph input" in line, line
    given = shlex.split(line.split("e.g. --to ", 1)[1].split(" (computed from", 1)[0])[0]
    assert given.split(",") == ["final", long], line
    r = invoke("extract", p, "-o", tmp_path / "s.onnx", "--from", "drop", "--to", given)
    assert r.exit_code == 0, r.output
