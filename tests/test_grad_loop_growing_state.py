"""A Loop whose carried value grows each iteration (v <- Concat(v, 2 v)) has no backward Scan: a Scan carries
one shape. grad stopped with onnxruntime's 'Node (onnxprobe.grad/pre/Mul) Op (Mul) [ShapeInferenceError]
Incompatible dimensions ... what fails is the graph onnxprobe built from it': a node of onnxprobe's,
not the reason. Now one line names the Loop and the carried value whose shape changes. The forward
statistics of such a loop's body (pooled over iterations of different sizes) are right (numpy float64)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe import api
from onnxprobe.cli.main import app

runner = CliRunner()
V = helper.make_tensor_value_info
F = TensorProto.FLOAT


def _growing(path, trips: int = 3) -> str:
    body = helper.make_graph([helper.make_node("Mul", ["v", "two"], ["t"], name="g_mul"),
                              helper.make_node("Concat", ["v", "t"], ["vn"], axis=0, name="g_cat"),
                              helper.make_node("Identity", ["c"], ["cn"], name="g_keep")], "body",
                             [V("i", TensorProto.INT64, []), V("c", TensorProto.BOOL, []), V("v", F, [None])],
                             [V("cn", TensorProto.BOOL, []), V("vn", F, [None])])
    nodes = [helper.make_node("Relu", ["x"], ["x0"], name="pre"),
             helper.make_node("Loop", ["M", "", "x0"], ["y"], body=body, name="loop"),
             helper.make_node("Neg", ["y"], ["out"], name="post")]
    inits = [numpy_helper.from_array(np.array(trips, np.int64), "M"), numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    onnx.save(make_model(nodes, [V("x", F, [2])], [V("out", F, [None])], inits), path)
    return str(path)


def test_grad_of_a_loop_whose_state_grows_says_so(tmp_path):
    m = _growing(tmp_path / "m.onnx")
    r = runner.invoke(app, ["grad", m, "--device", "cpu", "--all"])
    err = r.stderr.strip().splitlines()
    assert r.exit_code == 1 and r.stdout.strip() == "", r.output
    assert len(err) == 1 and "Loop node 'loop'" in err[0] and "'v'" in err[0] and "changes shape" in err[0], r.stderr
    assert "onnxprobe.grad/" not in err[0]


def test_a_loop_of_no_iteration_keeps_its_gradient(tmp_path):
    m = _growing(tmp_path / "m.onnx", trips=0)
    res = api.grad(m, api.Selection(all=True), api.RunConfig(device="cpu"), inputs={"x": np.array([1.0, -2.0], np.float32)})
    rows = {r.name: r for r in res.rows}
    assert rows["x"].stats.min == -1 and rows["x"].stats.max == 0  # d sum(-relu(x)) / dx


def test_growing_body_statistics_pool_the_iterations(tmp_path):
    m = _growing(tmp_path / "m.onnx")
    x = np.array([100.5, 90.25], np.float32)
    lay = api.layers(m, api.Selection(all=True), api.RunConfig(device="cpu"), {"x": x})
    st = {ref.name: s for ref, s in lay.rows()}
    v, ts, vs = x.astype(np.float64), [], []
    for _ in range(3):
        t = v * 2
        v = np.concatenate([v, t])
        ts.append(t)
        vs.append(v)
    for name, parts in (("t", ts), ("vn", vs)):
        a = np.concatenate(parts)
        assert st[name].count == a.size
        np.testing.assert_allclose([st[name].mean, st[name].std, st[name].min, st[name].max],
                                   [a.mean(), a.std(), a.min(), a.max()], rtol=1e-7)


def _dynamic(path, grows: bool) -> str:
    """A Loop over a state of dynamic length N: v <- Concat(v, 2 v) (grows) or v <- tanh(2 v) (keeps its shape)."""
    if grows:
        nodes = [helper.make_node("Mul", ["v", "two"], ["t"], name="g_mul"),
                 helper.make_node("Concat", ["v", "t"], ["vn"], axis=0, name="g_cat")]
    else:
        nodes = [helper.make_node("Mul", ["v", "two"], ["t"], name="g_mul"), helper.make_node("Tanh", ["t"], ["vn"], name="g_tanh")]
    body = helper.make_graph(nodes + [helper.make_node("Identity", ["c"], ["cn"], name="g_keep")], "body",
                             [V("i", TensorProto.INT64, []), V("c", TensorProto.BOOL, []), V("v", F, [None])],
                             [V("cn", TensorProto.BOOL, []), V("vn", F, [None])])
    main = [helper.make_node("Relu", ["x"], ["x0"], name="pre"),
            helper.make_node("Loop", ["M", "", "x0"], ["y"], body=body, name="loop"),
            helper.make_node("Neg", ["y"], ["out"], name="post")]
    inits = [numpy_helper.from_array(np.array(3, np.int64), "M"), numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    onnx.save(make_model(main, [V("x", F, ["N"])], [V("out", F, [None])], inits), path)
    return str(path)


def test_export_of_a_loop_whose_state_grows_is_refused_before_writing(tmp_path):
    """grad --export keeps dynamic dimensions, so the run-time shapes that made `grad` refuse were not there:
    it wrote a backward model whose Loop onnxruntime stops on ('Inconsistent shape in loop output'), then
    failed its own run. Now the body's shape inference on the initial shape tells the growth, at export."""
    for m in (_growing(tmp_path / "static.onnx"), _dynamic(tmp_path / "dynamic.onnx", grows=True)):
        out = tmp_path / "bw.onnx"
        r = runner.invoke(app, ["grad", m, "--device", "cpu", "--wrt", "x", "--export", str(out)])
        err = r.stderr.strip().splitlines()
        assert r.exit_code != 0 and not out.exists(), (r.exit_code, r.output)
        assert len(err) == 1 and "Loop node 'loop'" in err[0] and "'v'" in err[0] and "changes shape" in err[0], r.stderr
        assert "Traceback" not in r.output


def test_export_of_a_loop_of_one_shape_runs_in_onnxruntime(tmp_path):
    import onnxruntime as ort

    m, out = _dynamic(tmp_path / "m.onnx", grows=False), tmp_path / "bw.onnx"
    r = runner.invoke(app, ["grad", m, "--device", "cpu", "--wrt", "x", "--export", str(out)])
    assert r.exit_code == 0, r.output
    x = np.array([0.3, -0.2, 0.1, 0.05, 0.4], np.float32)  # another length than the default input's
    s = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in s.get_outputs()], s.run(None, {"x": x})))
    v, slope = np.maximum(x.astype(np.float64), 0), (x > 0).astype(np.float64)  # numpy float64 oracle
    for _ in range(3):
        slope *= 2 * (1 - np.tanh(2 * v) ** 2)
        v = np.tanh(2 * v)
    np.testing.assert_allclose(got["loss"], -v.sum(), rtol=1e-5)
    np.testing.assert_allclose(got["x_grad"], -slope, rtol=1e-5, atol=1e-7)
