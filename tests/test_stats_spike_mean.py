"""The mean of a sparse, one-signed tensor (a sigmoid map: ~1e-7 almost everywhere, one 1.0) to its own
digits, on every in-graph form that shifts by the midpoint c = 0.5: the fast row (a size no block row
divides), the careful row (a NaN inside: the deferred rerun of layers, mark --stats' If) and the block
form's rerun. x - c taken in float32 rounds each 1e-7 to a multiple of float32's ulp at 0.5 (3e-8), the
same way every time: the mean came out 7e-4 (fast) and 2.6e-3 (careful) of itself off numpy float64's."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.stats.tensor_stats import TensorStats


def spike(n: int, nan: bool) -> np.ndarray:
    x = np.full(n, 1e-7, np.float32)
    x[n // 3] = 1.0
    if nan:
        x[-1] = np.nan
    return x


def model(x: np.ndarray) -> onnx.ModelProto:
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    return make_model([helper.make_node("Identity", ["x"], ["t"], name="a"), helper.make_node("Identity", ["t"], ["y"], name="b")],
                      [helper.make_tensor_value_info("x", elem, list(x.shape))],
                      [helper.make_tensor_value_info("y", elem, list(x.shape))])


def want(x: np.ndarray) -> tuple[float, float]:
    f = x.astype(np.float64)
    f = f[np.isfinite(f)]
    return float(f.mean()), float(f.std())


def check(st: TensorStats, x: np.ndarray, label) -> None:
    mean, std = want(x)
    assert st.mean == pytest.approx(mean, rel=1e-6, abs=0), label
    assert st.abs_mean == pytest.approx(mean, rel=1e-6, abs=0), label
    assert st.std == pytest.approx(std, rel=1e-6, abs=0), label


@pytest.mark.parametrize("n", [65537, 1024])  # a prime: the fast row; 1024: the block form (its rerun with a NaN)
@pytest.mark.parametrize("nan", [False, True])
def test_layers_mean_of_a_sparse_spike(n, nan, tmp_path, monkeypatch):
    from onnxprobe.runtime.runners import base as base_runner

    monkeypatch.setattr(base_runner, "SMALL_ON_HOST", (0, 0))  # the graph's forms, whatever the size
    x = spike(n, nan)
    p = tmp_path / "m.onnx"
    onnx.save(model(x), p)
    res = api.layers(p, api.Selection(names=("t",)), api.RunConfig(device="cpu", cache=False), api.InputSpec(arrays={"x": x}))
    check(res.stats["t"], x, (n, nan))


@pytest.mark.parametrize("nan", [False, True])  # the fast row; the careful one, through the If
def test_mark_stats_mean_of_a_sparse_spike(nan, tmp_path):
    x = spike(65537, nan)
    p, out = tmp_path / "m.onnx", tmp_path / "stats.onnx"
    onnx.save(model(x), p)
    r = CliRunner().invoke(app, ["mark", str(p), "-o", str(out), "--name", "t", "--stats"])
    assert r.exit_code == 0, r.output
    meta = json.loads({q.key: q.value for q in onnx.load(str(out)).metadata_props}["onnxprobe.exposed"])
    s = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    (row,) = s.run([next(iter(meta["outputs"]))], {"x": x})
    check(TensorStats.from_row(row), x, nan)


def test_block_form_std_where_float32_squares_are_subnormal(tmp_path, monkeypatch):
    """A tensor of half-range 1e-18 (inside SAFE_HALF_RANGE: no rerun for its range) whose values mostly sit
    2.5e-23 either side of 0: their squares about the block means, 6e-46, are below float32's smallest
    subnormal and flush to 0 in the block sums; the std came out 1.6e-4 off numpy float64's."""
    from onnxprobe.runtime.runners import base as base_runner

    monkeypatch.setattr(base_runner, "SMALL_ON_HOST", (0, 0))
    a = np.float32(2.5e-23)
    x = np.tile(np.array([a, -a], np.float32), 1024 * 1024 // 2)
    x[:2] = [1e-18, -1e-18]
    x = x.reshape(1024, 1024)
    p = tmp_path / "m.onnx"
    onnx.save(model(x), p)
    res = api.layers(p, api.Selection(names=("t",)), api.RunConfig(device="cpu", cache=False), api.InputSpec(arrays={"x": x}))
    (probe,) = [q for q in res.plan.probes if q.ref.name == "t"]
    assert probe.stats_block  # the block form
    mean, std = want(x)
    st = res.stats["t"]
    assert st.std == pytest.approx(std, rel=1e-6, abs=0)
    assert abs(st.mean - mean) <= 1e-6 * std
    assert st.abs_mean == pytest.approx(np.abs(x.astype(np.float64)).mean(), rel=1e-6, abs=0)
