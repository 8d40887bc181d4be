"""Two criterion and ordering slips of diff. Naming the comparison's own metric alone (`--metric allclose` against a
torch export, `--metric sqnr` on a float16 model) replaced its thresholds with the generic ones: against torch a
tenfold looser rtol passed what the default failed, and on float16 `--metric sqnr` and `--metric sqnr --min-sqnr 30`
judged differently. And `--sort accumulated` / `introduced` ("worst first") put a pair whose NaN/Inf positions differ
behind the passing pairs (its SQNR, of the finite values, read inf)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.stats.metrics import Tolerance


def test_the_defaults_own_metric_named_alone_is_the_default():
    torch_default = Tolerance("allclose", atol=1e-5, rtol=1e-4, why="the default for an export against torch", default=True)
    assert Tolerance.from_flags("allclose").over(torch_default) == torch_default
    assert Tolerance.from_flags("allclose", atol=1e-3).over(torch_default).rtol == 1e-4  # a threshold: the rest kept
    other = Tolerance.from_flags("max_abs").over(torch_default)
    assert other.metric == "max_abs" and other.atol == 1e-4  # another metric: its own thresholds
    half = Tolerance("sqnr", min_sqnr=20.0, abs_floor=1e-6, why="the default when a model computes in float16", default=True)
    assert Tolerance.from_flags("sqnr").over(half) == half
    assert Tolerance.from_flags("sqnr", min_sqnr=30.0).over(half).abs_floor == 1e-6


def _half_and_float(tmp_path):
    paths = []
    for name, elem, scale in (("a", TensorProto.FLOAT16, 1.0), ("b", TensorProto.FLOAT, 1.001)):
        dtype = helper.tensor_dtype_to_np_dtype(elem)
        w = numpy_helper.from_array(np.full((2, 8), scale, dtype), "w")
        m = make_model([helper.make_node("Mul", ["x", "w"], ["y"])], [helper.make_tensor_value_info("x", elem, [2, 8])],
                       [helper.make_tensor_value_info("y", elem, [2, 8])], [w])
        onnx.save(m, tmp_path / f"{name}.onnx")
        paths.append(str(tmp_path / f"{name}.onnx"))
    return paths


def test_metric_sqnr_alone_on_a_float16_model_is_its_default(tmp_path):
    a, b = _half_and_float(tmp_path)
    runner = CliRunner()
    crit = {}
    for flags in ([], ["--metric", "sqnr"]):
        r = runner.invoke(app, ["diff", a, b, "--json", "-", *flags], env={"COLUMNS": "200"})
        import json

        crit[len(flags)] = json.loads(r.stdout)["criterion"]
    assert crit[0] == crit[2], crit


def test_worst_first_puts_a_nan_mismatch_first(tmp_path):
    """y_nan: A adds a NaN at one position, B does not (NaN/Inf mismatch, FAIL); y_ok differs slightly (pass)."""
    def model(path, nan):
        c = np.zeros((2, 4), np.float32)
        if nan:
            c[0, 0] = np.nan
        g = helper.make_graph([helper.make_node("Add", ["x", "c"], ["y_nan"]), helper.make_node("Mul", ["x", "k"], ["y_ok"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 4]) for n in ("y_nan", "y_ok")],
                              [numpy_helper.from_array(c, "c"), numpy_helper.from_array(np.float32(1 + 1e-5 * nan), "k")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.save(m, path)
        return str(path)

    res = api.diff(model(tmp_path / "a.onnx", True), model(tmp_path / "b.onnx", False))
    by = {r.pair.a.name: r for r in res.results}
    assert by["y_nan"].metrics.nonfinite_mismatch == 1 and by["y_nan"].passed is False and by["y_ok"].passed
    for key in ("accumulated", "introduced"):
        assert [r.pair.a.name for r in api.sort_results(res.results, key)][0] == "y_nan", key
