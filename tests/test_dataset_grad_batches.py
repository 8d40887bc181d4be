"""`grad --inputs-dir` over batches of several sizes: a dimension the batches disagree on reads unknown
(null / '?'), as `layers --inputs-dir` shows it; the rest are the run's. The shapes expected are worked out
from the batches and the model's own weights, not from onnxprobe."""

from __future__ import annotations

import json

import numpy as np
import pytest
import onnx
from onnx import numpy_helper
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()


def _grad(*args, code=(0,)):
    r = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "160"})
    assert r.exit_code in code, r.output
    return r


def _dataset(path, sizes):
    rng = np.random.default_rng(1)
    path.mkdir()
    for i, n in enumerate(sizes):
        np.savez(path / f"b{i}.npz", x=rng.normal(size=(n, 3, 8, 8)).astype(np.float32))
    return path


def _expected(batch):
    """dynamic_batch: Conv (same padding) -> Relu -> ReduceMean over H, W -> MatMul."""
    m = onnx.load(str(sample_path("dynamic_batch")))
    w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    ch, out = w["conv.weight"].shape[0], w["head.weight"].shape[1]
    return {"conv.weight": list(w["conv.weight"].shape), "conv.bias": [ch], "head.weight": list(w["head.weight"].shape),
            "x": [batch, 3, 8, 8], "conv_out": [batch, ch, 8, 8], "relu_out": [batch, ch, 8, 8], "pooled": [batch, ch], "y": [batch, out]}


def test_a_dimension_the_batches_disagree_on_is_unknown(tmp_path):
    ds = _dataset(tmp_path / "ds", (1, 3, 2))
    got = json.loads(_grad("grad", sample_path("dynamic_batch"), "--all", "--inputs-dir", ds, "--json", "-").stdout)
    assert {g["tensor"]: g["shape"] for g in got["gradients"]} == _expected(None)
    table = _grad("grad", sample_path("dynamic_batch"), "--all", "--inputs-dir", ds).stdout
    assert "?x4x8x8" in table and "1x4x8x8" not in table


def test_batches_of_one_size_keep_it(tmp_path):
    ds = _dataset(tmp_path / "ds", (2, 2))
    got = json.loads(_grad("grad", sample_path("dynamic_batch"), "--all", "--inputs-dir", ds, "--json", "-").stdout)
    assert {g["tensor"]: g["shape"] for g in got["gradients"]} == _expected(2)


def _ort_loss(x):
    """sum(y) of dynamic_batch, run by onnxruntime itself."""
    import onnxruntime as ort

    s = ort.InferenceSession(str(sample_path("dynamic_batch")), providers=["CPUExecutionProvider"])
    return float(np.sum(s.run(None, {"x": x})[0], dtype=np.float64))


def test_an_empty_batch_in_a_dataset_is_skipped_with_a_note(tmp_path):
    rng = np.random.default_rng(2)
    ds = tmp_path / "ds"
    ds.mkdir()
    x = rng.normal(size=(2, 3, 8, 8)).astype(np.float32)
    np.savez(ds / "a0.npz", x=np.zeros((0, 3, 8, 8), np.float32))  # first: the plan is made without it
    np.savez(ds / "b1.npz", x=x)
    np.savez(ds / "c2.npz", x=np.zeros((0, 3, 8, 8), np.float32))
    got = json.loads(_grad("grad", sample_path("dynamic_batch"), "--all", "--inputs-dir", ds, "--json", "-").stdout)
    assert got["samples"] == 1 and got["loss"]["value"] == pytest.approx(_ort_loss(x), rel=1e-6)
    assert any("2 empty batches skipped (a0.npz, c2.npz)" in n for n in got["notes"]), got["notes"]
    alone = tmp_path / "alone"
    alone.mkdir()
    np.savez(alone / "b1.npz", x=x)
    ref = json.loads(_grad("grad", sample_path("dynamic_batch"), "--all", "--inputs-dir", alone, "--json", "-").stdout)
    assert [g["norm"] for g in got["gradients"]] == [g["norm"] for g in ref["gradients"]]


def test_only_empty_batches_or_one_empty_input_are_refused(tmp_path):
    ds = tmp_path / "ds"
    ds.mkdir()
    np.savez(ds / "b0.npz", x=np.zeros((0, 3, 8, 8), np.float32))
    r = _grad("grad", sample_path("dynamic_batch"), "--inputs-dir", ds, code=(2,))
    assert "empty" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    np.save(tmp_path / "x.npy", np.zeros((0, 3, 8, 8), np.float32))
    r = _grad("grad", sample_path("dynamic_batch"), "--input", f"x={tmp_path / 'x.npy'}", code=(2,))
    assert "empty batch has no loss" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def _runtime_reshape_model(path):
    """x [N, 8] -> Reshape(x, [N, 2, -1, 2], allowzero=1) -> MatMul w [2, 3], as GPT-2's dynamo export
    splits heads: onnxruntime runs an empty batch (y 0x2x2x3), but shape inference with x fixed to 0x8
    refuses the Reshape (a product of 0 with -1), so the output's shape is known only from a run."""
    from onnx import TensorProto, helper

    from conftest import make_model

    nodes = [helper.make_node("Shape", ["x"], ["n"], start=0, end=1),
             helper.make_node("Concat", ["n", "tail"], ["shp"], axis=0),
             helper.make_node("Reshape", ["x", "shp"], ["r"], allowzero=1),
             helper.make_node("MatMul", ["r", "w"], ["y"])]
    inits = [numpy_helper.from_array(np.ones((2, 3), np.float32), "w"),
             numpy_helper.from_array(np.array([2, -1, 2], np.int64), "tail")]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits, opset=18)
    onnx.save(m, path)
    return path


def test_an_empty_batch_is_told_when_only_a_run_gives_the_output_shape(tmp_path):
    model = _runtime_reshape_model(tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.zeros((0, 8), np.float32))
    r = _grad("grad", model, "--input", f"x={tmp_path / 'x.npy'}", code=(2,))
    assert "empty batch has no loss" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    ds = tmp_path / "ds"
    ds.mkdir()
    x = np.random.default_rng(3).normal(size=(2, 8)).astype(np.float32)
    np.savez(ds / "a0.npz", x=x)
    np.savez(ds / "b1.npz", x=np.zeros((0, 8), np.float32))
    got = json.loads(_grad("grad", model, "--inputs-dir", ds, "--json", "-").stdout)
    assert got["samples"] == 1 and got["loss"]["value"] == pytest.approx(float(x.sum() * 3), rel=1e-6)
    assert any("empty batch" in n and "b1.npz" in n for n in got["notes"]), got["notes"]
