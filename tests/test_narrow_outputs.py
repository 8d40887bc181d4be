"""A float8 or int4 tensor fetched as it is (a model output; a small tensor of the one-run diff) is read back
widened to float32, exactly, as the probes read the others (QA: `layers --all` of a model whose output is
float8e5m2, and `diff --all` of a model with a uint4 tensor, stopped on "internal error: No corresponding
Numpy type for Tensor Type"). Oracle: onnx.reference's values of the same graph, widened by ml_dtypes."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()
NARROW = {"f8e5": TensorProto.FLOAT8E5M2, "f8e4": TensorProto.FLOAT8E4M3FN, "i4": TensorProto.INT4,
          "u4": TensorProto.UINT4}


def _model(path):
    nodes = [helper.make_node("Cast", ["x"], [n], to=t, name=f"cast_{n}") for n, t in NARROW.items()]
    nodes += [helper.make_node("Cast", ["i4"], ["i4f"], to=TensorProto.FLOAT, name="back_i4"),
              helper.make_node("Cast", ["f8e4"], ["f8f"], to=TensorProto.FLOAT, name="back_f8"),
              helper.make_node("Add", ["i4f", "f8f"], ["y"], name="add")]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("f8e5", TensorProto.FLOAT8E5M2, [2, 3]),
            helper.make_tensor_value_info("u4", TensorProto.UINT4, [2, 3])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])], outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    onnx.save(m, str(path))
    return m


@pytest.fixture
def case(tmp_path):
    m = _model(tmp_path / "m.onnx")
    x = np.array([[0, 1, 2], [3, 4, 6]], np.float32)  # held exactly by every type here
    np.save(tmp_path / "x.npy", x)
    ref = ReferenceEvaluator(m)
    names = list(NARROW) + ["y"]
    want = {n: np.asarray(v).astype(np.float32) for n, v in zip(names, ref.run(names, {"x": x}))}
    return tmp_path, want


def test_layers_reads_narrow_model_outputs_widened(case):
    d, want = case
    r = runner.invoke(app, ["layers", str(d / "m.onnx"), "--all", "--input", f"x={d / 'x.npy'}",
                            "--json", "-", "--save", str(d / "acts.npz")])
    assert r.exit_code == 0, r.output
    rows = {t["name"]: t for t in json.loads(r.stdout)["tensors"]}
    saved = np.load(d / "acts.npz")
    for n, v in want.items():
        assert rows[n]["min"] == float(v.min()) and rows[n]["max"] == float(v.max()), (n, rows[n])
        assert abs(rows[n]["mean"] - float(v.astype(np.float64).mean())) < 1e-12, n
        assert saved[n].dtype == np.float32 and np.array_equal(saved[n], v), n


@pytest.mark.parametrize("extra", [[], ["--separate-runs"]])
def test_diff_compares_narrow_tensors(case, extra):
    d, want = case
    r = runner.invoke(app, ["diff", str(d / "m.onnx"), str(d / "m.onnx"), "--all", "--input",
                            f"x={d / 'x.npy'}", "--json", "-", *extra])
    assert r.exit_code == 0, r.output
    pairs = {p["a"]: p for p in json.loads(r.stdout)["pairs"]}
    for n in want:
        assert pairs[n]["passed"] is True and pairs[n]["max_abs"] == 0, (n, pairs[n])


def test_separate_runs_computes_introduced_error_of_nodes_reading_narrow_tensors(case):
    """`diff --separate-runs` fed A's float8 / int4 values to B's nodes as ml_dtypes arrays, which
    onnxruntime's Python API takes none of: the intro dB of the Cast reading one was "not computed ...
    Numpy_type 260 can't be converted to MLDataType" (QA). They are fed as OrtValues of their ONNX type."""
    d, want = case
    r = runner.invoke(app, ["diff", str(d / "m.onnx"), str(d / "m.onnx"), "--all", "--input", f"x={d / 'x.npy'}",
                            "--json", "-", "--separate-runs"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert not [n for n in out["notes"] if "not computed" in n], out["notes"]
    pairs = {p["a"]: p for p in out["pairs"]}
    for n in ("i4f", "f8f", "y"):
        assert pairs[n]["introduced_exact"] is True and pairs[n]["introduced_count"] == 6, (n, pairs[n])


@pytest.mark.parametrize("elem", [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2, TensorProto.INT4, TensorProto.UINT4])
def test_a_narrow_array_is_fed_as_its_onnx_type(elem):
    """The runtime feeds an ml_dtypes float8 / 4-bit array (5 elements: an odd count, half a byte left over)
    as a tensor of its ONNX type; oracle: onnx.reference's Cast of the same values to float32."""
    import ml_dtypes  # noqa: F401 - the numpy types of the narrow ONNX types

    from onnxprobe.runtime.ort import create_session, run_bound

    g = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT, name="c")], "g",
                          [helper.make_tensor_value_info("x", elem, [5])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    x = np.array([0, 1, 3, 2, 7] if elem == TensorProto.UINT4 else [-1, 3, 0.5 if elem != TensorProto.INT4 else 0, -4, 7],
                 np.float32).astype(helper.tensor_dtype_to_np_dtype(elem))
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    got, _ = run_bound(create_session(m), {"x": x}, ["y"])
    assert got["y"].dtype == np.float32 and np.array_equal(got["y"], want), (got["y"], want)
