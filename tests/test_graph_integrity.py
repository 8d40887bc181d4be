"""Graphs onnxruntime will not load, found without running them: inspect listed nothing and exited 0 for a
node input nothing gives, a cycle or a tensor two nodes write, and extract kept one of two producers by
chance (exit 0); a weight with a negative dimension counted -4 parameters and -16 B of external data, and
layers printed onnxruntime's 'Out of bounds dimensions' naming neither tensor nor file (QA)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import convert_model_to_external_data
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])

BROKEN = {
    "dupout": ([helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Sigmoid", ["x"], ["y"], name="b")],
               "tensor 'y' is written by 2 nodes: node #0 'a' (Relu), node #1 'b' (Sigmoid)"),
    "dangling": ([helper.make_node("Add", ["x", "ghost"], ["y"], name="add")],
                 "node #0 'add' (Add) reads 'ghost', which no node, graph input or initializer gives"),
    "cycle": ([helper.make_node("Add", ["x", "b"], ["a"], name="n1"), helper.make_node("Relu", ["a"], ["b"], name="n2"),
               helper.make_node("Identity", ["a"], ["y"], name="n3")],
              "node #0 'n1' (Add), node #1 'n2' (Relu) form a cycle"),
    "dupname": ([helper.make_node("Relu", ["x"], ["h"], name="dup"), helper.make_node("Sigmoid", ["h"], ["y"], name="dup")],
                "node name 'dup' is used by 2 nodes: node #0 'dup' (Relu), node #1 'dup' (Sigmoid)"),
}


def _save(tmp_path, name, nodes, outputs=(Y,)):
    m = make_model(nodes, [X], list(outputs))
    path = tmp_path / f"{name}.onnx"
    onnx.save(m, str(path))
    return m, path


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_inspect_lists_what_onnxruntime_refuses_and_exits_1(tmp_path, name):
    nodes, line = BROKEN[name]
    m, path = _save(tmp_path, name, nodes)
    with pytest.raises(Exception):  # the oracle: onnxruntime refuses the model as written
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    r = runner.invoke(app, ["inspect", str(path)])
    assert r.exit_code == 1 and line in r.stdout, r.output
    r = runner.invoke(app, ["inspect", str(path), "--json", "-"])
    assert r.exit_code == 1 and any(line in p for p in json.loads(r.stdout)["problems"]), r.output


def test_a_sound_graph_has_no_problems_and_an_output_listed_twice_is_a_note(tmp_path):
    _, good = _save(tmp_path, "good", [helper.make_node("Relu", ["x"], ["y"], name="a")])
    r = runner.invoke(app, ["inspect", str(good), "--json", "-"])
    assert r.exit_code == 0 and json.loads(r.stdout)["problems"] == []
    m, twice = _save(tmp_path, "twice", [helper.make_node("Relu", ["x"], ["y"], name="a")], (Y, Y))
    ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])  # loads: not a problem
    r = runner.invoke(app, ["inspect", str(twice)])
    assert r.exit_code == 0 and "graph output 'y' is listed 2 times" in r.stderr, r.output


def test_extract_refuses_a_tensor_with_two_producers(tmp_path):
    _, path = _save(tmp_path, "dupout", BROKEN["dupout"][0])
    r = runner.invoke(app, ["extract", str(path), "-o", str(tmp_path / "ex.onnx"), "--to", "y"])
    assert r.exit_code == 1 and not (tmp_path / "ex.onnx").exists(), r.output
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and "tensor 'y' is written by 2 nodes: node #0 'a' (Relu), node #1 'b' (Sigmoid)" in r.stderr


@pytest.mark.parametrize("external", [False, True])
def test_a_negative_dimension_is_a_model_error_naming_the_tensor(tmp_path, external):
    w = numpy_helper.from_array(np.ones((1, 4), np.float32), "w")
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [X], [Y], [w])
    if external:
        convert_model_to_external_data(m, location="w.bin", size_threshold=0)
    m.graph.initializer[0].dims[:] = [-1, 4]
    path = tmp_path / "neg.onnx"
    onnx.save(m, str(path))
    for cmd in ("inspect", "layers"):
        r = runner.invoke(app, [cmd, str(path)])
        assert r.exit_code == 1, r.output
        assert r.stderr.strip().splitlines() == [r.stderr.strip()] and "tensor 'w' has dimensions [-1, 4]" in r.stderr


def test_names_in_problems_are_escaped_once():
    """A name with a newline reads as it is listed (\\n), not escaped a second time by repr (\\\\n)."""
    g = helper.make_graph([helper.make_node("Relu", ["a\nb"], ["y"], name="n")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    from onnxprobe.graph.integrity import graph_problems

    lines = graph_problems(helper.make_model(g))
    assert any("'a\\nb'" in line for line in lines), lines
    assert not any("\\\\n" in line for line in lines), lines


Z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4])


@pytest.mark.parametrize("nodes, to, line", [
    # a node of the cut reads a name nothing gives: the extracted model read it from nowhere, exit 0
    ([helper.make_node("Relu", ["x"], ["h"], name="ok"), helper.make_node("Add", ["h", "ghost"], ["y"], name="add"),
      helper.make_node("Sigmoid", ["h"], ["z"], name="fine")], "y",
     "node #1 'add' (Add) reads 'ghost', which no node, graph input or initializer gives"),
    # the cut holds a cycle (its walk back from y never reaches an input): written as it was, exit 0
    (BROKEN["cycle"][0] + [helper.make_node("Sigmoid", ["x"], ["z"], name="fine")], "y", "node #0 'n1' (Add), node #1 'n2' (Relu) form a cycle"),
])
def test_extract_refuses_a_cut_onnxruntime_would_not_load_and_keeps_a_sound_one(tmp_path, nodes, to, line):
    """extract wrote a cut holding a dangling read or a cycle with a note ('written although onnx.checker
    rejects it') and exit 0: a model no runtime loads. The cut's own problems are refused as inspect names
    them (the model's node numbers); a sound cut of the same broken model is still written."""
    m, path = _save(tmp_path, "broken", nodes, (Y, Z))
    out = tmp_path / "ex.onnx"
    r = runner.invoke(app, ["extract", str(path), "-o", str(out), "--to", to])
    assert r.exit_code == 1 and not out.exists(), r.output
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and line in r.stderr, r.stderr
    r = runner.invoke(app, ["extract", str(path), "-o", str(tmp_path / "z.onnx"), "--to", "z"])
    assert r.exit_code == 0, r.output
    x = np.linspace(-1, 1, 4, dtype=np.float32).reshape(1, 4)
    (z,) = ort.InferenceSession(str(tmp_path / "z.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    want = 1 / (1 + np.exp(-(np.maximum(x, 0) if nodes[0].op_type == "Relu" else x)))
    np.testing.assert_allclose(z, want, rtol=1e-6)


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_mark_refuses_a_model_onnxruntime_would_not_load(tmp_path, name):
    """mark wrote a copy of a model whose tensor two nodes write with a note ('written although onnx.checker
    rejects it') and exit 0, where extract refuses the model: the copy keeps the whole graph, so every reason
    the model does not load is one error line, exit 1, and no file (the same check as extract's)."""
    nodes, line = BROKEN[name]
    nodes = nodes + [helper.make_node("Relu", ["x"], ["h2"], name="fine"), helper.make_node("Sigmoid", ["h2"], ["z"], name="s")]
    m, path = _save(tmp_path, name, nodes, (Y, Z))
    with pytest.raises(Exception):  # the oracle: onnxruntime refuses the model as written
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    out = tmp_path / "marked.onnx"
    r = runner.invoke(app, ["mark", str(path), "-o", str(out), "--all"])
    assert r.exit_code == 1 and not out.exists(), r.output
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and line in r.stderr, r.stderr


def test_the_load_check_and_the_graph_check_say_a_node_one_way():
    """graph.integrity said a node "#0 'a'" (unnamed: "#0 (Relu)") and graph.node_check "node 'a' (Relu)"
    (unnamed: "a Relu node"): one model's two refusals named one node two ways. Both say it as
    ``walk.node_label`` does, an unnamed node by the name listings give it ('Relu_1')."""
    from onnxprobe.graph.integrity import graph_problems
    from onnxprobe.graph.node_check import model_problem

    for name, said in (("a", "node #1 'a' (Relu)"), ("", "node #1 'Relu_1' (Relu)")):
        dup = make_model([helper.make_node("Sigmoid", ["x"], ["y"], name="s"), helper.make_node("Relu", ["x"], ["y"], name=name)],
                         [X], [Y])
        twice = helper.make_node("Relu", ["x"], ["z"], name=name)
        twice.attribute.extend([helper.make_attribute("alpha", 1.0)] * 2)
        attr = make_model([helper.make_node("Sigmoid", ["x"], ["y"], name="s"), twice], [X], [Y])
        assert said in graph_problems(dup)[0], graph_problems(dup)
        assert model_problem(attr).startswith(said + " gives its attribute 'alpha' twice"), model_problem(attr)


def _relu(i, o, name):
    return helper.make_node("Relu", [i], [o], name=name)


def _const(o, name):
    return helper.make_node("Constant", [], [o], name=name, value=numpy_helper.from_array(np.ones((1, 4), np.float32)))


def _if(then_nodes, else_nodes, before=()):
    """x -> If(true) -> y, its branches' nodes given; ``before``: main-graph nodes ahead of it."""
    t = helper.make_graph(then_nodes, "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 4])])
    e = helper.make_graph(else_nodes, "else", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, 4])])
    cond = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(True)))
    return [cond, *before, helper.make_node("If", ["c"], ["y"], name="if", then_branch=t, else_branch=e)]


@pytest.mark.parametrize("nodes, said", [
    ([_relu("x", "h", ""), _relu("h", "y", "")], None),  # empty names are no names
    ([_const("k", "dup"), helper.make_node("Add", ["x", "k"], ["h"], name="dup"), _relu("h", "y", "r")],
     None),  # a Constant becomes a weight
    ([_const("k", "dup"), _const("j", "dup"), helper.make_node("Add", ["k", "j"], ["s"], name="a"),
      helper.make_node("Add", ["x", "s"], ["h"], name="b"), _relu("h", "y", "r")],
     None),  # silero-vad's openvino variant: 15 Constants 'F0::anon'
    (_if([_relu("x", "t", "dup")], [_relu("x", "e", "dup")]), None),  # one name in two bodies
    (_if([_relu("h", "t", "dup")], [_relu("x", "e", "q")], [_relu("x", "h", "dup")]), None),  # in a body and its graph
    ([_relu("x", "a", "dup"), _relu("a", "b", "dup"), _relu("b", "y", "dup")],
     "node name 'dup' is used by 3 nodes: node #0 'dup' (Relu), node #1 'dup' (Relu), node #2 'dup' (Relu)"),
    (_if([_relu("x", "a", "dup"), _relu("a", "t", "dup")], [_relu("x", "e", "q")]),
     "node name 'dup' is used by 2 nodes in body 'then': node #0 'dup' (Relu), node #1 'dup' (Relu)"),
])
def test_two_nodes_of_one_name_are_a_problem_where_onnxruntime_refuses_them(tmp_path, nodes, said):
    """inspect listed no problem and exited 0 for two nodes named 'dup', which onnxruntime 1.32 refuses ("two
    nodes with same node name"), and mark wrote a copy no session loads (QA). The rule is onnxruntime's,
    measured: each case's verdict is checked against a session of the model itself."""
    m, path = _save(tmp_path, "m", nodes)
    try:
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        refused = None
    except Exception as e:  # noqa: BLE001 - the oracle
        refused = str(e)
    assert (refused is None) == (said is None), refused
    r = runner.invoke(app, ["inspect", str(path), "--json", "-"])
    problems = json.loads(r.stdout)["problems"]
    if said is None:
        assert r.exit_code == 0 and problems == [], r.output
        r = runner.invoke(app, ["mark", str(path), "-o", str(tmp_path / "marked.onnx"), "--all"])
        assert r.exit_code == 0, r.output
        ort.InferenceSession(str(tmp_path / "marked.onnx"), providers=["CPUExecutionProvider"])
    else:
        assert r.exit_code == 1 and problems == [said], r.output


def test_extract_refuses_a_cut_with_two_nodes_of_one_name_and_keeps_one_without(tmp_path):
    """A cut that keeps both nodes named 'dup' is one onnxruntime refuses; one that keeps one of them loads."""
    nodes = [_relu("x", "h", "dup"), helper.make_node("Sigmoid", ["h"], ["y"], name="dup")]
    _, path = _save(tmp_path, "dup", nodes)
    out = tmp_path / "ex.onnx"
    r = runner.invoke(app, ["extract", str(path), "-o", str(out), "--to", "y"])
    assert r.exit_code == 1 and not out.exists(), r.output
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and "node name 'dup' is used by 2 nodes" in r.stderr
    r = runner.invoke(app, ["extract", str(path), "-o", str(out), "--to", "h"])
    assert r.exit_code == 0, r.output
    x = np.linspace(-1, 1, 4, dtype=np.float32).reshape(1, 4)
    (h,) = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_array_equal(h, np.maximum(x, 0))


def test_a_runtime_that_runs_two_nodes_of_one_name_still_runs_them(tmp_path):
    """onnx.reference runs such a model: layers and diff leave the verdict to the runtime, whose own error
    names the name where it refuses (onnxruntime: 'two nodes with same node name (dup)')."""
    _, path = _save(tmp_path, "dup", BROKEN["dupname"][0])
    r = runner.invoke(app, ["diff", str(path), str(path), "--runtime", "reference"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["layers", str(path)])
    assert r.exit_code == 1 and "(dup)" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.output


@pytest.mark.parametrize("returned", ["W", "x", "own"])
def test_a_body_that_returns_an_outer_value_is_a_problem_as_onnxruntime_says(tmp_path, returned):
    """An If branch whose output is a value of the graph around it (an initializer, an input): onnxruntime refuses
    the model ("an outer scope value being returned directly"); inspect said nothing and mark wrote the copy with
    a note blaming its stacking. The oracle is onnxruntime's own load."""
    import numpy as np
    import onnxruntime as ort
    from onnx import numpy_helper

    from onnxprobe import api

    f = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2])  # noqa: E731
    then = (helper.make_graph([helper.make_node("Identity", ["x"], ["own"])], "t", [], [f("own")]) if returned == "own"
            else helper.make_graph([], "t", [], [f(returned)]))
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["n"])], "e", [], [f("n")])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="if")], "g",
                          [f("x"), helper.make_tensor_value_info("c", TensorProto.BOOL, [])], [f("y")],
                          [numpy_helper.from_array(np.ones(2, np.float32), "W")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    try:
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        loads = True
    except Exception:  # noqa: BLE001
        loads = False
    problems = api.inspect(path).problems
    assert loads == (returned == "own") and (not problems) == loads, problems
    if not loads:
        assert quote_in(returned, problems[0]) and "then_branch" in problems[0]
        with pytest.raises(api.ModelError):
            api.mark(path, tmp_path / "mk.onnx", api.Selection(all=True))
        assert not (tmp_path / "mk.onnx").exists()


def quote_in(name: str, text: str) -> bool:
    return f"'{name}'" in text


def _inspected(path, m: onnx.ModelProto, sound: bool) -> tuple:
    """``m`` saved at ``path``, whether onnxruntime loads it checked against ``sound`` (the oracle), and (path, the
    problems inspect lists): none and exit 0 for a sound model, exit 1 for another."""
    onnx.save(m, str(path))
    try:
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        loads = True
    except Exception:  # noqa: BLE001
        loads = False
    assert loads == sound
    r = runner.invoke(app, ["inspect", str(path), "--json", "-"])
    problems = json.loads(r.stdout)["problems"]
    assert (r.exit_code, bool(problems)) == ((0, False) if sound else (1, True)), r.output
    return path, problems


BODIES = {  # an If's then_branch (its output 'to'), each broken as BROKEN's main graphs are
    "dupout": ([helper.make_node("Relu", ["x"], ["to"], name="a"), helper.make_node("Neg", ["x"], ["to"], name="b")],
               "tensor 'to' is written by 2 nodes: node #0 'a' (Relu), node #1 'b' (Neg)"),
    "dangling": ([helper.make_node("Add", ["x", "ghost"], ["to"], name="a")], "node #0 'a' (Add) reads 'ghost'"),
    "cycle": ([helper.make_node("Add", ["x", "u"], ["t"], name="a"), helper.make_node("Relu", ["t"], ["u"], name="b"),
               helper.make_node("Abs", ["t"], ["to"], name="c")], "node #0 'a' (Add), node #1 'b' (Relu) form a cycle"),
    "sound": ([helper.make_node("Relu", ["x"], ["t"], name="a"), helper.make_node("Neg", ["t"], ["to"], name="b")], None),
}


@pytest.mark.parametrize("name", sorted(BODIES))
def test_a_broken_body_is_a_problem_as_a_broken_main_graph_is(tmp_path, name):
    """A tensor two nodes of an If body write, a body input nothing gives, a cycle in a body: inspect listed no
    problem (exit 0), and mark and extract wrote copies no runtime loads (exit 0, a checker note). The oracle:
    onnxruntime loads the model or refuses it; a sound body reading the outer x is no problem."""
    nodes, line = BODIES[name]
    f = (lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]))
    then = helper.make_graph(nodes, "then", [], [f("to")])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["eo"], name="e")], "else", [], [f("eo")])
    g = helper.make_graph([helper.make_node("Relu", ["x0"], ["x"], name="r"),
                           helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)], "g",
                          [f("x0"), helper.make_tensor_value_info("c", TensorProto.BOOL, [])], [f("y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path, problems = _inspected(tmp_path / f"{name}.onnx", m, line is None)
    if line is None:
        return
    assert any(line in p and "'if' (If) then_branch" in p for p in problems), problems
    for args in (["mark", str(path), "-o", str(tmp_path / "m.onnx"), "--all"],
                 ["extract", str(path), "-o", str(tmp_path / "e.onnx"), "--from", "x,c", "--to", "y"]):
        r = runner.invoke(app, args)
        assert r.exit_code == 1 and line in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.output
        assert not (tmp_path / args[3].rsplit("/", 1)[-1]).exists()


@pytest.mark.parametrize("op, opset, said", [("FooBar", 17, "ONNX defines no operator of that name"),
                                             ("Gelu", 17, "it exists from opset 20 on, and the model imports opset 17"),
                                             ("Gelu", 20, None)])
def test_an_op_onnx_does_not_define_at_the_models_opset_is_a_problem(tmp_path, op, opset, said):
    """Relu -> FooBar (the ONNX domain) -> Abs: onnxruntime refuses the model, inspect listed no problem (exit 0) and
    mark wrote it. The oracle: onnxruntime's load."""
    nodes = [helper.make_node("Relu", ["x"], ["t"], name="a"), helper.make_node(op, ["t"], ["u"], name="b"),
             helper.make_node("Abs", ["u"], ["y"], name="c")]
    m = helper.make_model(helper.make_graph(nodes, "g", [X], [Y]), opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    path, problems = _inspected(tmp_path / "m.onnx", m, said is None)
    if said is None:
        return
    assert any(f"'b' ({op})" in p and said in p for p in problems), problems
    r = runner.invoke(app, ["mark", str(path), "-o", str(tmp_path / "o.onnx"), "--all"])
    assert r.exit_code == 1 and said in r.stderr and not (tmp_path / "o.onnx").exists(), r.output
