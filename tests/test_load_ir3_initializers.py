"""A model of IR version < 4 must list each initializer among its graph's inputs. onnxruntime takes an
unlisted one of the main graph that a main-graph node reads, and refuses one only a body reads or none
("initializer_arg was false. Graph ctor should have created NodeArg for initializer. Missing: W"), and a
body's initializer its body does not list ("V in initializer but not in graph input"). diff, which runs a
graph of its own, ran such a model and passed it (QA fuzzing: the control-flow sample with ir_version 1).
The oracle: onnxruntime refuses each model said broken here and loads each one that is not."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper as h
from onnx import numpy_helper

from conftest import ort_loads
from onnxprobe.graph.integrity import graph_problems

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
def test_an_unlisted_initializer_onnxruntime_refuses_is_a_graph_problem(ir, listed, read_by):
    m = _model(ir, listed, read_by)
    assert not ort_loads(m), "the oracle: onnxruntime refuses it"
    problems = graph_problems(m)
    assert len(problems) == 1 and "'W'" in problems[0] and "\n" not in problems[0], problems


@pytest.mark.parametrize("ir,listed,read_by", SOUND)
def test_an_initializer_onnxruntime_takes_is_no_problem(ir, listed, read_by):
    m = _model(ir, listed, read_by)
    assert ort_loads(m), "the oracle: onnxruntime loads it"
    assert graph_problems(m) == [], graph_problems(m)
