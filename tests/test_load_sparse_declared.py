"""A sparse initializer is loaded by onnxruntime as a dense tensor of its values' element type: declared
among the graph inputs (IR < 4 models list each weight there) as a tensor of that type it loads and runs;
declared a sparse_tensor, a sequence or another element type there, it is refused ("Data in initializer
'W' has element type tensor(float) but usage of initializer in graph expects ..."). The load check
(``graph.node_check``) took a sparse initializer for a value of kind sparse_tensor and refused the first
(QA fuzzing: googlenet, whose weights are graph inputs, with one weight made sparse), and took the others
for no element type. The oracle: onnxruntime loads each model taken here and refuses each one refused."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import ort_session
from onnxprobe.graph.node_check import model_problem

F = TensorProto.FLOAT


def _model(declared: onnx.TypeProto | None, where: str = "input", ir: int = 8) -> onnx.ModelProto:
    """y = x + W, W a sparse initializer of 4 floats, declared ``declared`` among the graph inputs or the value_info."""
    w = np.array([0, 2, 0, 5], np.float32)
    sp = helper.make_sparse_tensor(numpy_helper.from_array(w[[1, 3]], "W"),
                                   numpy_helper.from_array(np.array([1, 3], np.int64), "W_i"), [4])
    inputs = [helper.make_tensor_value_info("x", F, [4])]
    vi = []
    if declared is not None:
        (inputs if where == "input" else vi).append(helper.make_value_info("W", declared))
    g = helper.make_graph([helper.make_node("Add", ["x", "W"], ["y"])], "g", inputs,
                          [helper.make_tensor_value_info("y", F, [4])], value_info=vi, sparse_initializer=[sp])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=ir)


def _tensor(elem=F):
    return helper.make_tensor_type_proto(elem, [4])


TAKEN = {
    "undeclared": lambda: _model(None),
    "input_tensor": lambda: _model(_tensor()),
    "input_tensor_ir3": lambda: _model(_tensor(), ir=3),
    "value_info_tensor": lambda: _model(_tensor(), "value_info"),
}
REFUSED = {
    "input_sparse_tensor": lambda: _model(helper.make_sparse_tensor_type_proto(F, [4])),
    "input_int64": lambda: _model(_tensor(TensorProto.INT64)),
    "input_sequence": lambda: _model(helper.make_sequence_type_proto(_tensor())),
}


def _runs(m: onnx.ModelProto) -> bool:
    s = ort_session(m)
    try:
        return s is not None and np.array_equal(s.run(None, {"x": np.ones(4, np.float32)})[0], [1, 3, 1, 6])
    except Exception:  # noqa: BLE001 - any refusal
        return False


@pytest.mark.parametrize("name", sorted(TAKEN))
def test_a_sparse_weight_declared_as_onnxruntime_loads_it_is_taken(name):
    m = TAKEN[name]()
    assert _runs(m), "the oracle: onnxruntime loads and runs it"
    assert model_problem(m) is None, model_problem(m)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_sparse_weight_declared_otherwise_is_refused(name):
    m = REFUSED[name]()
    assert not _runs(m), "the oracle: onnxruntime refuses it"
    line = model_problem(m)
    assert line is not None and "\n" not in line and "'W'" in line, line
