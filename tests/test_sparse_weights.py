"""A weight stored as a sparse_initializer is a weight like any (QA): `diff --separate-runs` lost the
introduced error of the layer that reads it (a note "introduced error not computed for 'mm': 'Wsp'", a
KeyError: B's cone had no such tensor). Oracle: numpy float64 on the dense weight."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as H
from onnx import numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

DENSE = np.array([[1, 0, 0], [0, 2, 0], [0, 0, 3]], np.float32)


def sparse_model(path, scale: float = 1.0) -> None:
    values = numpy_helper.from_array(np.array([1, 2, 3], np.float32) * np.float32(scale), "w")
    sparse = H.make_sparse_tensor(values, numpy_helper.from_array(np.array([0, 4, 8], np.int64), "w_idx"), [3, 3])
    g = H.make_graph([H.make_node("MatMul", ["x", "w"], ["mm"], name="mm"), H.make_node("Relu", ["mm"], ["y"], name="relu")],
                     "g", [H.make_tensor_value_info("x", T.FLOAT, [2, 3])], [H.make_tensor_value_info("y", T.FLOAT, [2, 3])],
                     sparse_initializer=[sparse])
    onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 17)]), str(path))


def test_the_introduced_error_of_a_layer_reading_a_sparse_weight(tmp_path):
    sparse_model(tmp_path / "a.onnx", scale=1.5)
    sparse_model(tmp_path / "b.onnx")
    x = np.array([[1, -2, 3], [0.5, 1, -1]], np.float32)
    np.save(tmp_path / "x.npy", x)
    r = CliRunner().invoke(app, ["diff", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--separate-runs",
                                 "--input", f"x={tmp_path / 'x.npy'}", "--all", "--json", "-"])
    assert r.exit_code in (0, 1) and "not computed" not in r.stderr, r.output
    pairs = {p["a"]: p for p in json.loads(r.stdout)["pairs"]}
    a, b = x.astype(np.float64) @ (DENSE * 1.5), x.astype(np.float64) @ DENSE
    assert abs(pairs["mm"]["max_abs"] - np.abs(a - b).max()) < 1e-6
    # the MatMul's own error: B's MatMul fed A's x (the same input) is B's mm, so it introduces all of it
    assert abs(pairs["mm"]["introduced_max_abs"] - np.abs(a - b).max()) < 1e-6, pairs["mm"]
    # the Relu's: B's Relu fed A's mm is A's y, exactly
    assert pairs["y"]["introduced_max_abs"] == 0 and pairs["y"]["introduced_count"] == 6, pairs["y"]


def test_grad_through_a_sparse_weight(tmp_path):
    """`grad` refused the model: "the rank of 'w' is unknown" (onnx's inference types nothing that reads a
    sparse initializer). The input's gradient of sum(relu(x W)) is relu'(x W) W^T."""
    sparse_model(tmp_path / "m.onnx")
    x = np.array([[1, -2, 3], [0.5, 1, -1]], np.float32)
    np.save(tmp_path / "x.npy", x)
    r = CliRunner().invoke(app, ["grad", str(tmp_path / "m.onnx"), "--all", "--input", f"x={tmp_path / 'x.npy'}",
                                 "--save-grads", str(tmp_path / "g.npz")])
    assert r.exit_code == 0, r.output
    xw = x.astype(np.float64) @ DENSE
    want = (xw > 0).astype(np.float64) @ DENSE.T
    np.testing.assert_allclose(np.load(tmp_path / "g.npz")["x"], want, rtol=1e-6)


def test_inspect_infers_what_reads_a_sparse_weight(tmp_path):
    sparse_model(tmp_path / "m.onnx")
    r = CliRunner().invoke(app, ["inspect", str(tmp_path / "m.onnx"), "--json", "-"])
    assert r.exit_code == 0 and "not inferred" not in r.stdout, r.output
    assert json.loads(r.stdout)["uninferred_nodes"] == [], r.stdout
