"""bfloat16 graph inputs in the debugger and the input flags: statistics of the widened values (the same
numbers), `where nan` blaming the input itself, `show` naming the type, `save` to .pb writing a BFLOAT16
TensorProto, and a float array accepted for a bfloat16 input where bfloat16 holds its values exactly.
Checked against numpy float64 of ml_dtypes' bfloat16 values."""

from __future__ import annotations

import math
import shlex

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe import api
from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
BF16 = ml_dtypes.bfloat16
X = np.array([1.0, np.nan, 2.0, -0.375], BF16)


def bf16_model(path) -> None:
    """x bfloat16 -> t = Identity(x) -> y = Identity(t)."""
    m = make_model([helper.make_node("Identity", ["x"], ["t"], name="id"), helper.make_node("Identity", ["t"], ["y"], name="id2")],
                   [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [4])])
    onnx.save(m, str(path))


def session(tmp_path, lines, code=0):
    m = tmp_path / "bf16.onnx"
    bf16_model(m)
    (tmp_path / "x.pb").write_bytes(numpy_helper.from_array(X, "x").SerializeToString())
    f = tmp_path / "s.txt"
    f.write_text("\n".join(lines) + "\n")
    r = runner.invoke(app, ["debug", str(m), "--script", str(f)], env=ENV)
    assert "Traceback" not in r.output and r.exit_code == code, r.output
    return r


def test_a_bfloat16_input_gets_statistics_and_where_blames_it(tmp_path, monkeypatch):
    want = X.astype(np.float64)
    fin = want[np.isfinite(want)]
    monkeypatch.chdir(tmp_path)  # the input by a short relative name: its echo on one line however long tmp_path is
    r = session(tmp_path, ["input x x.pb", "where nan", "show x"])
    out = r.stdout
    assert "no statistics" not in out
    assert "first tensor where nan: x " in out and "a graph input" in out, out
    echo = out.splitlines()[0]
    assert f"min {fin.min():g}" in echo and f"max {fin.max():g}" in echo and "NaN 1" in echo, echo
    assert f"mean {fin.mean():.4g}" in out
    show = next(line for line in out.splitlines() if line.startswith("x  graph input"))
    assert "bfloat16" in show and "float32 [" not in show.replace("as float32: the same values) [", ""), show


def test_save_to_pb_writes_bfloat16_and_both_saved_files_feed_the_input_again(tmp_path):
    pb, npy = tmp_path / "y.pb", tmp_path / "y.npy"
    session(tmp_path, [f"input x {tmp_path / 'x.pb'}", f"save y {shlex.quote(str(pb))}", f"save y {shlex.quote(str(npy))}", f"input x {npy}", f"input x {pb}"])
    t = onnx.load_tensor(str(pb))
    assert t.data_type == TensorProto.BFLOAT16
    np.testing.assert_array_equal(numpy_helper.to_array(t).astype(np.float64), X.astype(np.float64))
    a = np.load(npy)
    assert a.dtype == np.float32  # numpy has no bfloat16: widened, exactly
    np.testing.assert_array_equal(a.astype(np.float64), X.astype(np.float64))


def test_a_float_array_bfloat16_does_not_hold_is_one_line_saying_how_to_give_it(tmp_path):
    np.save(tmp_path / "f.npy", np.array([0.1, 1, 2, 3], np.float32))
    r = session(tmp_path, [f"input x {tmp_path / 'f.npy'}"], code=1)
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "bfloat16" in err[0] and str(float(np.float32(0.1))) in err[0], r.output


def test_layers_takes_a_float32_npy_for_a_bfloat16_input_and_the_api_summarises_bfloat16(tmp_path):
    m = tmp_path / "bf16.onnx"
    bf16_model(m)
    np.save(tmp_path / "x.npy", X.astype(np.float32))
    res = api.layers(str(m), api.Selection(all=True), api.RunConfig(cache=False),
                     api.InputSpec(files={"x": str(tmp_path / "x.npy")}), save=True)
    np.testing.assert_array_equal(np.asarray(res.arrays["y"], np.float64), X.astype(np.float64))
    st = api.TensorStats.from_array(X)
    fin = X.astype(np.float64)[~np.isnan(X.astype(np.float64))]
    assert st.nan == 1 and st.min == fin.min() and st.max == fin.max()
    assert math.isclose(st.mean, fin.mean(), rel_tol=1e-12) and math.isclose(st.std, fin.std(), rel_tol=1e-12)
