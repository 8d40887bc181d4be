"""A graph input that names an initializer (dense or sparse: IR < 4 models list each weight there, and an
overridable weight is one) declared of another shape than the initializer's: onnxruntime refuses the model
("Shape of initializer W does not match. {3,2} != {2,3}"); a dimension given as a name or left out matches
any size, the rank must match. diff, which runs a graph of its own, ran it and passed (QA fuzzing: bert with
a LayerNorm bias also a graph input of dims [128, 3]). The same declaration in the value_info onnxruntime
does not read. The oracle: onnxruntime refuses each model refused here and loads each one taken."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from conftest import ort_loads
from onnxprobe.graph.node_check import model_problem

W = np.arange(6, dtype=np.float32).reshape(2, 3)


def _model(shape, sparse=False, where="input", ir=8) -> onnx.ModelProto:
    """y = x + W, W (2x3) a weight declared of ``shape`` among the graph inputs or in the value_info."""
    decl = [helper.make_tensor_value_info("W", 1, shape)]
    dense = [] if sparse else [numpy_helper.from_array(W, "W")]
    sp = [helper.make_sparse_tensor(numpy_helper.from_array(W.ravel()[1:], "W"),
                                    numpy_helper.from_array(np.arange(1, 6), "W_i"), [2, 3])] if sparse else []
    g = helper.make_graph([helper.make_node("Add", ["x", "W"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", 1, [2, 3])] + (decl if where == "input" else []),
                          [helper.make_tensor_value_info("y", 1, None)], value_info=decl if where == "vi" else [],
                          initializer=dense, sparse_initializer=sp)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=ir)


KINDS = {"dense": {}, "sparse": {"sparse": True}, "ir3": {"ir": 3}}
TAKEN = {"same": [2, 3], "named_dim": ["n", 3], "named_dims": ["n", "m"], "no_shape": None}
REFUSED = {"transposed": [3, 2], "more_dims": [2, 3, 1], "flat": [6], "named_of_other_rank": ["n"],
           "scalar": [], "one_dim_differs": [1, 3], "named_and_differs": ["n", 4]}



@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_weight_input_of_another_shape_is_refused(name, kind):
    m = _model(REFUSED[name], **KINDS[kind])
    assert not ort_loads(m), "the oracle: onnxruntime refuses it"
    line = model_problem(m)
    assert line is not None and "\n" not in line and "'W'" in line and "2x3" in line, line


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("name", sorted(TAKEN))
def test_a_weight_input_of_its_shape_is_taken(name, kind):
    m = _model(TAKEN[name], **KINDS[kind])
    assert ort_loads(m), "the oracle: onnxruntime loads it"
    assert model_problem(m) is None, model_problem(m)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_value_info_entry_of_a_weight_is_not_read(name):
    m = _model(REFUSED[name], where="vi")
    assert ort_loads(m), "the oracle: onnxruntime loads it"
    assert model_problem(m) is None, model_problem(m)
