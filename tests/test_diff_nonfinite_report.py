"""A layer that brings in -inf where the other model has float32's lowest value (a mask filled with -inf
against one filled with -3.4e38): over the finite values nothing differs, so its SQNRs read +inf, which
looked like no error: the intro column said "inf" for the layer that made the mismatch, and the line under
the table said "every pair exact (1)" while two pairs failed. The construction is the oracle."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app


def _mask_model(path, fill: float):
    inits = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in (("half", 0.5), ("zero", 0.0), ("fill", fill))]
    nodes = [helper.make_node("Greater", ["x", "half"], ["cond"]), helper.make_node("Where", ["cond", "zero", "fill"], ["mask"]),
             helper.make_node("Add", ["x", "mask"], ["y"])]
    onnx.save(make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])], inits), path)


def test_a_layer_bringing_in_inf_is_not_read_as_exact(tmp_path):
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    _mask_model(a, -np.inf)
    _mask_model(b, float(np.finfo(np.float32).min))
    x = np.random.default_rng(0).random((4, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    over = int((x <= 0.5).sum())  # where the fill is taken: -inf in A, a finite value in B
    assert over
    r = CliRunner().invoke(app, ["diff", str(a), str(b), "--all", "--input", f"x={tmp_path / 'x.npy'}"], env={"COLUMNS": "120"})
    assert r.exit_code == 1, r.output
    rows = {ln.split()[1]: ln for ln in r.stdout.splitlines() if ln[:3].strip().lstrip("▶").isdigit()}
    assert "NaN/Inf" in rows["mask"].split("name", 1)[1].split("FAIL")[0]  # its intro column says the mismatch
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("SQNR along depth")]
    assert "every pair exact" not in line and "2 pairs with NaN/Inf" in line, line
    r = CliRunner().invoke(app, ["diff", str(a), str(b), "--all", "--input", f"x={tmp_path / 'x.npy'}", "--json", "-"])
    pairs = {p["a"]: p for p in json.loads(r.stdout)["pairs"]}
    assert pairs["mask"]["introduced_nonfinite_mismatch"] == over and pairs["y"]["introduced_nonfinite_mismatch"] == 0


def test_machine_readable_rows_say_nan_inf_too(tmp_path):
    """CSV, JSON rows and the HTML sort value read "inf" (the best value) for the layer that made the mismatch."""
    from onnxprobe.report.html import sort_value

    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    _mask_model(a, -np.inf)
    _mask_model(b, float(np.finfo(np.float32).min))
    np.save(tmp_path / "x.npy", np.random.default_rng(0).random((4, 4)).astype(np.float32))
    args = ["diff", str(a), str(b), "--all", "--input", f"x={tmp_path / 'x.npy'}"]
    csv = CliRunner().invoke(app, [*args, "--format", "csv"]).stdout.splitlines()
    rows = {r.split(",")[1]: dict(zip(csv[0].split(","), r.split(","))) for r in csv[1:]}
    assert rows["mask"]["introduced_sqnr_db"] == "NaN/Inf" and rows["y"]["introduced_sqnr_db"] == "exact"
    js = {r["tensor"]: r for r in json.loads(CliRunner().invoke(app, [*args, "--format", "json"]).stdout)}
    assert js["mask"]["introduced_sqnr_db"] == "NaN/Inf"
    assert sort_value("NaN/Inf", True) == "-inf"
