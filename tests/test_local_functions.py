"""Model-local functions (FunctionProto), nested and with attribute references, run as onnxruntime runs
them. `diff` lost the introduced error of a node that calls one (QA: "introduced error not computed for 'y1':
... unknown op local:Outer": B's cone model did not carry the model's functions). Oracle: numpy float64."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as H
from typer.testing import CliRunner

from onnxprobe.cli.main import app


def func_model(path, alpha: float) -> None:
    """y1 = Outer(x; myalpha) = LeakyRelu(Inner(x), alpha=myalpha), Inner(x) = 2 x; y = y1 - x."""
    inner = H.make_function("local", "Inner", ["x"], ["y"], [
        H.make_node("Constant", [], ["c"], value=H.make_tensor("c", T.FLOAT, [], [2.0])),
        H.make_node("Mul", ["x", "c"], ["y"])], opset_imports=[H.make_opsetid("", 17)])
    lr = H.make_node("LeakyRelu", ["t"], ["y"])
    lr.attribute.append(onnx.AttributeProto(name="alpha", ref_attr_name="myalpha", type=onnx.AttributeProto.FLOAT))
    outer = H.make_function("local", "Outer", ["x"], ["y"], [H.make_node("Inner", ["x"], ["t"], domain="local"), lr],
                            opset_imports=[H.make_opsetid("", 17), H.make_opsetid("local", 1)], attributes=["myalpha"])
    g = H.make_graph([H.make_node("Outer", ["x"], ["y1"], domain="local", myalpha=alpha, name="outer"),
                      H.make_node("Sub", ["y1", "x"], ["y"], name="sub")], "g",
                     [H.make_tensor_value_info("x", T.FLOAT, [2, 3])], [H.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17), H.make_opsetid("local", 1)], functions=[inner, outer])
    m.ir_version = 8
    onnx.save(m, str(path))


def test_diff_measures_the_error_a_function_call_introduces(tmp_path):
    func_model(tmp_path / "a.onnx", 0.3)
    func_model(tmp_path / "b.onnx", 0.1)
    x = np.array([[-1, -0.5, 0.25], [1, -2, 0]], np.float32)
    np.save(tmp_path / "x.npy", x)
    r = CliRunner().invoke(app, ["diff", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--input", f"x={tmp_path / 'x.npy'}",
                                 "--all", "--json", "-"])
    assert r.exit_code == 1 and "not computed" not in r.stderr, r.output
    pairs = {p["a"]: p for p in json.loads(r.stdout)["pairs"]}
    x64 = x.astype(np.float64)
    leaky = lambda v, a: np.where(v >= 0, v, a * v)  # noqa: E731
    err = np.abs(leaky(2 * x64, 0.3) - leaky(2 * x64, 0.1)).max()
    assert abs(pairs["y1"]["max_abs"] - err) < 1e-6
    # B's call fed A's x, the same input: it introduces all of its error; B's Sub fed A's y1 introduces none
    assert abs(pairs["y1"]["introduced_max_abs"] - err) < 1e-6, pairs["y1"]
    assert pairs["y"]["introduced_max_abs"] == 0, pairs["y"]


def test_grad_through_a_function_call(tmp_path):
    """`grad --all` stopped on "cannot differentiate op local:Outer (no gradient rule for it)": a call of a
    model-local function is differentiated through its body. dL/dx of sum(LeakyRelu(2 x, a) - x) is
    2 slope - 1, slope 1 where x > 0, a elsewhere."""
    func_model(tmp_path / "m.onnx", 0.3)
    x = np.array([[-1, -0.5, 0.25], [1, -2, 0.5]], np.float32)
    np.save(tmp_path / "x.npy", x)
    r = CliRunner().invoke(app, ["grad", str(tmp_path / "m.onnx"), "--all", "--input", f"x={tmp_path / 'x.npy'}",
                                 "--save-grads", str(tmp_path / "g.npz"), "--check"])
    assert r.exit_code == 0, r.output
    g = np.load(tmp_path / "g.npz")
    np.testing.assert_allclose(g["x"], 2 * np.where(x > 0, 1.0, 0.3) - 1, rtol=1e-6)
    np.testing.assert_allclose(g["y1"], np.ones((2, 3)), rtol=1e-6)
