"""onnxruntime makes a weight of each Constant of the main graph when it loads a model, from the node's first
attribute, whatever the opset's Constant takes: value_ints at opset 9 (Constant took only 'value' before
opset 12), or 'value' and 'value_int' both, load and run; a Constant without any attribute it refuses. The
load check (``graph.node_check``) held a main-graph Constant to its opset's schema and refused the first
('has an attribute value_ints, which Constant does not take (onnxruntime refuses it too)'), and took the
last (QA fuzzing: light_resnet50, opset 9, with a value_ints Constant added). In a body onnxruntime holds
a Constant to its schema, and so does the check. The oracle: onnxruntime loads (and runs) each model taken
here and refuses each one refused."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper as h
from onnx import numpy_helper

from conftest import ort_session
from onnxprobe.graph.node_check import model_problem

ONE = numpy_helper.from_array(np.ones(2, np.float32))


def _model(attrs: dict, opset: int, in_body: bool = False) -> onnx.ModelProto:
    """y = Identity(Constant(**attrs)), in the main graph or in both branches of an If."""
    def nodes(suffix):
        return [h.make_node("Constant", [], ["c" + suffix], **attrs), h.make_node("Identity", ["c" + suffix], ["o" + suffix])]
    untyped = onnx.TypeProto()
    if in_body:
        branches = {k: h.make_graph(nodes(k), k, [], [h.make_value_info("o" + k, untyped)]) for k in ("t", "e")}
        g = h.make_graph([h.make_node("If", ["b"], ["y"], then_branch=branches["t"], else_branch=branches["e"])], "g",
                         [h.make_tensor_value_info("b", onnx.TensorProto.BOOL, [])], [h.make_value_info("y", untyped)])
    else:
        g = h.make_graph(nodes("") + [h.make_node("Identity", ["o"], ["y"])], "g", [], [h.make_value_info("y", untyped)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=6)


TAKEN = {
    "value_ints_at_opset_9": lambda: _model({"value_ints": [1, 2]}, 9),
    "value_string_at_opset_9": lambda: _model({"value_string": "s"}, 9),
    "value_and_value_int_at_opset_9": lambda: _model({"value": ONE, "value_int": 3}, 9),
    "value_float_and_value_int_at_opset_13": lambda: _model({"value_float": 1.0, "value_int": 3}, 13),
    "value_ints_at_opset_13": lambda: _model({"value_ints": [1, 2]}, 13),
}
REFUSED = {
    "no_attribute_at_opset_9": lambda: _model({}, 9),
    "no_attribute_at_opset_13": lambda: _model({}, 13),
    "value_ints_at_opset_9_in_a_body": lambda: _model({"value_ints": [1, 2]}, 9, in_body=True),
}


def _runs(m: onnx.ModelProto) -> bool:
    s = ort_session(m)
    try:
        return s is not None and s.run(None, {"b": np.array(True)} if s.get_inputs() else {}) is not None
    except Exception:  # noqa: BLE001 - any refusal
        return False


@pytest.mark.parametrize("name", sorted(TAKEN))
def test_a_main_graph_constant_onnxruntime_loads_is_taken(name):
    m = TAKEN[name]()
    assert _runs(m), "the oracle: onnxruntime loads and runs it"
    assert model_problem(m) is None, model_problem(m)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_constant_onnxruntime_refuses_is_refused(name):
    m = REFUSED[name]()
    assert not _runs(m), "the oracle: onnxruntime refuses it"
    line = model_problem(m)
    assert line is not None and "\n" not in line and "Constant" in line, line
