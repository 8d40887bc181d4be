"""Sequence- and optional-typed values (SequenceConstruct, Optional...) are no tensors: selections skip them
with a note saying why, `mark` never writes a model that cannot load (onnxruntime the judge), and the
tensors around them keep their numbers (numpy float64 the oracle)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as H
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app


def seq_model(path) -> None:
    nodes = [H.make_node("SequenceConstruct", ["x", "x"], ["sq"], name="sc"),
             H.make_node("SequenceAt", ["sq", "i"], ["e"], name="sa"),
             H.make_node("Optional", ["e"], ["op"], name="opt"),
             H.make_node("OptionalGetElement", ["op"], ["g"], name="oge"),
             H.make_node("ConcatFromSequence", ["sq"], ["y0"], name="cfs", axis=0),
             H.make_node("ReduceSum", ["y0"], ["r"], name="rs", keepdims=0),
             H.make_node("Add", ["g", "r"], ["y"], name="add")]
    g = H.make_graph(nodes, "s", [H.make_tensor_value_info("x", T.FLOAT, [2, 3]), H.make_tensor_value_info("i", T.INT64, [])],
                     [H.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 18)]), path)


X = np.arange(6, dtype=np.float32).reshape(2, 3) / 7


def test_layers_skips_them_with_a_note(tmp_path):
    path = tmp_path / "seq.onnx"
    seq_model(path)
    res = api.layers(path, api.Selection(all=True), api.RunConfig(device="cpu"),
                     inputs=api.InputSpec(arrays={"x": X, "i": np.array(1, np.int64)}))
    names = [r.name for r, _ in res.rows()]
    assert "sq" not in names and "op" not in names
    notes = " ".join(res.plan.warnings)
    assert "sq: a sequence" in notes and "op: an optional" in notes
    y0 = np.concatenate([X, X]).astype(np.float64)
    st = res.stats["y0"]
    assert st.count == 6 * 2 and st.mean == pytest.approx(y0.mean()) and st.std == pytest.approx(y0.std())
    assert res.stats["r"].max == pytest.approx(y0.sum(), rel=1e-6)


@pytest.mark.parametrize("args", [["--all"], ["--all", "--stats"]])
def test_mark_writes_a_model_that_loads(tmp_path, args):
    path, out = tmp_path / "seq.onnx", tmp_path / "m.onnx"
    seq_model(path)
    r = CliRunner().invoke(app, ["mark", str(path), "-o", str(out), *args])
    assert r.exit_code == 0, r.output
    s = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert all(o.type.startswith("tensor(") for o in s.get_outputs()), [o.type for o in s.get_outputs()]
    names = [o.name for o in s.get_outputs()]
    got = dict(zip(names, s.run(names, {"x": X, "i": np.array(0, np.int64)})))
    np.testing.assert_allclose(got["y"], X + np.concatenate([X, X]).sum(), rtol=1e-6)


def test_mark_of_an_optional_alone_writes_nothing(tmp_path):
    path, out = tmp_path / "seq.onnx", tmp_path / "m.onnx"
    seq_model(path)
    r = CliRunner().invoke(app, ["mark", str(path), "-o", str(out), "--name", "op", "--stats"])
    assert r.exit_code != 0 and not out.exists()
    assert "optional" in r.output and "Traceback" not in r.output


def test_diff_leaves_them_unmatched(tmp_path):
    path = tmp_path / "seq.onnx"
    seq_model(path)
    r = CliRunner().invoke(app, ["diff", str(path), str(path), "--all", "--input", "i=1"])
    assert r.exit_code == 0, r.output


def seq_output_model(path) -> None:
    """A model whose graph output is itself a sequence (SequenceConstruct's), beside a tensor output."""
    nodes = [H.make_node("Relu", ["x"], ["r"], name="relu"),
             H.make_node("SequenceConstruct", ["x", "r"], ["sq"], name="sc"),
             H.make_node("Neg", ["r"], ["y"], name="neg")]
    g = H.make_graph(nodes, "s", [H.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [H.make_tensor_sequence_value_info("sq", T.FLOAT, [2, 3]), H.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 18)]), path)


@pytest.mark.parametrize("args", [[], ["--all"], ["--all", "--save", "acts.npz"]])
def test_layers_of_a_sequence_output(tmp_path, args, monkeypatch):
    """A sequence as a graph output: onnxruntime returns it, but it is no tensor (it made 'internal error:
    ... Only OrtValues that are Tensors are convertible to Numpy objects'); the tensors keep their numbers."""
    path = tmp_path / "seq_out.onnx"
    seq_output_model(path)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["layers", str(path), "--input", f"x={X.tolist()}", "--json", "out.json", *args])
    assert r.exit_code == 0, r.output
    import json
    rows = {t["name"]: t for t in json.loads((tmp_path / "out.json").read_text())["tensors"]}
    assert "sq" not in rows
    assert rows["y"]["min"] == pytest.approx(float(-X.max())) and rows["y"]["mean"] == pytest.approx(float(-X.mean()))


@pytest.mark.parametrize("args", [[], ["--loss-output", "sq"], ["--loss", "mean"]])
def test_grad_of_a_sequence_output_says_so(tmp_path, args):
    """A loss of a sequence output is refused naming it (it was 'onnxruntime: Failed to load model with error:
    Invalid tensor data type 0.'); the tensor output is still differentiable."""
    path = tmp_path / "seq_out.onnx"
    seq_output_model(path)
    r = CliRunner().invoke(app, ["grad", str(path), *args])
    assert r.exit_code in (1, 2) and "Traceback" not in r.output, r.output
    assert "'sq'" in r.output and "sequence" in r.output and "--loss-output" in r.output, r.output
    res = api.grad(path, api.Selection(all=True), api.RunConfig(device="cpu"), api.GradSpec(output="y"),
                   inputs={"x": X}, save=True)
    np.testing.assert_allclose(res.arrays["r"], -np.ones((2, 3)))


def test_diff_all_lists_them_unmatched_with_why_and_keeps_the_verdict(tmp_path):
    # a diff lists every value of its selection somewhere: sequences, optionals and strings (and a sequence
    # model output) were neither compared nor unmatched; they hold no numbers, so no verdict hangs on them
    nodes = [H.make_node("SequenceConstruct", ["x", "x"], ["sq"], name="sc"),
             H.make_node("Optional", ["x"], ["op"], name="opt"),
             H.make_node("OptionalGetElement", ["op"], ["g"], name="oge"),
             H.make_node("ConcatFromSequence", ["sq"], ["y0"], name="cfs", axis=0),
             H.make_node("Cast", ["x"], ["txt"], name="cast", to=T.STRING),
             H.make_node("SplitToSequence", ["g"], ["parts"], name="split", axis=0),
             H.make_node("Relu", ["y0"], ["y"], name="relu")]
    g = H.make_graph(nodes, "s", [H.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [H.make_tensor_value_info("y", T.FLOAT, [4, 3]), H.make_tensor_sequence_value_info("parts", T.FLOAT, None)])
    path, js = tmp_path / "seq.onnx", tmp_path / "d.json"
    onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 18)]), path)
    for args, listed in ((["--all"], {"sq", "op", "txt", "parts"}), ([], {"parts"})):
        r = CliRunner().invoke(app, ["diff", str(path), str(path), "--json", str(js), *args], env={"COLUMNS": "80"})
        assert r.exit_code == 0, r.output
        d = json.loads(js.read_text())
        assert d["verdict"] == "pass" and d["compared"] >= 1
        for side in ("unmatched_a", "unmatched_b"):
            got = {u["name"]: u for u in d[side] if u["selected"]}
            assert set(got) == listed, (args, side, got)
            assert all(u["cause"] == "no-numbers" for u in got.values())
        assert "a sequence, not a tensor" in d["unmatched_a"][0]["reason"] or "a string" in d["unmatched_a"][0]["reason"]
        assert f"unmatched: {len(listed)} in A, {len(listed)} in B" in " ".join(r.output.split())


def test_diff_all_lists_the_sequences_of_if_branches_too(tmp_path):
    def branch(name: str, op: str) -> onnx.GraphProto:
        return H.make_graph([H.make_node(op, ["x"], [f"{name}_f"]),
                             H.make_node("SequenceConstruct", [f"{name}_f", "x"], [f"{name}_seq"]),
                             H.make_node("ConcatFromSequence", [f"{name}_seq"], [f"{name}_out"], axis=0)],
                            name, [], [H.make_tensor_value_info(f"{name}_out", T.FLOAT, None)])
    nodes = [H.make_node("ReduceSum", ["x"], ["sx"], keepdims=0), H.make_node("Greater", ["sx", "zero"], ["c"]),
             H.make_node("If", ["c"], ["o"], then_branch=branch("then", "Relu"), else_branch=branch("else", "Sigmoid")),
             H.make_node("Neg", ["o"], ["y"])]
    g = H.make_graph(nodes, "g", [H.make_tensor_value_info("x", T.FLOAT, [2, 3])], [H.make_tensor_value_info("y", T.FLOAT, None)],
                     [onnx.numpy_helper.from_array(np.array(0, np.float32), "zero")])
    path, js = tmp_path / "if.onnx", tmp_path / "d.json"
    onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 18)]), path)
    r = CliRunner().invoke(app, ["diff", str(path), str(path), "--all", "--json", str(js)])
    assert r.exit_code == 0, r.output
    d = json.loads(js.read_text())
    assert d["verdict"] == "pass"
    for side in ("unmatched_a", "unmatched_b"):
        assert {u["name"]: u["cause"] for u in d[side]} == {"then_seq": "no-numbers", "else_seq": "no-numbers"}


def sequence_map_model(path) -> None:
    """A SequenceMap whose body squares each element: its body's tensors hold one value per element, and no
    output of the node can carry one out as a tensor (its outputs are sequences)."""
    body = H.make_graph([H.make_node("Mul", ["e", "e"], ["sq_e"], name="square")], "b",
                        [H.make_tensor_value_info("e", T.FLOAT, None)], [H.make_tensor_value_info("sq_e", T.FLOAT, None)])
    nodes = [H.make_node("Relu", ["x"], ["r"], name="relu"),
             H.make_node("SplitToSequence", ["r"], ["parts"], axis=0, name="split"),
             H.make_node("SequenceMap", ["parts"], ["squares"], body=body, name="smap"),
             H.make_node("ConcatFromSequence", ["squares"], ["y"], axis=0, name="cat")]
    g = H.make_graph(nodes, "s", [H.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [H.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 17)]), path)


def test_a_sequence_map_body_is_skipped_with_a_note(tmp_path):
    """`layers --all` and `mark --all` of a valid model with a SequenceMap stopped on "cannot expose 'sq_e':
    it lives in a subgraph of a SequenceMap node" (QA): its body's tensors are skipped, said, and the rest
    probed; naming only such a tensor is an error of one line."""
    path, out = tmp_path / "smap.onnx", tmp_path / "m.onnx"
    sequence_map_model(path)
    x = (np.arange(6, dtype=np.float32).reshape(2, 3) - 2) / 3
    np.save(tmp_path / "x.npy", x)
    r = CliRunner().invoke(app, ["layers", str(path), "--all", "--input", f"x={tmp_path / 'x.npy'}", "--json", "-"])
    assert r.exit_code == 0, r.output
    assert "sq_e" in r.stderr and "SequenceMap" in r.stderr
    rows = {t["name"]: t for t in json.loads(r.stdout)["tensors"]}
    assert "sq_e" not in rows
    relu = np.maximum(x, 0).astype(np.float64)
    assert rows["r"]["max"] == pytest.approx(relu.max()) and rows["r"]["mean"] == pytest.approx(relu.mean())
    assert rows["y"]["mean"] == pytest.approx((relu ** 2).mean())
    r = CliRunner().invoke(app, ["mark", str(path), "-o", str(out), "--all"])
    assert r.exit_code == 0, r.output
    s = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in s.get_outputs()], s.run(None, {"x": x})))
    np.testing.assert_allclose(got["r"], relu, rtol=1e-6)
    out.unlink()
    r = CliRunner().invoke(app, ["mark", str(path), "-o", str(out), "--name", "sq_e"])
    assert r.exit_code == 1 and not out.exists() and "Traceback" not in r.output
    assert len(r.stderr.strip().splitlines()) == 1 and "SequenceMap" in r.stderr, r.stderr


def test_mark_of_outputs_and_a_sequence_output_says_it_adds_nothing(tmp_path):
    """`mark --all` of a model whose every tensor is an output already, one of them a sequence (a ZipMap's,
    a SequenceConstruct's), said "none of the 1 selected tensor(s) that are not model outputs could be
    marked" (exit 1), of that very output (QA): a sequence output adds nothing as a tensor output does."""
    nodes = [H.make_node("Relu", ["x"], ["y"], name="relu"), H.make_node("SequenceConstruct", ["y"], ["sq"], name="sc")]
    g = H.make_graph(nodes, "s", [H.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [H.make_tensor_value_info("y", T.FLOAT, [2, 3]), H.make_tensor_sequence_value_info("sq", T.FLOAT, [2, 3])])
    path, out = tmp_path / "s.onnx", tmp_path / "m.onnx"
    onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 18)]), path)
    plain = CliRunner().invoke(app, ["mark", str(path), "-o", str(out), "--name", "y"])
    r = CliRunner().invoke(app, ["mark", str(path), "-o", str(out), "--all"])
    assert r.exit_code == plain.exit_code == 2 and not out.exists(), (r.output, plain.output)
    assert "adds no output" in r.stderr and "not model outputs" not in r.stderr, r.stderr


def test_diff_all_note_of_a_sequence_map_body_does_not_send_to_layers(tmp_path):
    """`diff --all` of a model with a SequenceMap said its body tensors were not compared and that "`layers
    --all` shows the body tensors' statistics" (QA), but layers skips a SequenceMap's body: the note says
    what is true, and layers is checked to skip them indeed."""
    path = tmp_path / "smap.onnx"
    sequence_map_model(path)
    r = CliRunner().invoke(app, ["diff", str(path), str(path), "--all", "--json", "-"])
    assert r.exit_code == 0, r.output
    note = next(n for n in json.loads(r.stdout)["notes"] if "sq_e" in n)
    layers = CliRunner().invoke(app, ["layers", str(path), "--all", "--json", "-"])
    assert "sq_e" not in {t["name"] for t in json.loads(layers.stdout)["tensors"]}
    assert "layers --all" not in note and "SequenceMap" in note, note
    assert "no output" in note and "not compared by diff" in note, note


def nested_types_model(path) -> None:
    """Outputs of nested non-tensor types: a ZipMap's sequence of maps int64 -> float, an optional sequence;
    an input that is a sequence of sequences."""
    seqmap = H.make_sequence_type_proto(H.make_map_type_proto(T.INT64, H.make_tensor_type_proto(T.FLOAT, None)))
    optseq = H.make_optional_type_proto(H.make_sequence_type_proto(H.make_tensor_type_proto(T.FLOAT, [2, 3])))
    seqseq = H.make_sequence_type_proto(H.make_sequence_type_proto(H.make_tensor_type_proto(T.FLOAT, [2])))
    nodes = [H.make_node("Relu", ["x"], ["p"], name="relu"),
             H.make_node("ZipMap", ["p"], ["zm"], domain="ai.onnx.ml", classlabels_int64s=[0, 1, 2], name="zipmap"),
             H.make_node("SequenceConstruct", ["x"], ["s"], name="sc"), H.make_node("Optional", ["s"], ["o"], name="opt")]
    g = H.make_graph(nodes, "z", [H.make_tensor_value_info("x", T.FLOAT, [2, 3]), H.make_value_info("ss", seqseq)],
                     [H.make_tensor_value_info("p", T.FLOAT, [2, 3]), H.make_value_info("zm", seqmap),
                      H.make_value_info("o", optseq)])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 18), H.make_opsetid("ai.onnx.ml", 3)])
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)


def test_nested_types_are_summarised_whole(tmp_path):
    """`inspect` and `extract` showed a ZipMap's output (a sequence of maps int64 -> float) as "int64
    sequence<?>" (QA): the map's key type read as the dtype, the map lost; an optional sequence read as
    optional<2x3>. Each type is now written whole, in the table and in JSON."""
    path, out = tmp_path / "n.onnx", tmp_path / "x.onnx"
    nested_types_model(path)
    want = {"zm": "sequence<map<int64, float32>>", "o": "optional<sequence<float32>>", "ss": "sequence<sequence<float32>>"}
    r = CliRunner().invoke(app, ["inspect", str(path)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    for name, text in want.items():
        line = next(ln for ln in r.stdout.splitlines() if f" {name} " in ln)
        assert text in line and "int64    sequence" not in line, line
    d = json.loads(CliRunner().invoke(app, ["inspect", str(path), "--json", "-"]).stdout)
    got = {t["name"]: t for t in d["inputs"] + d["outputs"]}
    assert {n: got[n]["type"] for n in want} == want
    assert got["o"]["shape"] == [2, 3] and got["ss"]["shape"] == [2] and got["zm"]["shape"] is None
    assert got["p"]["dtype"] == "float32" and "type" not in got["p"]
    r = CliRunner().invoke(app, ["extract", str(path), "-o", str(out), "--from", "x", "--to", "o,zm", "--format", "json"])
    assert r.exit_code == 0, r.output
    rows = {t["name"]: t for t in json.loads(r.stdout)}
    assert rows["zm"]["dtype"] == want["zm"] and rows["o"]["dtype"] == want["o"] and rows["o"]["shape"] == [2, 3]
    d = api.report(api.extract(str(path), str(out), "x", "o,zm"))
    assert {t["name"]: t.get("type") for t in d["outputs"]} == {"o": want["o"], "zm": want["zm"]}


def _depth(text: str) -> int:
    """How deep the text's brackets nest."""
    deepest = level = 0
    for ch in text:
        level += {"(": 1, ")": -1}.get(ch, 0)
        deepest = max(deepest, level)
    return deepest


def test_sequence_map_note_nests_no_brackets_and_readme_says_it_alike(tmp_path):
    """The SequenceMap-body note ended '(no command probes ...: no output of the node carries their values out
    (its outputs are sequences))' (QA): brackets in brackets. It now says why without nesting, and the README's
    table says the same words."""
    from pathlib import Path

    path = tmp_path / "smap.onnx"
    sequence_map_model(path)
    r = CliRunner().invoke(app, ["diff", str(path), str(path), "--all", "--json", "-"])
    assert r.exit_code == 0, r.output
    note = next(n for n in json.loads(r.stdout)["notes"] if "sq_e" in n)
    assert _depth(note) == 1, note
    why = note[note.index("no output of the node"):].rstrip(")")
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert why in readme, why


def test_node_listing_says_the_nested_types_too(tmp_path):
    """`inspect --nodes` lists each node's inputs and outputs with their shapes; since the type moved to the
    inputs-and-outputs table's dtype cell, a sequence or optional there read as a tensor: the ZipMap's output
    'zm (?)', the Optional's 'o (2x3)', SequenceConstruct's 's (2x3)' (it read 'optional<2x3>' before). QA.
    Oracle: the types the model declares (onnx's own TypeProtos, written out here)."""
    path = tmp_path / "n.onnx"
    nested_types_model(path)
    want = {"zipmap": "zm (sequence<map<int64, float32>>", "opt": "o (optional<sequence<float32>> 2x3)",
            "sc": "s (sequence<float32> 2x3)", "relu": "x (2x3) → p (2x3)"}
    r = CliRunner().invoke(app, ["inspect", str(path), "--nodes", "--format", "json"])
    assert r.exit_code == 0, r.output
    rows = {row["node"]: row["io"] for row in json.loads(r.stdout)}
    for node, text in want.items():
        assert text in rows[node], (node, rows[node])
    r = CliRunner().invoke(app, ["inspect", str(path), "--nodes"], env={"COLUMNS": "200"})
    assert "o (optional<sequence<float32>> 2x3)" in r.stdout, r.stdout


def test_debug_node_view_says_the_whole_type_of_a_sequence_or_optional_output(tmp_path):
    """The debugger's `node` view read '? ?' for the shape and type of a sequence or an optional output (its
    TensorRef has no tensor dtype): it says the whole type, as inspect does (oracle: the types declared by
    the ops themselves, SequenceConstruct of float32 [2,3] and Optional of a float32 tensor)."""
    from onnxprobe import api
    from onnxprobe.session import commands as C
    from onnxprobe.session.state import State

    seq_model(tmp_path / "s.onnx")
    env = C.Env(State([api.load(tmp_path / "s.onnx")], device="cpu"), 120)
    for node, name, want in (("sc", "sq", "sequence<float32>"), ("opt", "op", "optional<float32>")):
        head, table, *_ = C.execute(env, f"node {node}")
        keys = [c.key for c in table.columns]
        (row,) = [r for r in table.rows if r.values[keys.index("tensor")] == name]
        assert row.cells[keys.index("dtype")] == want, row.cells
