"""A Loop or Scan body that declares its carried value without a type or shape (exporters often do):
onnx's shape inference gives the carried value and what the body computes from it no rank, so the backward
Scan's outputs had none and onnxruntime refused it ('Subgraph must have the shape set for all outputs'),
or a rule stopped ('cannot sum the gradient back ... rank is unknown': FastGelu's bias-free broadcast).
grad learns those ranks from a run, as it learns the shapes of If branches. Oracle: the loop written in
numpy, differentiated by central finite differences in float64."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
RNG = np.random.default_rng(22)
V = helper.make_tensor_value_info


def _untyped(name: str) -> onnx.ValueInfoProto:
    return onnx.ValueInfoProto(name=name)


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def _loop_model(op: str) -> onnx.ModelProto:
    """y, steps = Loop(n, , x): v <- op(v * w) (com.microsoft FastGelu, or Tanh), each v also a scan output."""
    dom = "com.microsoft" if op == "FastGelu" else ""
    body = helper.make_graph([helper.make_node("Mul", ["v", "w"], ["vw"]), helper.make_node(op, ["vw"], ["v2"], domain=dom),
                              helper.make_node("Identity", ["cond"], ["cond_o"]), helper.make_node("Identity", ["v2"], ["s"])],
                             "body", [V("i", TensorProto.INT64, []), V("cond", TensorProto.BOOL, []), _untyped("v")],
                             [V("cond_o", TensorProto.BOOL, []), _untyped("v2"), _untyped("s")])
    m = make_model([helper.make_node("Loop", ["n", "", "x"], ["y", "steps"], body=body)],
                   [V("x", TensorProto.FLOAT, [2, 4]), V("n", TensorProto.INT64, [])],
                   [V("y", TensorProto.FLOAT, None), V("steps", TensorProto.FLOAT, None)],
                   [numpy_helper.from_array(RNG.uniform(0.5, 1.5, 4).astype(np.float32), "w")])
    if dom:
        m.opset_import.append(helper.make_opsetid(dom, 1))
    return m


def _fd(f, x: np.ndarray) -> np.ndarray:
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        p, q = x.copy(), x.copy()
        p[i] += 1e-6
        q[i] -= 1e-6
        g[i] = (f(p) - f(q)) / 2e-6
    return g


@pytest.mark.parametrize("op", ["Tanh", "FastGelu"])
def test_loop_with_untyped_carried_value(tmp_path, op):
    m = _loop_model(op)
    onnx.save(m, tmp_path / "m.onnx")
    w = numpy_helper.to_array(m.graph.initializer[0]).astype(np.float64)
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = runner.invoke(app, ["grad", str(tmp_path / "m.onnx"), "--all", "--input", "n=3", "--input", f"x={tmp_path / 'x.npy'}",
                            "--device", "cpu", "--save-grads", str(tmp_path / "g.npz")])
    assert r.exit_code == 0, r.output
    got = np.load(tmp_path / "g.npz")
    f = np.tanh if op == "Tanh" else _gelu_tanh

    def loss(x64, w64):  # sum of the final value (the first output)
        v = x64
        for _ in range(3):
            v = f(v * w64)
        return float(np.sum(v))

    x64 = x.astype(np.float64)
    np.testing.assert_allclose(got["x"], _fd(lambda a: loss(a, w), x64), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(got["w"], _fd(lambda a: loss(x64, a), w), rtol=1e-3, atol=1e-4)


def test_scan_with_untyped_state(tmp_path):
    """s <- tanh(s * x_t) over the rows of xs, the state declared without a type in the body."""
    body = helper.make_graph([helper.make_node("Mul", ["s", "xt"], ["sx"]), helper.make_node("Tanh", ["sx"], ["s2"]),
                              helper.make_node("Identity", ["s2"], ["o"])], "body", [_untyped("s"), _untyped("xt")],
                             [_untyped("s2"), _untyped("o")])
    m = make_model([helper.make_node("Scan", ["s0", "xs"], ["sN", "os"], body=body, num_scan_inputs=1)],
                   [V("s0", TensorProto.FLOAT, [2, 3]), V("xs", TensorProto.FLOAT, [4, 2, 3])],
                   [V("sN", TensorProto.FLOAT, None), V("os", TensorProto.FLOAT, None)])
    onnx.save(m, tmp_path / "m.onnx")
    s0 = RNG.standard_normal((2, 3)).astype(np.float32)
    xs = RNG.standard_normal((4, 2, 3)).astype(np.float32)
    np.save(tmp_path / "s0.npy", s0)
    np.save(tmp_path / "xs.npy", xs)
    r = runner.invoke(app, ["grad", str(tmp_path / "m.onnx"), "--all", "--input", f"s0={tmp_path / 's0.npy'}", "--input",
                            f"xs={tmp_path / 'xs.npy'}", "--device", "cpu", "--save-grads", str(tmp_path / "g.npz")])
    assert r.exit_code == 0, r.output
    got = np.load(tmp_path / "g.npz")

    def loss(a, b):
        s = a
        for t in range(4):
            s = np.tanh(s * b[t])
        return float(np.sum(s))

    s64, x64 = s0.astype(np.float64), xs.astype(np.float64)
    np.testing.assert_allclose(got["s0"], _fd(lambda a: loss(a, x64), s64), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(got["xs"], _fd(lambda b: loss(s64, b), x64), rtol=1e-3, atol=1e-4)


def test_export_of_a_loop_with_untyped_carried_value(tmp_path):
    """--export learns the ranks from its one run; the exported model passes onnx.checker (its loss output
    is declared a scalar: inference could not tell the rank of a sum of a Loop output of unknown rank) and
    gives, in plain onnxruntime, the gradients of another trip count."""
    import onnxruntime as ort

    m = _loop_model("Tanh")
    onnx.save(m, tmp_path / "m.onnx")
    r = runner.invoke(app, ["grad", str(tmp_path / "m.onnx"), "--all", "--input", "n=2", "--export", str(tmp_path / "bw.onnx")])
    assert r.exit_code == 0, r.output
    onnx.checker.check_model(onnx.load(tmp_path / "bw.onnx"))
    sess = ort.InferenceSession(str(tmp_path / "bw.onnx"), providers=["CPUExecutionProvider"])
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"x": x, "n": np.array(4, np.int64)})))
    w = numpy_helper.to_array(m.graph.initializer[0]).astype(np.float64)

    def loss(a):
        for _ in range(4):
            a = np.tanh(a * w)
        return float(np.sum(a))

    np.testing.assert_allclose(got["x_grad"], _fd(loss, x.astype(np.float64)), rtol=1e-3, atol=1e-4)
