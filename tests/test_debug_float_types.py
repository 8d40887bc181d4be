"""The debugger with two models that take an input in two float types (a float16 model and its float32
original): `diff` feeds both the values the narrower type holds exactly, and every other command (`show`, `save`,
`stats`, `inputs`) must look at what was compared. The float32 side was fed its own unrounded draw: its saved
input differed from the float16 side's by 2.4e-4, its activations were those of other inputs than diff judged."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def mlp(elem: int) -> onnx.ModelProto:
    dt = helper.tensor_dtype_to_np_dtype(elem)
    w = np.random.default_rng(1).normal(size=(8, 4)).astype(dt)
    return make_model([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Tanh", ["h"], ["y"], name="tanh")],
                      [helper.make_tensor_value_info("x", elem, [3, 8])], [helper.make_tensor_value_info("y", elem, [3, 4])],
                      [numpy_helper.from_array(w, "w")])


@pytest.mark.parametrize("half_first", [True, False])
def test_both_models_see_the_values_diff_compares(tmp_path, half_first):
    half, full = tmp_path / "half.onnx", tmp_path / "full.onnx"
    onnx.save(mlp(TensorProto.FLOAT16), half)
    m32 = mlp(TensorProto.FLOAT)
    onnx.save(m32, full)
    a, b = (half, full) if half_first else (full, half)
    full_label = "b" if half_first else "a"
    script = [f"save x {tmp_path / 'xa.npy'}", f"save x {tmp_path / 'xb.npy'} --model b",
              f"save h {tmp_path / 'h32.npy'} --model {full_label}", "diff"]
    r = runner.invoke(app, ["debug", str(a), str(b), "--script", "-"], input="\n".join(script) + "\n", env=ENV)
    assert r.exit_code == 0, r.output
    xa, xb, h32 = (np.load(tmp_path / n) for n in ("xa.npy", "xb.npy", "h32.npy"))
    x16 = (xa if half_first else xb).astype(np.float32)
    x32 = (xb if half_first else xa)
    assert x32.dtype == np.float32 and np.array_equal(x32, x16)  # the same numbers on both sides
    # the float32 model's activation is that of the values compared (onnx.reference, float32)
    h_ref = ReferenceEvaluator(m32).run(["h"], {"x": x16})[0]
    np.testing.assert_allclose(h32, h_ref, rtol=1e-6, atol=1e-6)


def test_inputs_given_in_a_s_float_type_reach_b_rounded(tmp_path):
    """`debug full.onnx half.onnx --inputs x32.npz`: the float32 arrays, A's own type, were handed to B as they were
    and refused ("dtype float32, the model expects float16"); B takes A's values, rounded as diff feeds them."""
    half, full = tmp_path / "half.onnx", tmp_path / "full.onnx"
    onnx.save(mlp(TensorProto.FLOAT16), half)
    onnx.save(mlp(TensorProto.FLOAT), full)
    x = np.random.default_rng(3).random((3, 8)).astype(np.float32)
    np.savez(tmp_path / "x32.npz", x=x)
    script = [f"save x {tmp_path / 'xa.npy'}", f"save x {tmp_path / 'xb.npy'} --model b"]
    r = runner.invoke(app, ["debug", str(full), str(half), "--inputs", str(tmp_path / "x32.npz"), "--script", "-"],
                      input="\n".join(script) + "\n", env=ENV)
    assert r.exit_code == 0, r.output
    xa, xb = np.load(tmp_path / "xa.npy"), np.load(tmp_path / "xb.npy")
    assert xa.dtype == np.float32 and xb.dtype == np.float16
    assert np.array_equal(xa, x.astype(np.float16).astype(np.float32)) and np.array_equal(xb.astype(np.float32), xa)
