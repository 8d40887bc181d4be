"""Inputs of a node of element types its op does not take, which onnxruntime refuses at load and the load check
(``graph.node_check`` through ``graph.declared_types``) let through, so that inspect, extract and mark exited 0 on
a model layers / diff / grad could not run (QA fuzzing: element types of weights and inputs flipped, sequence
chains of mismatched element types):

- a weight stored of another element type than its op takes beside its other inputs (a Conv weight DOUBLE or
  INT64 beside a FLOAT input: "Type parameter (T) of Optype (Conv) bound to different types"), or of one its
  op takes for none ("Type 'tensor(int64)' of input parameter (x) of operator (Conv) ... is invalid");
- sequences without value_info whose element type does not fit their consumer: a SequenceConstruct of a FLOAT
  and an INT64 tensor, a SequenceInsert of an INT64 tensor into a sequence of FLOAT, a SequenceAt of a sequence
  of INT64 added to a FLOAT tensor, in the main graph and in If and Loop bodies.

The check is onnx's own: the op's type constraints and inference function (``onnx.shape_inference``), given the
element types the walk computes. The oracle: onnxruntime refuses each model refused here and loads each taken."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper as h, numpy_helper

from conftest import load_check_agrees_with_ort, ort_loads
from onnxprobe.graph.node_check import model_problem

F, I64, D, B = T.FLOAT, T.INT64, T.DOUBLE, T.BOOL
vi = h.make_tensor_value_info


def _model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    return h.make_model(h.make_graph(nodes, "g", inputs, outputs, list(inits)), opset_imports=[h.make_opsetid("", 17)],
                        ir_version=8)


def _untyped(name: str) -> onnx.ValueInfoProto:
    return h.make_value_info(name, onnx.TypeProto())


def _conv(x=F, w=F):
    """Conv(x, w): w a weight stored as ``w``."""
    weight = numpy_helper.from_array(np.ones((2, 1, 1, 1), onnx.helper.tensor_dtype_to_np_dtype(w)), "w")
    return _model([h.make_node("Conv", ["x", "w"], ["y"], name="conv")], [vi("x", x, [1, 1, 3, 3])], [_untyped("y")], [weight])


def _chain(shape, a, b, c):
    """A sequence chain of ``shape`` over x (``a``) and y (``b``), its element added to z (``c``); no value_info."""
    if shape == "construct":
        nodes = [h.make_node("SequenceConstruct", ["x", "y"], ["s"], name="pack")]
    elif shape == "insert":
        nodes = [h.make_node("SequenceConstruct", ["x"], ["s0"]), h.make_node("SequenceInsert", ["s0", "y"], ["s"], name="put")]
    else:
        nodes = [h.make_node("SplitToSequence", ["x"], ["s"], axis=0)]
    return nodes + [h.make_node("SequenceAt", ["s", "zero"], ["e"]), h.make_node("Add", ["e", "z"], ["o"], name="add")]


def _seq(shape, a, b, c, where="main"):
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    ins = [vi("x", a, [2]), vi("y", b, [2]), vi("z", c, [2])]
    nodes = _chain(shape, a, b, c)
    if where == "main":
        return _model(nodes, ins, [_untyped("o")], [zero])
    if where == "if":
        then = h.make_graph(nodes, "then", [], [_untyped("o")], [zero])
        other = h.make_graph([h.make_node("Identity", ["z"], ["o2"])], "else", [], [_untyped("o2")])
        node = h.make_node("If", ["cond"], ["r"], name="choose", then_branch=then, else_branch=other)
        return _model([node], ins + [vi("cond", B, [])], [_untyped("r")])
    body = h.make_graph(nodes + [h.make_node("Identity", ["c_in"], ["c_out"])], "body",
                        [vi("i", I64, []), vi("c_in", B, [])], [vi("c_out", B, []), _untyped("o")], [zero])
    node = h.make_node("Loop", ["n", "cond"], ["r"], name="loop", body=body)
    return _model([node], ins + [vi("n", I64, []), vi("cond", B, [])], [_untyped("r")])


REFUSED = {  # model, the words its line holds
    "conv_weight_double": (lambda: _conv(w=D), ("'conv'", "DOUBLE")),
    "conv_weight_int64": (lambda: _conv(w=I64), ("'conv'", "INT64")),
    "conv_all_int64": (lambda: _conv(x=I64, w=I64), ("'conv'", "INT64")),
    "construct_mixed": (lambda: _seq("construct", F, I64, F), ("'pack'", "INT64")),
    "insert_mixed": (lambda: _seq("insert", F, I64, F), ("'put'", "INT64")),
    "at_then_add_main": (lambda: _seq("split", I64, I64, F), ("'add'", "INT64", "FLOAT")),
    "at_then_add_if": (lambda: _seq("split", I64, I64, F, "if"), ("'add'", "INT64", "FLOAT", "'choose'")),
    "at_then_add_loop": (lambda: _seq("split", D, D, F, "loop"), ("'add'", "DOUBLE", "FLOAT", "'loop'")),
    "insert_mixed_loop": (lambda: _seq("insert", F, D, F, "loop"), ("'put'", "DOUBLE", "'loop'")),
}

TAKEN = {
    "conv_float": lambda: _conv(),
    "construct_alike": lambda: _seq("construct", I64, I64, I64),
    "insert_alike_if": lambda: _seq("insert", D, D, D, "if"),
    "split_alike_loop": lambda: _seq("split", F, F, F, "loop"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_inputs_of_types_the_op_does_not_take_are_refused_at_load(name):
    build, words = REFUSED[name]
    load_check_agrees_with_ort(build(), refused=words)


@pytest.mark.parametrize("name", sorted(TAKEN))
def test_inputs_of_types_the_op_takes_load(name):
    load_check_agrees_with_ort(TAKEN[name]())


def test_every_command_refuses_it_with_one_line(tmp_path):
    path = str(tmp_path / "m.onnx")
    onnx.save(_conv(w=D), path)
    for args in (["inspect", path], ["extract", path, "-o", str(tmp_path / "e.onnx")],
                 ["mark", path, "-o", str(tmp_path / "o.onnx")], ["layers", path, "--device", "cpu"]):
        out = subprocess.run([sys.executable, "-m", "onnxprobe", *args], capture_output=True, text=True)
        errors = [ln for ln in out.stderr.splitlines() if ln.startswith("onnxprobe: error:")]
        assert out.returncode != 0 and "Traceback" not in out.stderr and len(errors) == 1, (args, out.stderr)


def _if_cond(cond_type):
    """If(c) of a condition of ``cond_type``: each branch gives x."""
    branch = lambda name: h.make_graph([h.make_node("Identity", ["x"], [f"{name}_o"])], name, [], [_untyped(f"{name}_o")])
    node = h.make_node("If", ["c"], ["y"], name="choose", then_branch=branch("then"), else_branch=branch("else"))
    return _model([node], [vi("c", cond_type, []), vi("x", F, [2])], [_untyped("y")])


def _partly_known(w):
    """Mul(x, w) where x comes from a node of another domain (its type unknown here), w a weight stored as ``w``."""
    weight = numpy_helper.from_array(np.ones(2, onnx.helper.tensor_dtype_to_np_dtype(w)), "w")
    m = _model([h.make_node("Gelu", ["a"], ["x"], name="gelu", domain="com.microsoft"), h.make_node("Mul", ["x", "w"], ["y"], name="mul")],
               [vi("a", F, [2])], [_untyped("y")], [weight])
    m.opset_import.append(h.make_opsetid("com.microsoft", 1))
    return m


CONSTRAINED = {  # an input of a type its op's type constraint allows for none of its inputs
    "if_condition_int64": (lambda: _if_cond(I64), ("'choose'", "'c'", "INT64")),
    "if_condition_float": (lambda: _if_cond(F), ("'choose'", "'c'", "FLOAT")),
    "mul_weight_bool": (lambda: _partly_known(B), ("'mul'", "'w'", "BOOL")),
}


@pytest.mark.parametrize("name", sorted(CONSTRAINED))
def test_an_input_of_a_type_its_constraint_does_not_allow_is_refused(name):
    build, words = CONSTRAINED[name]
    m = build()
    assert not ort_loads(m), "the oracle: onnxruntime refuses it"
    line = model_problem(m)
    assert line is not None and "\n" not in line and all(w in line for w in words), line


@pytest.mark.parametrize("build", [lambda: _if_cond(B), lambda: _partly_known(F)], ids=["if_bool", "mul_float"])
def test_inputs_their_constraints_allow_load(build):
    assert ort_loads(build()) and model_problem(build()) is None


def _scan8(state_type):
    """An opset-8 Scan (its first input the optional sequence_lens, left out) of a state fed as ``state_type``,
    its body's state input declared FLOAT."""
    body = h.make_graph([h.make_node("Add", ["s_in", "x_in"], ["s_out"]), h.make_node("Identity", ["s_out"], ["y_out"])], "body",
                        [vi("s_in", F, [2]), vi("x_in", F, [2])], [vi("s_out", F, [2]), vi("y_out", F, [2])])
    node = h.make_node("Scan", ["", "s0", "xs"], ["s", "ys"], name="scan", body=body, num_scan_inputs=1)
    m = _model([node], [vi("s0", state_type, [1, 2]), vi("xs", F, [1, 3, 2])], [_untyped("s"), _untyped("ys")])
    m.opset_import[0].version = 8
    return m


def test_an_opset_8_scan_body_input_fed_another_type_is_refused():
    """Before opset 9 a Scan's inputs start with sequence_lens: its body's inputs are the node's from the second
    on, and one declared of another type than the node feeds it onnxruntime refuses ("Tensor element type
    mismatch"), as at opset 9 on."""
    m = _scan8(T.INT32)
    assert not ort_loads(m), "the oracle: onnxruntime refuses it"
    line = model_problem(m)
    assert line is not None and "'s_in'" in line and "INT32" in line and "'scan'" in line, line
    assert ort_loads(_scan8(F)) and model_problem(_scan8(F)) is None
