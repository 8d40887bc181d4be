"""`grad MODEL --export OUT` on a model onnxruntime refuses to load (two nodes writing one tensor, an empty
output name, a MaxPool with strides 0 at opset 17) wrote OUT, printed "wrote OUT: ...", and only then failed
with exit 1 when the run loaded the model: the user was left with a file that looked like a success, and the
error came after a several-line summary. The export now loads the model in onnxruntime (the runner's session)
before it builds the backward graph: nothing is written (an OUT already there stays as it was, no temporary
file is left beside it), no "wrote" line, one error line and exit 1. A model that loads exports as before."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api
from onnxprobe.errors import ModelError, SessionError

F = TensorProto.FLOAT


def _save(path, nodes, x_dims, inits, opset=17, y_dims=None):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, x_dims)],
                          [helper.make_tensor_value_info("y", F, y_dims)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def _dense(path, nodes):
    return _save(path, nodes, [1, 4], [numpy_helper.from_array(np.eye(4, dtype=np.float32), "W")], y_dims=[1, 4])


BAD = {
    # 't' is written by two nodes: onnxruntime "Duplicate definition of name (t)"
    "duplicate-name": lambda p: _dense(p, [helper.make_node("MatMul", ["x", "W"], ["t"]), helper.make_node("Relu", ["x"], ["t"]),
                                           helper.make_node("Relu", ["t"], ["y"])]),
    # a second, unnamed output on a one-output op
    "empty-output-name": lambda p: _dense(p, [helper.make_node("MatMul", ["x", "W"], ["t"]),
                                              helper.make_node("Relu", ["t"], ["y", ""])]),
    # strides 0: onnxruntime's shape inference refuses it at load
    "pool-strides-0": lambda p: _save(p, [helper.make_node("Conv", ["x", "W"], ["c"]),
                                          helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2], strides=[0, 0])],
                                      [1, 1, 4, 4], [numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "W")]),
}


def _grad(*args):
    return subprocess.run([sys.executable, "-m", "onnxprobe", "grad", *map(str, args)], capture_output=True, text=True)


def _exports_nothing(path, tmp_path, before: bool) -> None:
    """grad --export of ``path`` fails in one line, writes no OUT (an OUT already there, ``before``, stays as it
    was), nothing beside it and no "wrote" line."""
    out = tmp_path / "bw.onnx"
    if before:
        out.write_bytes(b"kept")
    r = _grad(path, "--device", "cpu", "--export", out)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 1 and len(lines) == 1 and lines[0].startswith("onnxprobe: error:"), r.stderr
    assert "wrote" not in r.stdout + r.stderr and "Traceback" not in r.stderr
    assert (out.read_bytes() == b"kept") if before else not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["m.onnx"] + (["bw.onnx"] if before else []))


@pytest.mark.parametrize("kind", list(BAD))
@pytest.mark.parametrize("before", [False, True], ids=["new", "existing"])
def test_a_refused_model_exports_nothing(tmp_path, kind, before):
    path = BAD[kind](tmp_path / "m.onnx")
    _exports_nothing(path, tmp_path, before)


@pytest.mark.parametrize("kind", list(BAD))
def test_the_api_export_of_a_refused_model_raises_and_writes_nothing(tmp_path, kind):
    path = BAD[kind](tmp_path / "m.onnx")
    # refused by onnxruntime at the export's load check, or before, where onnxprobe reads the model (a node of
    # more outputs than its op gives: graph.node_check, whose refusals are onnxruntime's)
    with pytest.raises((SessionError, ModelError)):
        api.export_backward(api.load(path), tmp_path / "bw.onnx")
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]


@pytest.mark.parametrize("extra", [[], ["--check"], ["--save-grads", "{d}/g.npz"], ["--html", "{d}/r.html"]],
                         ids=["plain", "check", "save-grads", "html"])
def test_a_refused_model_with_other_outputs_writes_none_of_them(tmp_path, extra):
    path = BAD["duplicate-name"](tmp_path / "m.onnx")
    r = _grad(path, "--device", "cpu", "--export", tmp_path / "bw.onnx", *[e.format(d=tmp_path) for e in extra])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 1 and len(lines) == 1, r.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]


@pytest.mark.parametrize("opset", [17, 6], ids=["opset17", "opset6-converted"])
def test_a_model_that_loads_still_exports_and_the_export_runs(tmp_path, opset):
    """The good twin of the models above: exported as before, and the file runs: dW = x^T 1 (numpy oracle).
    At opset 6, which onnxruntime has no kernels for, the export is of the copy converted to opset 17: the check
    is of what is written, not of the model as given (a check of that refused this export)."""
    import onnxruntime as ort

    path = _save(tmp_path / "m.onnx", [helper.make_node("MatMul", ["x", "W"], ["t"]), helper.make_node("Add", ["t", "B"], ["y"])],
                 [1, 4], [numpy_helper.from_array(np.eye(4, dtype=np.float32), "W"),
                          numpy_helper.from_array(np.ones(4, np.float32), "B")], opset=opset, y_dims=[1, 4])
    out = tmp_path / "bw.onnx"
    r = _grad(path, "--device", "cpu", "--export", out)
    assert r.returncode == 0 and "wrote" in r.stderr, r.stderr
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    s = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in s.get_outputs()], s.run(None, {"x": x})))
    np.testing.assert_allclose(got["W_grad"], x.T.astype(np.float64) @ np.ones((1, 4)), rtol=1e-6)


def test_a_backward_graph_onnxruntime_refuses_is_not_written_and_blamed_on_onnxprobe(tmp_path):
    """Where the model loads and the graph built from it does not, the error says so (not the model's fault)."""
    from onnxprobe.api.grad_export import _loads_in_onnxruntime

    good = onnx.load(_dense(tmp_path / "good.onnx", [helper.make_node("MatMul", ["x", "W"], ["y"])]))
    bad = onnx.load(BAD["duplicate-name"](tmp_path / "bad.onnx"))
    _loads_in_onnxruntime(good, good)
    with pytest.raises(SessionError, match="Duplicate definition") as e:
        _loads_in_onnxruntime(bad, bad)
    assert "onnxprobe built" not in str(e.value)
    with pytest.raises(SessionError, match="backward graph onnxprobe built .*Duplicate definition"):
        _loads_in_onnxruntime(bad, good)


# Models onnxruntime loads but cannot run: the failure comes from the run `grad` makes after the export.
def _dense_with(path, nodes, name, values):
    return _save(path, nodes, [1, 4], [numpy_helper.from_array(np.eye(4, dtype=np.float32), "W"),
                                       numpy_helper.from_array(np.array(values, np.int64), name)])


RUN_FAILS = {
    # Reshape of a [1, 4] to [5]: "The input tensor cannot be reshaped to the requested shape"
    "reshape-misfit": lambda p: _dense_with(p, [helper.make_node("MatMul", ["x", "W"], ["t"]),
                                                helper.make_node("Reshape", ["t", "s"], ["y"])], "s", [5]),
    # Gather of index 10 on an axis of 4: "indices element out of data bounds"
    "gather-out-of-range": lambda p: _dense_with(p, [helper.make_node("MatMul", ["x", "W"], ["t"]),
                                                     helper.make_node("Gather", ["t", "i"], ["y"], axis=1)], "i", [10]),
}


@pytest.mark.parametrize("kind", list(RUN_FAILS))
@pytest.mark.parametrize("before", [False, True], ids=["new", "existing"])
def test_a_model_whose_run_fails_exports_nothing(tmp_path, kind, before):
    """The model loads, so the export's own check passes; the run that follows fails. The command failed, so
    OUT is not written (an OUT already there stays as it was), nothing is left beside it, no "wrote" line."""
    path = RUN_FAILS[kind](tmp_path / "m.onnx")
    _exports_nothing(path, tmp_path, before)


def test_a_dataset_whose_run_fails_exports_nothing(tmp_path):
    """The same with --inputs-dir: the export waits for the dataset's run."""
    path = RUN_FAILS["reshape-misfit"](tmp_path / "m.onnx")
    data = tmp_path / "data"
    data.mkdir()
    np.savez(data / "a.npz", x=np.ones((1, 4), np.float32))
    out = tmp_path / "bw.onnx"
    r = _grad(path, "--device", "cpu", "--export", out, "--inputs-dir", data)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "wrote" not in r.stdout + r.stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["data", "m.onnx"]
