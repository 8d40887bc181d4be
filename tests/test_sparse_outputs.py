"""A graph output that holds a sparse tensor: a sparse initializer given as an output, or a Constant's
sparse_value, even declared a dense tensor (onnx's checker refuses that type). onnxruntime runs the model but
returns a SparseTensor for it, which no numpy array is made of (QA): ``layers`` stopped on an internal
error, ``diff`` said "outputs pass" without listing it (and with no output compared at all where it is
the only one), ``grad`` took a loss of it. Each command now runs and compares what is a tensor and says in
one line why the sparse output is not. Oracle: onnxruntime's own outputs, numpy float64."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as H
from onnx import numpy_helper
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app

runner = CliRunner()
X = np.array([[1.0, -2.0, 0.5]], np.float32)
DENSE = np.zeros((3, 3), np.float64)
DENSE.flat[[0, 4, 5]] = [5, 6, -1]


def _sparse(name):
    return H.make_sparse_tensor(numpy_helper.from_array(np.array([5, 6, -1], np.float32), name),
                                numpy_helper.from_array(np.array([0, 4, 5], np.int64), name + "_idx"), [3, 3])


def model(path, kind: str, y_output: bool = True) -> str:
    """``kind``: "init" (a sparse initializer S given as an output) or "const" (a Constant's sparse_value
    S), S declared a dense float tensor; y = x S an output too where ``y_output``."""
    nodes = [H.make_node("MatMul", ["x", "S"], ["y"], name="mm")]
    if kind == "const":
        nodes.insert(0, H.make_node("Constant", [], ["S"], name="const", sparse_value=_sparse("S")))
    outs = ([H.make_tensor_value_info("y", T.FLOAT, [1, 3])] if y_output else []) + [H.make_tensor_value_info("S", T.FLOAT, [3, 3])]
    g = H.make_graph(nodes, "g", [H.make_tensor_value_info("x", T.FLOAT, [1, 3])], outs,
                     sparse_initializer=[_sparse("S")] if kind == "init" else [])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def ort_outputs(path):
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, {"x": X})))


@pytest.mark.parametrize("kind", ["init", "const"])
def test_onnxruntime_returns_no_array_for_it(tmp_path, kind):
    """The premise: y is a tensor, S comes back as a SparseTensor (no numpy array)."""
    out = ort_outputs(model(tmp_path / "m.onnx", kind))
    np.testing.assert_allclose(out["y"], X.astype(np.float64) @ DENSE, rtol=1e-6)
    assert not isinstance(out["S"], np.ndarray)


@pytest.mark.parametrize("kind", ["init", "const"])
def test_layers_probes_what_is_a_tensor(tmp_path, kind):
    p = model(tmp_path / "m.onnx", kind)
    np.save(tmp_path / "x.npy", X)
    r = runner.invoke(app, ["layers", p, "--all", "--include-constants", "--input", f"x={tmp_path / 'x.npy'}", "--json", "-"])
    assert r.exit_code == 0, r.output
    rows = {t["name"]: t for t in json.loads(r.stdout)["tensors"]}
    want = ort_outputs(p)["y"].astype(np.float64)
    assert rows["y"]["min"] == want.min() and rows["y"]["max"] == want.max()
    # the sparse weight itself: the statistics of the dense values nodes read (densified on the host), as
    # a dense weight's (it was skipped: "S: a sparse tensor, not a tensor; not probed")
    assert (rows["S"]["min"], rows["S"]["max"]) == (DENSE.min(), DENSE.max())
    assert rows["S"]["mean"] == pytest.approx(DENSE.mean(), rel=1e-9)
    assert "not probed" not in r.stderr


@pytest.mark.parametrize("kind", ["init", "const"])
def test_diff_lists_it_unmatched_with_why(tmp_path, kind):
    p = model(tmp_path / "m.onnx", kind)
    res = api.diff(p, p, inputs={"x": X})
    assert res.verdict()[0] == "pass"
    assert [r.pair.a.name for r in res.results] == ["y"]
    why = {u.obs.name: u.reason for u in res.matching.unmatched_a}
    assert "a sparse tensor" in why["S"], why


@pytest.mark.parametrize("kind", ["init", "const"])
def test_diff_of_a_model_whose_only_output_is_sparse_earns_no_pass(tmp_path, kind):
    """y is compared, but it is no output: "outputs pass" was said of an output never compared."""
    p = model(tmp_path / "m.onnx", kind, y_output=False)
    r = runner.invoke(app, ["diff", p, p, "--all"])
    assert r.exit_code == 1, r.output
    assert "none of the outputs holds numbers to compare: 'S' (a sparse tensor" in r.stderr
    assert "Traceback" not in r.output


@pytest.mark.parametrize("kind", ["init", "const"])
def test_grad_takes_no_loss_of_it(tmp_path, kind):
    p = model(tmp_path / "m.onnx", kind, y_output=False)
    r = runner.invoke(app, ["grad", p])
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1 and "'S' (the first output) is a sparse tensor, not a tensor" in r.stderr, r.stderr


@pytest.mark.parametrize("kind", ["init", "const"])
def test_grad_all_differentiates_through_it(tmp_path, kind):
    """S read dense by the MatMul, and an output too: its rank comes from its dims ("the rank of 'S' is
    unknown" where it was an output). d sum(x S) / dx = S^T 1."""
    p = model(tmp_path / "m.onnx", kind)
    np.save(tmp_path / "x.npy", X)
    r = runner.invoke(app, ["grad", p, "--all", "--input", f"x={tmp_path / 'x.npy'}", "--save-grads", str(tmp_path / "g.npz")])
    assert r.exit_code == 0, r.output
    np.testing.assert_allclose(np.load(tmp_path / "g.npz")["x"], (DENSE @ np.ones(3))[None, :], rtol=1e-6)


def test_grad_of_a_model_giving_a_dense_weight_as_an_output(tmp_path):
    """The same with a dense weight as an output: "the rank of 'W' is unknown" (its declared output type
    lost its shape in grad's copy); d sum(x W) / dW = x^T 1."""
    w = np.arange(9, dtype=np.float32).reshape(3, 3)
    g = H.make_graph([H.make_node("MatMul", ["x", "W"], ["y"], name="mm")], "g", [H.make_tensor_value_info("x", T.FLOAT, [1, 3])],
                     [H.make_tensor_value_info("y", T.FLOAT, [1, 3]), H.make_tensor_value_info("W", T.FLOAT, [3, 3])],
                     [numpy_helper.from_array(w, "W")])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "m.onnx"))
    np.save(tmp_path / "x.npy", X)
    r = runner.invoke(app, ["grad", str(tmp_path / "m.onnx"), "--input", f"x={tmp_path / 'x.npy'}", "--save-grads", str(tmp_path / "g.npz")])
    assert r.exit_code == 0, r.output
    np.testing.assert_allclose(np.load(tmp_path / "g.npz")["W"], X.astype(np.float64).T @ np.ones((1, 3)), rtol=1e-6)


@pytest.mark.parametrize("kind", ["init", "const"])
def test_inspect_says_what_onnxruntime_returns_for_it(tmp_path, kind):
    p = model(tmp_path / "m.onnx", kind)
    r = runner.invoke(app, ["inspect", p, "--json", "-"])
    assert r.exit_code == 0, r.output
    notes = json.loads(r.stdout)["notes"]
    assert sum("output 'S' is declared a tensor but holds a sparse tensor" in n for n in notes) == 1, notes
