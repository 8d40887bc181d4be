"""A graph holding two initializers of one name (different values): onnx's checker refuses it, onnxruntime
loads it and runs with the last copy ("the model will use the latest encountered initializer"), a sparse
one over a dense one (QA). Every command reads the copy onnxruntime runs with: ``grad`` divided the weight's
gradient by the first copy's norm (|g|/|t|), ``extract`` wrote both copies. Oracle: onnxruntime's own
outputs and numpy float64."""

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
FIRST = np.array([[1, 2, 0.5], [3, -4, 1]], np.float32)
LAST = np.array([[10, -20, 5], [30, 40, -2]], np.float32)
X = np.array([[1, 0.5], [-0.25, 2]], np.float32)
NOTE = "initializers of one name more than once"


def dup_model(path, inits=(FIRST, LAST), sparse=None) -> str:
    g = H.make_graph([H.make_node("MatMul", ["x", "W"], ["mm"], name="mm"), H.make_node("Relu", ["mm"], ["y"], name="relu")],
                     "g", [H.make_tensor_value_info("x", T.FLOAT, [2, 2])], [H.make_tensor_value_info("y", T.FLOAT, [2, 3])],
                     [numpy_helper.from_array(w, "W") for w in inits], sparse_initializer=sparse or [])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def ort_run(path, x=X):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_onnxruntime_runs_the_last_copy_and_the_checker_refuses_it(tmp_path):
    """What the rest stands on: onnxruntime's choice, measured here (if it changes, so must onnxprobe)."""
    p = dup_model(tmp_path / "m.onnx")
    np.testing.assert_allclose(ort_run(p), np.maximum(X.astype(np.float64) @ LAST, 0), rtol=1e-6)
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(onnx.load(p))


def test_grad_ratio_divides_by_the_copy_onnxruntime_runs(tmp_path):
    p = dup_model(tmp_path / "m.onnx")
    r = runner.invoke(app, ["grad", p, "--input", f"x={_npy(tmp_path)}", "--json", "-"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    w = next(g for g in out["gradients"] if g["tensor"] == "W")
    # d sum(relu(x W)) / dW = x^T relu'(x W), with W the last copy
    xw = X.astype(np.float64) @ LAST
    dw = X.astype(np.float64).T @ (xw > 0).astype(np.float64)
    assert w["norm"] == pytest.approx(np.linalg.norm(dw), rel=1e-6)
    assert w["value_norm"] == pytest.approx(np.linalg.norm(LAST.astype(np.float64)), rel=1e-6)
    assert w["ratio"] == pytest.approx(np.linalg.norm(dw) / np.linalg.norm(LAST.astype(np.float64)), rel=1e-6)
    assert sum(NOTE in n for n in out["notes"]) == 1, out["notes"]


def _npy(tmp_path):
    np.save(tmp_path / "x.npy", X)
    return tmp_path / "x.npy"


def test_layers_statistics_are_onnxruntimes_with_one_note(tmp_path):
    p = dup_model(tmp_path / "m.onnx")
    res = api.layers(p, inputs={"x": X}, selection=api.Selection(all=True))
    want = ort_run(p).astype(np.float64)
    assert res.stats["y"].max == want.max() and res.stats["y"].mean == pytest.approx(want.mean(), abs=1e-9)
    assert sum(NOTE in n for n in api.load(p).warnings) == 1


def test_inspect_counts_the_copy_that_runs_with_one_note(tmp_path):
    p = dup_model(tmp_path / "m.onnx")
    r = runner.invoke(app, ["inspect", p, "--json", "-"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert sum(NOTE in n for n in out["notes"]) == 1, out["notes"]
    assert out["initializers"]["count"] == 1 and out["parameters"] == LAST.size, out["initializers"]


@pytest.mark.parametrize("argv", [["extract", "--to", "mm"], ["mark", "--op", "MatMul"]])
def test_the_written_copy_holds_the_copy_onnxruntime_runs(tmp_path, argv):
    """The copy written passes onnx's checker and runs as the input model does on onnxruntime."""
    p = dup_model(tmp_path / "m.onnx")
    out = tmp_path / "o.onnx"
    r = runner.invoke(app, [argv[0], p, "-o", str(out), *argv[1:]])
    assert r.exit_code == 0, r.output
    assert NOTE in r.stderr
    m = onnx.load(str(out))
    onnx.checker.check_model(m)
    assert [numpy_helper.to_array(t).tolist() for t in m.graph.initializer if t.name == "W"] == [LAST.tolist()]
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(["mm"], {"x": X})[0]
    np.testing.assert_allclose(got, X.astype(np.float64) @ LAST, rtol=1e-6)


def test_diff_against_the_single_copy_model_passes_and_against_the_first_copy_fails(tmp_path):
    """A with W twice runs with LAST: the same as B holding LAST alone (weights paired by name, their
    introduced error 0), unlike B holding FIRST."""
    a = dup_model(tmp_path / "a.onnx")
    same = dup_model(tmp_path / "same.onnx", inits=(LAST,))
    other = dup_model(tmp_path / "other.onnx", inits=(FIRST,))
    res = api.diff(a, same, inputs={"x": X}, selection=api.Selection(all=True))
    assert res.verdict()[0] == "pass"
    assert sum(NOTE in n for n in res.notes) == 1, res.notes
    # said of B too (it was only of A), once where both hold it
    assert sum(NOTE in n for n in api.diff(same, a, inputs={"x": X}).notes) == 1
    assert sum(NOTE in n for n in api.diff(a, a, inputs={"x": X}).notes) == 1
    assert api.diff(a, other, inputs={"x": X}, selection=api.Selection(all=True)).verdict()[0] == "fail"
    x = _npy(tmp_path)
    # weight gradients paired by the weight's name: d sum(relu(x W)) / dW with W the last copy on both sides
    assert runner.invoke(app, ["diff", a, same, "--grad", "--input", f"x={x}"]).exit_code == 0
    assert runner.invoke(app, ["diff", a, other, "--grad", "--input", f"x={x}"]).exit_code == 1


def test_a_sparse_copy_wins_over_a_dense_one(tmp_path):
    values = numpy_helper.from_array(np.array([7, -3], np.float32), "W")
    sp = H.make_sparse_tensor(values, numpy_helper.from_array(np.array([1, 5], np.int64), "W_idx"), [2, 3])
    p = dup_model(tmp_path / "m.onnx", inits=(FIRST,), sparse=[sp])
    dense = np.zeros((2, 3), np.float64)
    dense.flat[[1, 5]] = [7, -3]
    want = ort_run(p)
    np.testing.assert_allclose(want, np.maximum(X.astype(np.float64) @ dense, 0), rtol=1e-6)
    res = api.layers(p, inputs={"x": X})
    assert res.stats["y"].max == pytest.approx(want.max()) and res.stats["y"].mean == pytest.approx(want.astype(np.float64).mean())
    r = runner.invoke(app, ["grad", p, "--input", f"x={_npy(tmp_path)}", "--wrt", "x", "--save-grads", str(tmp_path / "g.npz")])
    assert r.exit_code == 0, r.output
    # d sum(relu(x W)) / dx = relu'(x W) W^T, W the sparse copy
    xw = X.astype(np.float64) @ dense
    np.testing.assert_allclose(np.load(tmp_path / "g.npz")["x"], (xw > 0) @ dense.T, rtol=1e-6)


def test_the_debugger_shows_the_copy_that_runs(tmp_path):
    p = dup_model(tmp_path / "m.onnx")
    r = runner.invoke(app, ["debug", p], input="show W\nquit\n")
    assert r.exit_code == 0, r.output
    assert "max 40" in r.output and "min -20" in r.output, r.output


def test_a_body_holding_an_initializer_twice_is_refused_as_onnxruntime_refuses_it(tmp_path):
    """In an If branch onnxruntime refuses two initializers of one name ("initializer name is not unique"):
    no command runs a collapsed copy of it that onnxruntime would not have run."""
    def body(out, vals):
        return H.make_graph([H.make_node("Add", ["x", "B"], [out])], out + "_body", [], [H.make_tensor_value_info(out, T.FLOAT, [1, 2])],
                            [numpy_helper.from_array(np.array(v, np.float32), "B") for v in vals])
    node = H.make_node("If", ["c"], ["y"], name="if", then_branch=body("t", [[[1, 1]], [[10, 10]]]), else_branch=body("e", [[[2, 2]]]))
    g = H.make_graph([node], "g", [H.make_tensor_value_info("x", T.FLOAT, [1, 2]), H.make_tensor_value_info("c", T.BOOL, [])],
                     [H.make_tensor_value_info("y", T.FLOAT, [1, 2])])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    p = str(tmp_path / "m.onnx")
    onnx.save(m, p)
    with pytest.raises(Exception, match="not unique"):
        ort.InferenceSession(p, providers=["CPUExecutionProvider"])
    r = runner.invoke(app, ["layers", p, "--input", "c=true"])
    assert r.exit_code == 1 and r.stderr.count("\n") == 1 and "not unique" in r.stderr, r.output
    r = runner.invoke(app, ["inspect", p, "--json", "-"])
    assert any("'B'" in x and "onnxruntime refuses" in x for x in json.loads(r.stdout)["problems"]), r.stdout
    r = runner.invoke(app, ["mark", p, "-o", str(tmp_path / "o.onnx"), "--all"])
    assert r.exit_code == 1 and "initializers named 'B'" in r.stderr and not (tmp_path / "o.onnx").exists(), r.output


def test_two_sparse_initializers_of_one_name_are_refused_as_onnxruntime_refuses_them(tmp_path):
    """Two sparse copies onnxruntime refuses ("Duplicate sparse_tensor_initializer"): no command keeps one
    of them and runs a model onnxruntime would not have run."""
    def sp(v):
        return H.make_sparse_tensor(numpy_helper.from_array(np.array([v, v], np.float32), "W"),
                                    numpy_helper.from_array(np.array([0, 4], np.int64), "W_idx"), [2, 3])
    p = dup_model(tmp_path / "m.onnx", inits=(), sparse=[sp(3.0), sp(7.0)])
    with pytest.raises(Exception, match="Duplicate sparse_tensor_initializer"):
        ort.InferenceSession(p, providers=["CPUExecutionProvider"])
    for argv in (["layers", p], ["grad", p], ["diff", p, p]):
        r = runner.invoke(app, argv)
        assert r.exit_code == 1 and r.stderr.count("\n") == 1 and "'W'" in r.stderr, (argv, r.output)
    r = runner.invoke(app, ["inspect", p, "--json", "-"])
    assert any("2 sparse initializers named 'W'" in x for x in json.loads(r.stdout)["problems"]), r.stdout
