"""diff's direct mode for models whose weights lie in external data files (api.diff_direct, runtime.direct_files):
the second `diff` runs the merged graph with both models' big weights read by onnxruntime from their files (two
folders: locations relative to the one that holds both), each data file checked as the model files are. Oracle: numpy
float64 on each model's own weights as the files hold them now."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api

rng = np.random.default_rng(11)
W1 = (rng.standard_normal((64, 96)) / 8).astype(np.float32)
W2 = (rng.standard_normal((96, 80)) / 10).astype(np.float32)
B = rng.standard_normal(80).astype(np.float32)


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    return tmp_path / "cache"


def _write(path, scale=1.0, external=True):
    path.parent.mkdir(parents=True, exist_ok=True)
    vi = helper.make_tensor_value_info
    w1 = (W1 * np.float32(scale)).astype(np.float32)
    m = make_model([helper.make_node("MatMul", ["x", "W1"], ["h"], name="mm1"), helper.make_node("Tanh", ["h"], ["t"], name="tanh"),
                    helper.make_node("MatMul", ["t", "W2"], ["u"], name="mm2"), helper.make_node("Add", ["u", "B"], ["y"], name="add")],
                   [vi("x", TensorProto.FLOAT, [3, 64])], [vi("y", TensorProto.FLOAT, [3, 80])],
                   [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(W2, "W2"), numpy_helper.from_array(B, "B")])
    if external:
        onnx.save_model(m, str(path), save_as_external_data=True, location=path.name + ".data", size_threshold=0)
    else:
        onnx.save(m, str(path))
    return str(path)


def _diff(a, b):
    return api.diff(a, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))


def _served(res) -> bool:
    return type(res.a).__name__ == "ServedSide"


def _y(path, x):
    m = onnx.load(path)
    w = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in m.graph.initializer}
    return np.tanh(x.astype(np.float64) @ w["W1"]) @ w["W2"] + w["B"]


def _check_y(res, a, b):
    row = next(r for r in res.results if r.pair.a.name == "y")
    x = res.feed["x"]
    assert row.metrics.max_abs == pytest.approx(np.abs(_y(a, x) - _y(b, x)).max(), rel=1e-4, abs=1e-9)


def test_second_diff_is_served_from_both_models_files(tmp_path, cache):
    a, b = _write(tmp_path / "one" / "a.onnx"), _write(tmp_path / "two" / "deeper" / "b.onnx", scale=1.01)
    first = _diff(a, b)
    second = _diff(a, b)
    assert not _served(first) and _served(second)
    assert [(r.pair.a.name, r.metrics, r.passed) for r in second.results] == [(r.pair.a.name, r.metrics, r.passed) for r in first.results]
    _check_y(second, a, b)
    skel = next(p for p in cache.rglob("*.onnx")).read_bytes()
    assert W1.tobytes() not in skel and W2.tobytes() not in skel


@pytest.mark.parametrize("which", ["W1", "B"])
def test_edited_data_file_of_b_is_not_served_stale(tmp_path, cache, which):
    a, b = _write(tmp_path / "a" / "a.onnx"), _write(tmp_path / "b" / "b.onnx", scale=1.01)
    _diff(a, b)
    assert _served(_diff(a, b))
    data = tmp_path / "b" / "b.onnx.data"
    st = data.stat()
    raw = bytearray(data.read_bytes())
    at = bytes(raw).index((W2 if which == "W1" else B).tobytes()) + 4 * 5  # (W1 of b is scaled: W2's bytes are found)
    raw[at:at + 4] = np.float32(3).tobytes()
    data.write_bytes(bytes(raw))
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns))
    res = _diff(a, b)
    assert not _served(res)
    _check_y(res, a, b)
    again = _diff(a, b)
    assert _served(again)
    _check_y(again, a, b)


def test_one_model_of_its_own_bytes_beside_one_of_external_data_is_not_served(tmp_path, cache):
    a, b = _write(tmp_path / "a.onnx"), _write(tmp_path / "b.onnx", scale=1.01, external=False)
    _diff(a, b)
    res = _diff(a, b)
    assert not _served(res)
    _check_y(res, a, b)
