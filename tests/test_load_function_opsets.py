"""A model-local function (FunctionProto) whose body holds a node of a domain its own opset_import does not
name: onnxruntime refuses the model ("No opset registered for domain  in function F"), reading the domain
as written ("ai.onnx" is not ""), whatever the model imports. grad inlined the function and ran its own
graph of such a model, exit 0 (QA fuzzing: control_flow.onnx with a node replaced by a call of a function
without opset_import). The oracle: onnxruntime refuses each model refused here and loads each one taken."""

from __future__ import annotations

import onnx
import pytest
from onnx import helper as h

from conftest import ort_loads
from onnxprobe.graph.node_check import model_problem

vi = h.make_tensor_value_info
ONNX, LOCAL = h.make_opsetid("", 17), h.make_opsetid("local", 1)


def _model(fn_opsets, node_domain: str = "", calls_local: bool = False) -> onnx.ModelProto:
    """y = F(x), F(a) = Neg(a) (of ``node_domain``) or G(a) (another local function), F importing ``fn_opsets``."""
    fns = [h.make_function("local", "G", ["a"], ["b"], [h.make_node("Neg", ["a"], ["b"])], [ONNX])] if calls_local else []
    body = [h.make_node("G", ["a"], ["b"], domain="local")] if calls_local else [h.make_node("Neg", ["a"], ["b"], domain=node_domain)]
    fns.append(h.make_function("local", "F", ["a"], ["b"], body, list(fn_opsets)))
    g = h.make_graph([h.make_node("F", ["x"], ["y"], domain="local")], "g", [vi("x", 1, [2])], [vi("y", 1, [2])])
    return h.make_model(g, opset_imports=[ONNX, LOCAL], ir_version=9, functions=fns)


REFUSED = {
    "no_opset_import": lambda: _model([]),
    "local_only": lambda: _model([LOCAL]),
    "ai_onnx_spelled_otherwise": lambda: _model([h.make_opsetid("ai.onnx", 17)]),
    "node_of_domain_ai_onnx": lambda: _model([ONNX], node_domain="ai.onnx"),
    "calls_a_local_function_without_its_domain": lambda: _model([ONNX], calls_local=True),
}
TAKEN = {
    "imports_onnx": lambda: _model([ONNX]),
    "imports_an_older_onnx": lambda: _model([h.make_opsetid("", 13)]),
    "calls_a_local_function": lambda: _model([ONNX, LOCAL], calls_local=True),
}



@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_function_node_of_a_domain_it_does_not_import_is_refused(name):
    m = REFUSED[name]()
    assert not ort_loads(m), "the oracle: onnxruntime refuses it"
    line = model_problem(m)
    assert line is not None and "\n" not in line and "'local.F'" in line, line


@pytest.mark.parametrize("name", sorted(TAKEN))
def test_a_function_importing_its_domains_is_taken(name):
    m = TAKEN[name]()
    assert ort_loads(m), "the oracle: onnxruntime loads it"
    assert model_problem(m) is None, model_problem(m)
