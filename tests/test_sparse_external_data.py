"""Sparse tensors (a graph's sparse_initializer, a Constant's sparse_value) whose values live in external data:
read from the model's folder like every other weight, their locations checked the same way. onnx's loader
skips them, and onnxruntime, handed the model as bytes, read them relative to the working directory: a
file of the same name there was silently taken for the model's weights, and a location outside the
model's folder was onnxruntime's multi-line refusal (QA)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
VALUES = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
INDICES = np.array([0, 2, 5, 7], np.int64)  # flat positions in the [2, 4] dense tensor


def _sparse(location: str) -> onnx.SparseTensorProto:
    values = TensorProto(name="S", data_type=TensorProto.FLOAT, dims=[4], data_location=TensorProto.EXTERNAL)
    for k, v in (("location", location), ("offset", "0"), ("length", "16")):
        e = values.external_data.add()
        e.key, e.value = k, v
    return helper.make_sparse_tensor(values, numpy_helper.from_array(INDICES, "S_idx"), [2, 4])


def _model(folder, location="s.bin", constant=False, values=VALUES):
    """folder/m.onnx: y = x + S, S a [2, 4] sparse tensor (an initializer, or a Constant's sparse_value)
    whose values are external data at ``location``, written into folder/s.bin."""
    folder.mkdir(exist_ok=True)
    (folder / "s.bin").write_bytes(values.tobytes())
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Add", ["x", "S"], ["y"], name="add")]
    if constant:
        nodes.insert(0, helper.make_node("Constant", [], ["S"], name="c", sparse_value=_sparse(location)))
    m = make_model(nodes, [vi("x", TensorProto.FLOAT, [2, 4])], [vi("y", TensorProto.FLOAT, [2, 4])])
    if not constant:
        m.graph.sparse_initializer.append(_sparse(location))
    onnx.save(m, folder / "m.onnx")
    return folder / "m.onnx"


def _dense(values=VALUES) -> np.ndarray:
    d = np.zeros(8, np.float64)
    d[INDICES] = values
    return d.reshape(2, 4)


@pytest.mark.parametrize("constant", [False, True], ids=["sparse_initializer", "constant_sparse_value"])
def test_sparse_external_values_are_read_from_the_models_folder_not_the_working_one(tmp_path, monkeypatch, constant):
    model = _model(tmp_path / "model", constant=constant)
    here = tmp_path / "here"
    here.mkdir()
    (here / "s.bin").write_bytes((VALUES * 100).tobytes())  # a file of that name where the command runs
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    np.save(here / "x.npy", x)
    monkeypatch.chdir(here)
    r = runner.invoke(app, ["layers", str(model), "--input", "x=x.npy", "--json", "-"])
    assert r.exit_code == 0, r.output
    (row,) = [t for t in json.loads(r.stdout)["tensors"] if t["name"] == "y"]
    want = x.astype(np.float64) + _dense()  # numpy float64: the oracle
    assert row["max"] == pytest.approx(want.max(), rel=1e-6) and row["min"] == pytest.approx(want.min(), rel=1e-6)


@pytest.mark.parametrize("constant", [False, True], ids=["sparse_initializer", "constant_sparse_value"])
@pytest.mark.parametrize("location", ["../s.bin", "/etc/passwd"])
def test_a_sparse_location_outside_the_folder_is_refused_in_one_line(tmp_path, monkeypatch, constant, location):
    (tmp_path / "s.bin").write_bytes(VALUES.tobytes())
    model = _model(tmp_path / "model", location=location, constant=constant)
    monkeypatch.chdir(tmp_path)
    for cmd in (["layers"], ["inspect"], ["mark", "--all", "-o", str(tmp_path / "out.onnx")]):
        r = runner.invoke(app, [cmd[0], str(model), *cmd[1:]])
        assert r.exit_code == 1, (cmd, r.output)
        assert len(r.stderr.strip().splitlines()) == 1 and "relative path inside the model's folder" in r.stderr, (cmd, r.stderr)
    assert not (tmp_path / "out.onnx").exists()


def test_mark_copies_sparse_external_values_beside_its_output(tmp_path, monkeypatch):
    model = _model(tmp_path / "model")
    out = tmp_path / "out"
    out.mkdir()
    r = runner.invoke(app, ["mark", str(model), "--all", "--stats", "-o", str(out / "marked.onnx")])
    assert r.exit_code == 0, r.output
    (tmp_path / "model" / "s.bin").write_bytes((VALUES * 100).tobytes())  # the input's data is not what the output reads
    import onnxruntime as ort

    x = np.zeros((2, 4), np.float32)
    y = ort.InferenceSession(str(out / "marked.onnx"), providers=["CPUExecutionProvider"]).run(["y"], {"x": x})[0]
    np.testing.assert_array_equal(y, _dense())


@pytest.mark.parametrize("cmd", [["mark", "--all"], ["extract", "--to", "a"]])
def test_a_big_inline_sparse_tensor_stays_in_the_written_model(tmp_path, cmd):
    """A model whose dense weight is external data and whose sparse initializer is inline: the written copy's
    data file takes the dense weight only (onnx.checker refuses a sparse tensor whose data is outside the
    model: "Cannot parse data from external tensors")."""
    n = 600
    values, indices = np.arange(n, dtype=np.float32), np.arange(0, 2 * n, 2, dtype=np.int64)
    sp = helper.make_sparse_tensor(numpy_helper.from_array(values, "S"), numpy_helper.from_array(indices, "S_idx"), [2, n])
    vi = helper.make_tensor_value_info
    m = make_model([helper.make_node("Add", ["x", "S"], ["a"], name="add"), helper.make_node("Mul", ["a", "W"], ["y"], name="mul")],
                   [vi("x", TensorProto.FLOAT, [2, n])], [vi("y", TensorProto.FLOAT, [2, n])],
                   [numpy_helper.from_array(np.full((2, n), 2, np.float32), "W")])
    m.graph.sparse_initializer.append(sp)
    onnx.save_model(m, tmp_path / "m.onnx", save_as_external_data=True, location="m.data", size_threshold=0)
    out = tmp_path / "out.onnx"
    r = runner.invoke(app, [cmd[0], str(tmp_path / "m.onnx"), *cmd[1:], "-o", str(out)])
    assert r.exit_code == 0, r.output
    import onnxruntime as ort

    dense = np.zeros(2 * n, np.float32)
    dense[indices] = values
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(["a"], {"x": np.zeros((2, n), np.float32)})[0]
    np.testing.assert_array_equal(got, dense.reshape(2, n))
