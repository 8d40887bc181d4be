"""Declared element types onnxruntime checks at load and the load check (``graph.node_check``) did not: an
output whose type an attribute sets (Cast's ``to``, ConstantOfShape's ``value``, RandomNormal's or EyeLike's
``dtype``...), the outputs of If / Loop / Scan (their bodies' types), values inside their bodies (an outer
value a body reads, declared otherwise in the body's value_info, too), and a
model-local function's outputs (its body's types, a Cast's ``to`` the caller's attribute too). A model declaring Cast(to=FLOAT)'s output INT64 loaded,
and what runs a graph of its own built from it (layers' outputs added, grad) dropped the declaration and
ran it. The oracle: onnxruntime refuses each model refused here and loads each one taken."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import SAMPLES, ort_loads
from onnxprobe.graph.node_check import model_problem

F, I64, I32, F64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.DOUBLE, TensorProto.BOOL


def _vi(name, elem, shape=None):
    """A value declared a tensor of ``elem`` (None: declared of no type, as a body may leave its values)."""
    return helper.make_tensor_value_info(name, elem, shape) if elem is not None else helper.make_value_info(name, onnx.TypeProto())


def _model(nodes, inputs, outputs, value_info=(), functions=(), ir=8):
    g = helper.make_graph(nodes, "g", inputs, outputs, value_info=list(value_info))
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("local", 1)] if functions else [])
    return helper.make_model(g, opset_imports=opsets, ir_version=ir, functions=list(functions))


def _one(node, inputs, declared, where="output"):
    """``node`` writing y, y declared of element type ``declared`` as a graph output or in the value_info."""
    if where == "output":
        return _model([node], inputs, [_vi("y", declared)])
    return _model([node, helper.make_node("Identity", ["y"], ["z"])], inputs, [_vi("z", None)], [_vi("y", declared)])


X, S = [_vi("x", F, [2, 3])], [_vi("s", I64, [2])]
ATTRIBUTE_TYPED = {  # node, its inputs, the element type its attribute (or the attribute's default) gives
    "cast": (helper.make_node("Cast", ["x"], ["y"], to=F), [_vi("x", I64, [2, 3])], F),
    "constant_of_shape": (helper.make_node("ConstantOfShape", ["s"], ["y"]), S, F),
    "constant_of_shape_int32": (helper.make_node("ConstantOfShape", ["s"], ["y"], value=numpy_helper.from_array(np.array([1], np.int32))),
                                S, I32),
    "random_normal": (helper.make_node("RandomNormal", [], ["y"], shape=[2], dtype=F64), [], F64),
    "random_uniform_like": (helper.make_node("RandomUniformLike", ["x"], ["y"], dtype=F64), X, F64),
    "eye_like": (helper.make_node("EyeLike", ["x"], ["y"], dtype=I32), X, I32),
    "eye_like_default": (helper.make_node("EyeLike", ["x"], ["y"]), X, F),
    "multinomial": (helper.make_node("Multinomial", ["x"], ["y"]), X, I32),
    "bernoulli": (helper.make_node("Bernoulli", ["x"], ["y"], dtype=F64), X, F64),
}


def _if(then_nodes, then_out, else_decl=F, then_vi=(), out=F, before=(), x=F):
    """If(c): then runs ``then_nodes`` (writing 'yt', declared ``then_out``), else Neg(x); its output y declared ``out``."""
    then = helper.make_graph(then_nodes, "then", [], [_vi("yt", then_out)], value_info=list(then_vi))
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["ye"])], "else", [], [_vi("ye", else_decl)])
    return _model(list(before) + [helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)],
                  [_vi("c", B, []), _vi("x", x, [2])], [_vi("y", out)])


def _loop(final=F, scanned=F, body_vi=()):
    """Loop carrying s (s + x, Relu'd as t, Neg'd) and scanning out its Relu'd sum."""
    body = helper.make_graph([helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Add", ["s_in", "x"], ["a"]),
                              helper.make_node("Relu", ["a"], ["t"]), helper.make_node("Neg", ["t"], ["s_out"]),
                              helper.make_node("Identity", ["t"], ["scan"])], "body",
                             [_vi("i", I64, []), _vi("cond_in", B, []), _vi("s_in", F, [2])],
                             [_vi("cond_out", B, []), _vi("s_out", F, [2]), _vi("scan", F, [2])], value_info=list(body_vi))
    return _model([helper.make_node("Loop", ["M", "", "s0"], ["s", "sc"], name="loop", body=body)],
                  [_vi("M", I64, []), _vi("s0", F, [2]), _vi("x", F, [2])], [_vi("s", final), _vi("sc", scanned)])


def _scan(final=F, scanned=F):
    body = helper.make_graph([helper.make_node("Add", ["s_in", "x_i"], ["s_out"]), helper.make_node("Cast", ["s_out"], ["y_i"], to=F)],
                             "body", [_vi("s_in", F, [2]), _vi("x_i", F, [2])], [_vi("s_out", F, [2]), _vi("y_i", None, [2])])
    return _model([helper.make_node("Scan", ["s0", "xs"], ["s", "ys"], name="scan", body=body, num_scan_inputs=1)],
                  [_vi("s0", F, [2]), _vi("xs", F, [3, 2])], [_vi("s", final), _vi("ys", scanned)])


def _function(out=F, body_vi=None):
    """A model-local function F(a) = Relu(Cast(a, to=FLOAT)) called on an int64 x; its output y declared ``out``."""
    fn = helper.make_function("local", "F", ["a"], ["b"], [helper.make_node("Cast", ["a"], ["t"], to=F),
                                                          helper.make_node("Relu", ["t"], ["b"])], [helper.make_opsetid("", 17)])
    if body_vi is not None:
        fn.value_info.append(_vi("t", body_vi))
    return _model([helper.make_node("F", ["x"], ["y"], name="f", domain="local")], [_vi("x", I64, [2])], [_vi("y", out)],
                  functions=[fn], ir=10)


def _function_ref(out, given=None, default=None):
    """F(a) = Cast(a, to=@t) called on a float x with t=``given`` (or none, the function's default
    ``default``); its output y declared ``out``."""
    cast = helper.make_node("Cast", ["a"], ["b"])
    cast.attribute.append(onnx.AttributeProto(name="to", ref_attr_name="t", type=onnx.AttributeProto.INT))
    fn = helper.make_function("local", "F", ["a"], ["b"], [cast], [helper.make_opsetid("", 17)],
                              attributes=[] if default is not None else ["t"])
    if default is not None:
        fn.attribute_proto.append(helper.make_attribute("t", default))
    call = helper.make_node("F", ["x"], ["y"], name="f", domain="local", **({"t": given} if given is not None else {}))
    return _model([call], [_vi("x", F, [2])], [_vi("y", out)], functions=[fn], ir=10)


def _cast_then():
    return [helper.make_node("Cast", ["x"], ["yt"], to=F)]


REFUSED = {
    **{f"{k}_{where}": (lambda k=k, where=where: _one(ATTRIBUTE_TYPED[k][0], ATTRIBUTE_TYPED[k][1],
                                                    I64 if ATTRIBUTE_TYPED[k][2] != I64 else F, where))
       for k in ATTRIBUTE_TYPED for where in ("output", "value_info")},
    "if_output": lambda: _if([helper.make_node("Relu", ["x"], ["yt"])], F, out=I64),
    "if_output_of_untyped_branches": lambda: _if([helper.make_node("Relu", ["x"], ["yt"])], None, else_decl=None, out=I64),
    "if_branch_output": lambda: _if([helper.make_node("Relu", ["x"], ["yt"])], I64),
    "if_body_value_info": lambda: _if([helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Identity", ["t"], ["yt"])], F,
                                      then_vi=[_vi("t", I64)]),
    "if_body_cast": lambda: _if(_cast_then(), I64, x=I64, else_decl=None, out=None),
    "if_body_reads_an_outer_cast": lambda: _if([helper.make_node("Relu", ["u"], ["t"]), helper.make_node("Identity", ["t"], ["yt"])], F,
                                               then_vi=[_vi("t", I64)], before=[helper.make_node("Cast", ["x"], ["u"], to=F)]),
    "loop_final": lambda: _loop(final=I64),
    "loop_scanned": lambda: _loop(scanned=I64),
    "loop_body_value_info": lambda: _loop(body_vi=[_vi("t", I64)]),
    # a body's value_info entry of an outer value the body reads ("Tensor element type mismatch. 1 != 7")
    "if_body_value_info_of_an_outer_value": lambda: _if([helper.make_node("Relu", ["x"], ["yt"])], F, then_vi=[_vi("x", I64)]),
    "loop_body_value_info_of_an_outer_value": lambda: _loop(body_vi=[_vi("x", I64)]),
    "scan_final": lambda: _scan(final=I64),
    "scan_scanned_of_a_cast": lambda: _scan(scanned=I64),
    "function_output": lambda: _function(out=I64),
    "function_cast_to_a_caller_attribute": lambda: _function_ref(F, given=I64),
    "function_cast_to_its_default_attribute": lambda: _function_ref(F, default=I64),
    "function_cast_to_a_caller_attribute_over_its_default": lambda: _function_ref(I64, given=F64, default=I64),
}

TAKEN = {
    **{f"{k}_declared_right": (lambda k=k: _one(ATTRIBUTE_TYPED[k][0], ATTRIBUTE_TYPED[k][1], ATTRIBUTE_TYPED[k][2]))
       for k in ATTRIBUTE_TYPED},
    "if": lambda: _if([helper.make_node("Relu", ["x"], ["yt"])], F),
    "loop": lambda: _loop(),
    "scan": lambda: _scan(),
    "function": lambda: _function(),
    "function_cast_to_a_caller_attribute": lambda: _function_ref(I64, given=I64),
    "function_cast_to_its_default_attribute": lambda: _function_ref(I64, default=I64),
    "function_cast_to_a_caller_attribute_over_its_default": lambda: _function_ref(F64, given=F64, default=I64),
    # onnxruntime reads neither of these (measured): a function body's value_info, and a value_info entry of
    # a graph output declared otherwise among the outputs
    "function_body_value_info": lambda: _function(body_vi=I64),
    # nor a body's value_info entry of an outer value the body does not read, or of a body input
    "if_body_value_info_of_an_outer_value_not_read": lambda: _if([helper.make_node("Relu", ["x"], ["yt"])], F, then_vi=[_vi("c", F)]),
    "loop_body_value_info_of_a_body_input": lambda: _loop(body_vi=[_vi("s_in", I64)]),
    "value_info_beside_its_output": lambda: _model([helper.make_node("Cast", ["x"], ["y"], to=F)], [_vi("x", I64, [2])], [_vi("y", F)],
                                                   [_vi("y", I64)]),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_declared_type_onnxruntime_refuses_is_refused_at_load(name):
    m = REFUSED[name]()
    assert not ort_loads(m), "the oracle: onnxruntime refuses it"
    line = model_problem(m)
    assert line is not None and "\n" not in line and "declared of element type" in line, line


@pytest.mark.parametrize("name", sorted(TAKEN))
def test_a_model_onnxruntime_loads_is_taken(name):
    m = TAKEN[name]()
    assert ort_loads(m), "the oracle: onnxruntime loads it"
    assert model_problem(m) is None, model_problem(m)


def test_the_line_names_the_value_the_node_and_the_body():
    line = model_problem(REFUSED["cast_output"]())
    assert line == "'y' is declared of element type INT64, and node #0 'Cast_0' (Cast) computes FLOAT", line
    line = model_problem(REFUSED["if_body_value_info"]())
    assert line == ("'t' is declared of element type INT64, and node #0 'Relu_0' (Relu) computes FLOAT "
                    "(in the then_branch of node #0 'if' (If))"), line


def test_no_sample_model_is_refused():
    for path in sorted(SAMPLES.glob("*.onnx")):
        assert model_problem(onnx.load(str(path), load_external_data=False)) is None, path
