"""merge-stats of float64 subnormal data (k * 1e-320): the shards keep their sums in units of 2^exp; the merge
started from an empty Moments (exp 0) and moved them there, where Σx² is below float64: std read 0.
Oracle: the exact variance of the float64 values in Python fractions."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
SHARDS = [np.arange(1, 5, dtype=np.float64) * 1e-320, np.arange(1, 5, dtype=np.float64) * 1e-320 + 1e-320]


def exact_std(x: np.ndarray) -> float:
    v = [Fraction(float(t)) for t in x]
    mean = sum(v) / len(v)
    var = sum((t - mean) ** 2 for t in v) / len(v)
    return math.ldexp(math.sqrt(float(var * 2 ** 2200)), -1100)  # scaled: var itself is below float64's range


def test_merge_of_subnormal_shards_keeps_the_std(tmp_path):
    m = make_model([helper.make_node("Identity", ["x"], ["y"], name="id")], [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [4])])
    onnx.save(m, str(tmp_path / "m.onnx"))
    files = []
    for k, x in enumerate(SHARDS):
        d = tmp_path / f"d{k}"
        d.mkdir()
        np.savez(d / "b.npz", x=x)
        files.append(str(tmp_path / f"s{k}.json"))
        r = runner.invoke(app, ["layers", str(tmp_path / "m.onnx"), "--all", "--inputs-dir", str(d), "--json", files[-1]])
        assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["merge-stats", *files, "--json", "-"])
    assert r.exit_code == 0, r.output
    (t,) = [t for t in json.loads(r.stdout)["tensors"] if t["name"] == "y"]
    want = exact_std(np.concatenate(SHARDS))
    assert want > 0 and abs(t["std"] - want) <= 1e-3 * want, (t["std"], want)  # subnormal results hold ~11 bits
    assert t["mean"] == float(sum(Fraction(float(v)) for v in np.concatenate(SHARDS)) / 8)
