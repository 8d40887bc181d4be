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
