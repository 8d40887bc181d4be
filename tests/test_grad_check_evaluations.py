"""grad --check's loss evaluations are what a plain onnxruntime session of the perturbed model gives, bit for bit:
whatever the check does to save time per evaluation (one session kept, its memory arena, the deltas of the
tensors not moved fed small), every L(t + h v) it reads, and so every verdict and number, is the one of a fresh
onnxruntime InferenceSession (graph optimisations off, as the check runs) fed the whole zero delta of every other
tensor. Oracle: that naive evaluation, built here from the plan's forward graph (``perturbable``, ``to_float64``),
for every call the check made; in float64 (MatMul / Tanh) and in float32 (Conv, which has no double kernel)."""

from __future__ import annotations

import importlib

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.autodiff.check import perturbable, to_float64

grad_mod = importlib.import_module("onnxprobe.api.grad")  # (api.grad is the function)
CPU = api.RunConfig(device="cpu")
RNG = np.random.default_rng(11)


def _mlp():
    w1, b1 = RNG.standard_normal((4, 6)).astype(np.float32), RNG.standard_normal(6).astype(np.float32)
    w2 = RNG.standard_normal((6, 3)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"), helper.make_node("Add", ["h", "b1"], ["hb"], name="add"),
             helper.make_node("Tanh", ["hb"], ["t"], name="tanh"), helper.make_node("MatMul", ["t", "w2"], ["y"], name="mm2")]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                   [numpy_helper.from_array(a, n) for n, a in (("w1", w1), ("b1", b1), ("w2", w2))])
    return m, {"x": RNG.standard_normal((2, 4)).astype(np.float32)}


def _cnn():
    w = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Tanh", ["c"], ["t"], name="tanh"),
             helper.make_node("Mul", ["t", "t"], ["y"], name="sq")]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 5, 5])], [numpy_helper.from_array(w, "w")])
    return m, {"x": RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)}


@pytest.mark.parametrize("build, mode", [(_mlp, "float64"), (_cnn, "float32")], ids=["float64", "float32"])
def test_every_loss_evaluation_is_a_plain_sessions(tmp_path, monkeypatch, build, mode):
    import onnx

    model, feed = build()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    calls = []
    real = grad_mod.check_gradients

    def recording(items, loss, precision, **kw):
        def logged(name, delta):
            value = loss(name, delta)
            calls.append((name, np.array(delta), value))
            return value
        return real(items, logged, precision, **kw)

    monkeypatch.setattr(grad_mod, "check_gradients", recording)
    res = api.grad(str(path), api.Selection(all=True), CPU, inputs=feed, check=True)
    assert res.check_mode == mode
    assert res.checked >= 3 and not res.failed_checks  # the rules are right: every judged gradient passes
    assert len(calls) > 20

    gp = res.plan
    dt = np.float64 if mode == "float64" else np.float32
    shapes = {}
    for name, delta, _ in calls:
        shapes.setdefault(name, delta.shape)
    tensors = {n: (TensorProto.FLOAT, list(s)) for n, s in shapes.items()}
    pm, deltas = perturbable(gp.forward, gp.loss.loss, tensors)
    pm = to_float64(pm) if mode == "float64" else pm
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(pm.SerializeToString(), so, providers=["CPUExecutionProvider"])
    base = {k: (v.astype(dt) if v.dtype == np.float32 else v) for k, v in {**feed, **gp.extra_feed}.items()}
    for name, delta, value in calls:
        f = dict(base)
        f.update({deltas[n]: np.zeros(s, dt) for n, s in shapes.items()})
        f[deltas[name]] = delta.astype(dt)
        want = float(np.asarray(sess.run([gp.loss.loss], f)[0], np.float64).reshape(-1)[0])
        assert value == want or (np.isnan(value) and np.isnan(want)), (name, value, want)
