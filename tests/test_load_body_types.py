"""Body declarations onnxruntime refuses at load and the load check (``graph.node_check``) let through to a
later, worse message: an If / Loop / Scan body input or output declared a tensor of element type UNDEFINED
(0) ("Invalid tensor data type 0"), a Loop or Scan body input declared of another element type than the
node feeds it (a carried value declared DOUBLE fed FLOAT, the iteration number declared INT32), and If
branches whose outputs have different element types. Each is refused with one line naming the node and the
value. The oracle: onnxruntime refuses each model refused here and loads each one taken (an UNDEFINED
value_info entry inside a body, which it does not read, among them). QA."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T, helper as h, numpy_helper as nh

from conftest import ort_loads
from onnxprobe.graph.node_check import model_problem

F, I64, B = T.FLOAT, T.INT64, T.BOOL
vi = h.make_tensor_value_info


def _model(nodes, inputs, outputs):
    return h.make_model(h.make_graph(nodes, "g", inputs, outputs), opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def _if(then_t=F, else_t=F, then_vi=(), internal=False):
    """If(c): then Identity(x) -> t, else Identity(c2) -> e (c2 float, or int64 where ``else_t`` is)."""
    c2 = nh.from_array(np.ones(2, np.int64 if else_t == I64 else np.float32), "c2")
    then = h.make_graph([h.make_node("Identity", ["x"], ["t"])], "then", [], [vi("t", then_t, [2])], value_info=list(then_vi))
    other = h.make_graph([h.make_node("Identity", ["c2"], ["e"])], "else", [], [vi("e", else_t, [2])], [c2])
    node = h.make_node("If", ["c"], ["yi" if internal else "y"], then_branch=then, else_branch=other, name="if0")
    nodes = [node] + ([h.make_node("Shape", ["yi"], ["y"])] if internal else [])
    return _model(nodes, [vi("c", B, []), vi("x", F, [2])], [vi("y", I64, [1]) if internal else vi("y", F, None)])


def _loop(v_in=F, v_out=F, it=I64, body_vi=()):
    body = h.make_graph([h.make_node("Identity", ["cin"], ["cout"]), h.make_node("Add", ["v", "v"], ["vout"])], "body",
                        [vi("i", it, []), vi("cin", B, []), vi("v", v_in, [2])], [vi("cout", B, []), vi("vout", v_out, [2])],
                        value_info=list(body_vi))
    return _model([h.make_node("Loop", ["n", "", "x"], ["y"], body=body, name="loop0")], [vi("n", I64, []), vi("x", F, [2])],
                  [vi("y", F, [2])])


def _scan(s_in=F, s_out=F, body_vi=()):
    body = h.make_graph([h.make_node("Add", ["s", "s"], ["s2"]), h.make_node("Identity", ["e"], ["o"])], "body",
                        [vi("s", s_in, [2]), vi("e", F, [2])], [vi("s2", s_out, [2]), vi("o", F, [2])], value_info=list(body_vi))
    return _model([h.make_node("Scan", ["s0", "xs"], ["sf", "os"], body=body, num_scan_inputs=1, name="scan0")],
                  [vi("s0", F, [2]), vi("xs", F, [3, 2])], [vi("sf", s_out if s_out else F, [2]), vi("os", F, [3, 2])])


REFUSED = {  # model, the node and the value its line names
    "if_branch_output_undefined": (lambda: _if(then_t=0), "'if0'", "'t'"),
    "loop_body_input_undefined": (lambda: _loop(v_in=0), "'loop0'", "'v'"),
    "loop_body_output_undefined": (lambda: _loop(v_out=0), "'loop0'", "'vout'"),
    "loop_iteration_undefined": (lambda: _loop(it=0), "'loop0'", "'i'"),
    "scan_body_input_undefined": (lambda: _scan(s_in=0), "'scan0'", "'s'"),
    "loop_body_input_of_another_type": (lambda: _loop(v_in=T.DOUBLE, v_out=T.DOUBLE), "'loop0'", "'v'"),
    "loop_iteration_int32": (lambda: _loop(it=T.INT32), "'loop0'", "'i'"),
    "scan_state_of_another_type": (lambda: _scan(s_in=T.DOUBLE, s_out=T.DOUBLE), "'scan0'", "'s'"),
    "if_branches_of_other_types": (lambda: _if(else_t=I64), "'if0'", "'y'"),
    "if_branches_of_other_types_inside": (lambda: _if(else_t=I64, internal=True), "'if0'", "'yi'"),
}

TAKEN = {
    "if": lambda: _if(), "loop": lambda: _loop(), "scan": lambda: _scan(),
    # a body's value_info entry of element type UNDEFINED: onnxruntime does not read it (measured)
    "if_body_value_info_undefined": lambda: _if(then_vi=[vi("t", 0, [2])]),
    "loop_body_value_info_undefined": lambda: _loop(body_vi=[vi("vout", 0, [2])]),
    "scan_body_value_info_undefined": lambda: _scan(body_vi=[vi("o", 0, [2])]),
}



@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_body_declaration_onnxruntime_refuses_is_refused_at_load(name):
    build, node, value = REFUSED[name]
    m = build()
    assert not ort_loads(m), "the oracle: onnxruntime refuses it"
    line = model_problem(m)
    assert line is not None and "\n" not in line and node in line and value in line, line


@pytest.mark.parametrize("name", sorted(TAKEN))
def test_a_body_onnxruntime_loads_is_taken(name):
    m = TAKEN[name]()
    assert ort_loads(m), "the oracle: onnxruntime loads it"
    assert model_problem(m) is None, model_problem(m)
