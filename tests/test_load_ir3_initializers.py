"""A model of IR version < 4 must list each initializer among its graph's inputs. onnxruntime takes an
unlisted one of the main graph that a main-graph node reads, and refuses one only a body reads or none
("initializer_arg was false. Graph ctor should have created NodeArg for initializer. Missing: W"), and a
body's initializer its body does not list ("V in initializer but not in graph input"). diff, which runs a
graph of its own, ran such a model and passed it (QA fuzzing: the control-flow sample with ir_version 1);
layers showed onnxruntime's raw error. It is refused when the model is read, by every command alike. The oracle: onnxruntime refuses each model said broken here and loads each one that is not."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper as h
from onnx import numpy_helper

from conftest import ort_loads, sample_path
from onnxprobe.errors import ModelError
from onnxprobe.graph.integrity import graph_problems, unlisted_initializers
from onnxprobe.graph.io import load_model
from onnxprobe.graph.model import as_model

vi = h.make_tensor_value_info


def _model(ir: int, listed: bool, read_by: str) -> onnx.ModelProto:
    """x (+ W) where W (2 floats) is read by a main-graph node, by an If branch, by no node, or is the If
    branch's own initializer ('body'); W listed among the graph inputs or not."""
    w = numpy_helper.from_array(np.ones(2, np.float32), "W")
    ins = [vi("c", 9, []), vi("x", 1, [2])]
    els = h.make_graph([h.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", 1, None)])
    if read_by == "node":
        nodes = [h.make_node("Add", ["x", "W"], ["y"])]
    elif read_by == "none":
        nodes = [h.make_node("Neg", ["x"], ["y"])]
    else:
        then = h.make_graph([h.make_node("Add", ["x", "W"], ["t"])], "then", [], [vi("t", 1, None)],
                            initializer=[w] if read_by == "body" else [])
        nodes = [h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els)]
    g = h.make_graph(nodes, "g", ins + ([vi("W", 1, [2])] if listed and read_by != "body" else []), [vi("y", 1, None)],
                     initializer=[] if read_by == "body" else [w])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 11)], ir_version=ir)



BROKEN = [(ir, False, by) for ir in (1, 3) for by in ("branch", "none", "body")]
SOUND = [(3, False, "node"), (3, True, "branch"), (3, True, "none"), (3, True, "node")] + [(4, False, by) for by in ("branch", "none", "body")]


@pytest.mark.parametrize("ir,listed,read_by", BROKEN)
def test_an_unlisted_initializer_onnxruntime_refuses_is_named(ir, listed, read_by):
    m = _model(ir, listed, read_by)
    assert not ort_loads(m), "the oracle: onnxruntime refuses it"
    problems = unlisted_initializers(m)
    assert len(problems) == 1 and "'W'" in problems[0] and "\n" not in problems[0], problems


@pytest.mark.parametrize("ir,listed,read_by", SOUND)
def test_an_initializer_onnxruntime_takes_is_no_problem(ir, listed, read_by):
    m = _model(ir, listed, read_by)
    assert ort_loads(m), "the oracle: onnxruntime loads it"
    assert graph_problems(m) == [] and unlisted_initializers(m) == [], unlisted_initializers(m)


@pytest.mark.parametrize("ir,listed,read_by", BROKEN)
def test_it_is_refused_at_load_from_a_file_and_from_python(tmp_path, ir, listed, read_by):
    """The load path every command and API function takes (``graph.io.check_graph``) refuses it in one line:
    layers met onnxruntime's raw 'initializer_arg was false...' error while inspect named the problem."""
    m = _model(ir, listed, read_by)
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    for load in (lambda: load_model(path), lambda: as_model(m)):
        with pytest.raises(ModelError) as e:
            load()
        line = str(e.value)
        assert "'W'" in line and f"IR version {ir}" in line and "\n" not in line, line


@pytest.mark.parametrize("ir,listed,read_by", SOUND)
def test_it_is_loaded_where_onnxruntime_loads_it(tmp_path, ir, listed, read_by):
    m = _model(ir, listed, read_by)
    assert ort_loads(m), "the oracle: onnxruntime loads it"
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    load_model(path)
    as_model(m)


@pytest.mark.parametrize("ir", [3, 0])
def test_every_command_says_the_same_line(tmp_path, ir):
    """The control-flow sample re-saved at IR version 3 (or 0): its If branch reads a weight that is no graph
    input. inspect named it, diff and grad named it in other words, and layers showed onnxruntime's raw error."""
    m = onnx.load(str(sample_path("control_flow")))
    m.ir_version = ir
    path = str(tmp_path / "cf.onnx")
    onnx.save(m, path)
    assert not ort_loads(path), "the oracle: onnxruntime refuses it"
    lines = set()
    for args in (["inspect", path], ["layers", path, "--device", "cpu"], ["diff", path, path, "--device", "cpu"],
                 ["grad", path, "--device", "cpu"]):
        out = subprocess.run([sys.executable, "-m", "onnxprobe", *args], capture_output=True, text=True)
        errors = [ln for ln in out.stderr.splitlines() if ln.startswith("onnxprobe: error:")]
        assert out.returncode != 0 and "Traceback" not in out.stderr and len(errors) == 1, (args, out.stderr)
        assert "initializer_arg" not in errors[0] and "'branch.then.weight'" in errors[0], errors[0]
        lines.add(errors[0][errors[0].index(path):])
    assert len(lines) == 1, lines
