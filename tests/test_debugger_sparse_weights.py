"""The debugger on a model holding a sparse initializer (QA): `show S` said "no tensor named 'S'", as the
tensor index listed dense initializers only. It now lists sparse ones as weights: `show S` prints the dense
values the sparse tensor stands for (zeros where none is stored), its shape, and says it is sparse.
Oracle: the dense matrix in numpy float64, onnxruntime's outputs."""

from __future__ import annotations

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
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
X = np.array([[1.0, -2.0, 0.5]], np.float32)
DENSE = np.zeros((3, 3), np.float64)
DENSE.flat[[0, 4, 5]] = [5, 6, -1]


def model(path, coordinates: bool = False) -> str:
    """y = x S, S a sparse initializer of 3 values in a 3x3."""
    idx = np.array([[0, 0], [1, 1], [1, 2]], np.int64) if coordinates else np.array([0, 4, 5], np.int64)
    s = H.make_sparse_tensor(numpy_helper.from_array(np.array([5, 6, -1], np.float32), "S"),
                             numpy_helper.from_array(idx, "S_idx"), [3, 3])
    g = H.make_graph([H.make_node("MatMul", ["x", "S"], ["y"], name="mm")], "g", [H.make_tensor_value_info("x", T.FLOAT, [1, 3])],
                     [H.make_tensor_value_info("y", T.FLOAT, [1, 3])], sparse_initializer=[s])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


@pytest.mark.parametrize("coordinates", [False, True])
def test_show_prints_a_sparse_weight_dense(tmp_path, coordinates):
    p = model(tmp_path / "m.onnx", coordinates)
    (tmp_path / "s.txt").write_text("show S --full\n")
    r = runner.invoke(app, ["debug", p, "--script", str(tmp_path / "s.txt")], env=ENV)
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    head = r.stdout.splitlines()[0]
    assert "sparse" in head and "[3x3]" in head, head
    stats = r.stdout.splitlines()[1]
    assert f"min {DENSE.min():g}" in stats and f"max {DENSE.max():g}" in stats, stats
    assert "zeros 66.7%" in stats or "zeros 67%" in stats, stats


def test_the_index_gives_the_dense_values_onnxruntime_computes_with(tmp_path):
    p = model(tmp_path / "m.onnx")
    idx = api.index(p)
    assert idx.kinds["S"] == "initializer" and idx.refs["S"].shape == (3, 3)
    w = idx.value("S")
    np.testing.assert_array_equal(w, DENSE)
    y = ort.InferenceSession(p, providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
    np.testing.assert_allclose(X.astype(np.float64) @ w, y, rtol=1e-6)


def test_save_writes_it_dense_and_info_counts_it(tmp_path):
    p = model(tmp_path / "m.onnx")
    (tmp_path / "s.txt").write_text(f"save S {tmp_path / 'S.npy'}\ninfo\n")
    r = runner.invoke(app, ["debug", p, "--script", str(tmp_path / "s.txt")], env=ENV)
    assert r.exit_code == 0, r.output
    np.testing.assert_array_equal(np.load(tmp_path / "S.npy"), DENSE)
    assert "1 weight (" in r.stdout, r.stdout


def const_model(path) -> str:
    """y = x S, S a Constant node's sparse_value (3 values in a 3x3)."""
    s = H.make_sparse_tensor(numpy_helper.from_array(np.array([5, 6, -1], np.float32), "S"),
                             numpy_helper.from_array(np.array([0, 4, 5], np.int64), "S_idx"), [3, 3])
    g = H.make_graph([H.make_node("Constant", [], ["S"], name="const", sparse_value=s), H.make_node("MatMul", ["x", "S"], ["y"], name="mm")],
                     "g", [H.make_tensor_value_info("x", T.FLOAT, [1, 3])], [H.make_tensor_value_info("y", T.FLOAT, [1, 3])])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def _assert_dense_stats(st) -> None:
    assert st is not None and st.count == DENSE.size and st.zeros == 6
    assert (st.min, st.max) == (DENSE.min(), DENSE.max())
    np.testing.assert_allclose([st.mean, st.std], [DENSE.mean(), DENSE.std()], rtol=1e-9)


@pytest.mark.parametrize("build", [model, const_model])
def test_layers_include_constants_gives_a_sparse_weight_statistics(tmp_path, build):
    """QA: `layers --include-constants --name S` said "matches no node, tensor or input name" of a sparse
    initializer, and skipped a sparse Constant ("a sparse tensor, not a tensor; not probed"), while `show`
    printed either dense. Both now get the statistics of the dense values they stand for."""
    p = build(tmp_path / "m.onnx")
    res = api.layers(p, api.Selection(names=("S",), include_constants=True), inputs={"x": X})
    assert [r.name for r, _ in res.rows()] == ["S"]
    _assert_dense_stats(res.stats["S"])
    r = runner.invoke(app, ["layers", p, "--include-constants", "--name", "S"], env=ENV)
    assert r.exit_code == 0 and "not probed" not in r.output, r.output
    assert " S " in r.stdout and f"{DENSE.mean():.4g}" in r.stdout, r.stdout


@pytest.mark.parametrize("build", [model, const_model])
def test_debugger_stats_of_a_sparse_weight(tmp_path, build):
    p = build(tmp_path / "m.onnx")
    (tmp_path / "s.txt").write_text("probe add --name S --include-constants\nstats\n")
    r = runner.invoke(app, ["debug", p, "--script", str(tmp_path / "s.txt")], env=ENV)
    assert r.exit_code == 0 and "not probed" not in r.output, r.output
    row = next(line for line in r.stdout.splitlines() if " S " in line and "probe" not in line)
    assert f"{DENSE.mean():.4g}" in row and f"{DENSE.std():.4g}" in row, row
