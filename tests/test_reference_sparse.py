"""``diff --vs-reference`` on a model holding a sparse initializer (or a Constant's sparse_value): onnx.reference
could not load it ("SparseTensorProto has no data_location field", QA). The reference runner now runs a copy
with those weights dense (``graph.densify.dense_weights``, which leaves its input as it was). Oracle:
onnxruntime's outputs of the model as written, numpy float64."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as H
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.graph.densify import dense_weights

runner = CliRunner()
X = np.array([[1.0, -2.0, 0.5]], np.float32)
DENSE = np.zeros((3, 3), np.float64)
DENSE.flat[[0, 4, 5]] = [5, 6, -1]


def _sparse(name, coordinates: bool = False):
    idx = np.array([[0, 0], [1, 1], [1, 2]], np.int64) if coordinates else np.array([0, 4, 5], np.int64)
    return H.make_sparse_tensor(numpy_helper.from_array(np.array([5, 6, -1], np.float32), name),
                                numpy_helper.from_array(idx, name + "_idx"), [3, 3])


def model(path, kind: str, coordinates: bool = False) -> str:
    """y = Relu(x S): S a sparse initializer ("init") or a Constant's sparse_value ("const")."""
    nodes = [H.make_node("MatMul", ["x", "S"], ["t"], name="mm"), H.make_node("Relu", ["t"], ["y"], name="relu")]
    if kind == "const":
        nodes.insert(0, H.make_node("Constant", [], ["S"], name="const", sparse_value=_sparse("S", coordinates)))
    g = H.make_graph(nodes, "g", [H.make_tensor_value_info("x", T.FLOAT, [1, 3])], [H.make_tensor_value_info("y", T.FLOAT, [1, 3])],
                     sparse_initializer=[_sparse("S", coordinates)] if kind == "init" else [])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


@pytest.mark.parametrize("coordinates", [False, True])
@pytest.mark.parametrize("kind", ["init", "const"])
def test_dense_weights_runs_as_onnxruntime_runs_the_model(tmp_path, kind, coordinates):
    p = model(tmp_path / "m.onnx", kind, coordinates)
    m = onnx.load(p)
    before = m.SerializeToString()
    dense = dense_weights(m)
    assert m.SerializeToString() == before  # its input left as it was
    got = ReferenceEvaluator(dense).run(None, {"x": X})[0]
    want = ort.InferenceSession(p, providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, np.maximum(X.astype(np.float64) @ DENSE, 0), rtol=1e-6)


@pytest.mark.parametrize("kind", ["init", "const"])
def test_diff_vs_reference_runs_it(tmp_path, kind):
    p = model(tmp_path / "m.onnx", kind)
    res = api.diff(p, vs_reference=True, inputs={"x": X}, selection=api.Selection(all=True))
    assert res.verdict()[0] == "pass", res.verdict()
    assert {r.pair.a.name for r in res.results} >= {"t", "y"}
    r = runner.invoke(app, ["diff", p, "--vs-reference"])
    assert r.exit_code == 0, r.output
    assert "could not load" not in r.output


def test_a_model_of_no_sparse_weight_is_given_back_as_it_is(tmp_path):
    m = onnx.load(model(tmp_path / "m.onnx", "init"))
    del m.graph.sparse_initializer[:]
    m.graph.initializer.append(numpy_helper.from_array(DENSE.astype(np.float32), "S"))
    assert dense_weights(m) is m


def _function_model() -> onnx.ModelProto:
    """y = F(x): a model-local function F whose body reads a Constant's sparse_value, and an If in it whose
    then-branch does too (y = x S + x S)."""
    then = H.make_graph([H.make_node("Constant", [], ["S2"], sparse_value=_sparse("S2")), H.make_node("MatMul", ["a", "S2"], ["m"])],
                        "then", [], [H.make_tensor_value_info("m", T.FLOAT, [1, 3])])
    other = H.make_graph([H.make_node("Identity", ["a"], ["m"])], "else", [], [H.make_tensor_value_info("m", T.FLOAT, [1, 3])])
    body = [H.make_node("Constant", [], ["S"], sparse_value=_sparse("S")), H.make_node("MatMul", ["a", "S"], ["p"]),
            H.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(True))),
            H.make_node("If", ["c"], ["q"], then_branch=then, else_branch=other), H.make_node("Add", ["p", "q"], ["b"])]
    fn = H.make_function("local", "F", ["a"], ["b"], body, opset_imports=[H.make_opsetid("", 17)])
    g = H.make_graph([H.make_node("F", ["x"], ["y"], domain="local", name="f")], "g", [H.make_tensor_value_info("x", T.FLOAT, [1, 3])],
                     [H.make_tensor_value_info("y", T.FLOAT, [1, 3])])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17), H.make_opsetid("local", 1)], functions=[fn])
    m.ir_version = 8
    return m


def test_sparse_weights_inside_a_model_local_function_are_densified():
    """QA: dense_weights walked the main graph and its bodies only, so onnx.reference failed on a sparse
    Constant inside a function ('Issues with types ... OpFunction')."""
    m = _function_model()
    dense = dense_weights(m)
    assert dense is not m
    got = ReferenceEvaluator(dense).run(None, {"x": X})[0]
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, 2 * (X.astype(np.float64) @ DENSE), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_a_sparse_weight_of_a_numpy_foreign_type_keeps_its_type(dtype):
    """A sparse bfloat16 / float8 initializer becomes a dense one of that same type (ml_dtypes), and the model
    computes as onnxruntime computes the sparse one: y = x Cast(S, float)."""
    import ml_dtypes

    dt = getattr(ml_dtypes, dtype)
    s = H.make_sparse_tensor(numpy_helper.from_array(np.array([5, 6, -1], dt), "S"),
                             numpy_helper.from_array(np.array([0, 4, 5], np.int64), "S_idx"), [3, 3])
    g = H.make_graph([H.make_node("Cast", ["S"], ["Sf"], to=T.FLOAT), H.make_node("MatMul", ["x", "Sf"], ["y"])], "g",
                     [H.make_tensor_value_info("x", T.FLOAT, [1, 3])], [H.make_tensor_value_info("y", T.FLOAT, [1, 3])],
                     sparse_initializer=[s])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 21)])
    m.ir_version = 10
    dense = dense_weights(m)
    (w,) = dense.graph.initializer
    assert w.name == "S" and w.data_type == s.values.data_type and list(w.dims) == [3, 3]
    np.testing.assert_array_equal(numpy_helper.to_array(w).astype(np.float64), DENSE)
    got = ReferenceEvaluator(dense).run(None, {"x": X})[0]
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
    np.testing.assert_array_equal(got, want)
