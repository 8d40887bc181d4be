"""A pair that was not compared says why in every row format: CSV and --format json rows end with a
`problem` (blank when compared), as `layers` rows end with a `status`, and `--columns` can name it. The row
of an empty Slice read `1,sl,Slice,name,0,,,,,`, its blanks indistinguishable from a value not produced or
shapes that differ at run time. The oracle: the tensors' element counts, known from the construction, and
the `problem` of the whole report (--json)."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app


def _run(args, code):
    r = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "120", "NO_COLOR": "1"})
    assert r.exit_code == code, r.output
    return r.stdout


def _empty_model(path) -> dict[str, int]:
    """x [1,4,8] -> MatMul -> mm [1,4,8] -> Slice to 0 on the last axis -> sl [1,4,0] -> Relu -> y; returns
    each tensor's number of elements."""
    w = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "W")] + [numpy_helper.from_array(np.array([v], np.int64), n)
                                                  for n, v in (("s0", 0), ("s1", 0), ("ax", 2))]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["mm"]), helper.make_node("Slice", ["mm", "s0", "s1", "ax"], ["sl"]),
             helper.make_node("Relu", ["sl"], ["y"])]
    onnx.save(make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 0])], inits), str(path))
    return {"mm": 32, "sl": 0, "y": 0}


def test_rows_of_pairs_not_compared_say_why(tmp_path):
    sizes = _empty_model(tmp_path / "e.onnx")
    args = ["diff", tmp_path / "e.onnx", tmp_path / "e.onnx", "--all"]
    full = json.loads(_run(args + ["--json", "-"], 1))  # an empty output: the verdict is an error
    problem = {p["b"]: p["problem"] for p in full["pairs"]}
    rows = list(csv.DictReader(io.StringIO(_run(args + ["--format", "csv"], 1))))
    assert {r["tensor"] for r in rows} == set(sizes)
    for r in rows:
        assert bool(r["problem"]) == (sizes[r["tensor"]] == 0), r
        assert r["problem"] == (problem[r["tensor"]] or "")
    got = json.loads(_run(args + ["--format", "json", "--columns", "tensor,problem"], 1))
    assert [sorted(r) for r in got] == [["problem", "tensor"]] * len(sizes)
    assert {r["tensor"]: r["problem"] for r in got} == problem
    assert "problem" in _run(args + ["--columns", "tensor,pass,problem"], 1)
