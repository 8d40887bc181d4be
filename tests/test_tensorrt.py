"""`--runtime tensorrt` and `diff --vs-runtime tensorrt`. The GPU tests are skipped without TensorRT,
cuda-python and a GPU; bench/gpu_check.sh runs them (UNTESTED ON HARDWARE so far). The first tests run
everywhere: the errors a machine without TensorRT gives."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from conftest import SAMPLE_NAMES, sample_feeds, sample_path
from onnxprobe import api
from onnxprobe.errors import MissingExtra, UsageError
from onnxprobe.runtime.runners.tensorrt import resolve_device


def test_without_tensorrt_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", None)
    with pytest.raises(MissingExtra, match=r"pip install 'onnxprobe\[tensorrt\]'"):
        api.layers(sample_path("mlp"), runtime="tensorrt")


def test_tensorrt_devices_are_cuda_devices():
    assert resolve_device("auto") == 0 and resolve_device("cuda") == 0 and resolve_device("cuda:3") == 3
    for bad in ("cpu", "CPU", "cuda:x", "npu"):
        with pytest.raises(UsageError, match="TensorRT runs on CUDA GPUs"):
            resolve_device(bad)


def _usable() -> str | None:
    """Why the GPU tests cannot run here, or None."""
    for module in ("tensorrt", "cuda"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install 'onnxprobe[tensorrt]')"
    try:
        from onnxprobe.runtime.runners.tensorrt_engine import Cuda, modules

        trt, cudart = modules()
        Cuda(cudart, 0)
    except Exception as e:  # noqa: BLE001 - no driver, no device
        return f"no usable GPU for TensorRT: {type(e).__name__}: {e}"
    return None


WHY = _usable()
gpu = pytest.mark.skipif(WHY is not None, reason=WHY or "")


@gpu
@pytest.mark.tensorrt
@pytest.mark.parametrize("mode", ["debug", "output"])
@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_layers_on_tensorrt_agree_with_onnxruntime_on_the_cpu(name, mode):
    feeds = sample_feeds(name)
    kw = dict(inputs=api.InputSpec(arrays=feeds), save=True)
    cpu = api.layers(sample_path(name), api.Selection(all=True), api.RunConfig(device="cpu"), **kw)
    trt = api.layers(sample_path(name), api.Selection(all=True), runtime="tensorrt",
                     runtime_options={"mode": mode, "tf32": "0"}, **kw)
    assert trt.info.runtime == "tensorrt"
    for ref, st in trt.rows():
        if ref.name in trt.unobserved:
            assert "not observable" in trt.unobserved[ref.name] or "fused" in trt.unobserved[ref.name]
            continue
        want = cpu.arrays[ref.name]
        got = trt.arrays[ref.name]
        assert got.shape == want.shape, ref.name
        if want.dtype.kind == "f":
            scale = max(float(np.abs(want).max()), 1e-6)
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * scale, err_msg=ref.name)
            assert st.mean == pytest.approx(float(np.mean(got, dtype=np.float64)), rel=1e-6, abs=1e-9)
    body = {r.name for r, _ in cpu.rows() if r.scope}
    assert body <= set(trt.unobserved), "tensors inside If/Loop bodies cannot be marked"


@gpu
@pytest.mark.tensorrt
@pytest.mark.parametrize("name", ["cnn", "transformer_block", "mlp"])
def test_diff_vs_tensorrt_passes_its_default_criterion(name):
    res = api.diff(sample_path(name), vs_runtime="tensorrt", selection=api.Selection(all=True))
    assert res.b.runner.kind == "tensorrt" and res.verdict()[0] == "pass", (res.verdict(), res.criterion)
    assert res.compared >= 3 and ("two runtimes" in res.criterion or "tf32" in res.criterion)
    f32 = api.diff(sample_path(name), vs_runtime="tensorrt", selection=api.Selection(all=True), runtime_options={"tf32": "0"})
    assert f32.criterion.startswith("SQNR >= 60 dB") and f32.verdict()[0] == "pass", f32.verdict()


@gpu
@pytest.mark.tensorrt
def test_the_memory_budget_splits_tensorrt_runs():
    feeds = sample_feeds("cnn")
    one = api.layers(sample_path("cnn"), api.Selection(all=True), inputs=api.InputSpec(arrays=feeds), runtime="tensorrt")
    many = api.layers(sample_path("cnn"), api.Selection(all=True), inputs=api.InputSpec(arrays=feeds), runtime="tensorrt",
                      max_memory=20_000)
    assert set(many.stats) == set(one.stats)
    for n, st in one.stats.items():
        assert many.stats[n].count == st.count and many.stats[n].mean == pytest.approx(st.mean, rel=1e-3, abs=1e-5), n
