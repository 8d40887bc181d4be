"""The CUDA path: skipped unless onnxruntime really gets the CUDA provider on this machine."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import SAMPLE_NAMES, sample_feeds, sample_path
from onnxprobe import api
from onnxprobe.runtime.ort import cuda_usable, resolve_device

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA execution provider (onnxruntime-gpu with CUDA libraries)")]


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_cuda_stats_agree_with_cpu(name):
    feeds = sample_feeds(name)
    cpu = api.layers(sample_path(name), api.Selection(all=True), api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays=feeds), save=True)
    # float32 products in float32 (tf32=False): TF32, the CUDA provider's default, is 1e-3 off by design
    gpu = api.layers(sample_path(name), api.Selection(all=True), api.RunConfig(device="cuda", tf32=False),
                     inputs=api.InputSpec(arrays=feeds), save=True)
    assert gpu.info.device == "cuda" and "CUDAExecutionProvider" in gpu.info.providers
    for t, st in cpu.stats.items():
        g = gpu.stats[t]
        assert g.count == st.count and g.nan == st.nan and g.inf == st.inf, t
        if st.count == 0:  # a branch that did not run: no values, a mean of NaN on both
            continue
        assert g.mean == pytest.approx(st.mean, rel=1e-3, abs=1e-4), t
        np.testing.assert_allclose(gpu.arrays[t], cpu.arrays[t], rtol=1e-3, atol=1e-4, err_msg=t)


def test_auto_picks_cuda_when_usable():
    assert resolve_device("auto") == "cuda"


def test_diff_on_cuda_keeps_tensors_on_the_device_and_agrees_with_cpu():
    cpu = api.diff(sample_path("cnn"), vs_reference=True, selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))
    gpu = api.diff(sample_path("cnn"), vs_device="cpu", selection=api.Selection(all=True), config=api.RunConfig(device="cuda"))
    assert gpu.a.runner.device == "cuda" and gpu.results
    assert all(r.metrics is not None and r.metrics.max_abs < 1e-3 for r in gpu.results)
    assert len(cpu.results) == len(gpu.results)


def test_one_run_diff_on_cuda_agrees_with_the_host_metrics(tmp_path):
    """Both models in one graph on CUDA (IOBinding; only rows come back) against separate CPU runs
    measured on the host in float64."""
    from conftest import bench_models

    pert = bench_models().perturbed(sample_path("cnn"), tmp_path / "p.onnx")
    kw = dict(selection=api.Selection(all=True), inputs=api.InputSpec(arrays=sample_feeds("cnn")))
    host = api.diff(pert, sample_path("cnn"), config=api.RunConfig(device="cpu"), fuse=False, **kw)
    gpu = api.diff(pert, sample_path("cnn"), config=api.RunConfig(device="cuda"), **kw)
    assert gpu.in_graph == len(gpu.results) == len(host.results)
    for r1, r2 in zip(host.results, gpu.results):
        assert r2.metrics.sqnr_db == pytest.approx(r1.metrics.sqnr_db, abs=0.05), r1.pair.b.name  # CUDA kernels differ a little
        assert r2.metrics.max_abs == pytest.approx(r1.metrics.max_abs, rel=0.05, abs=1e-5)
        assert (r1.introduced is None) == (r2.introduced is None)


def test_tf32_is_said_and_can_be_turned_off():
    """The CUDA provider runs float32 MatMul/Gemm/Conv in TF32 by default: a note and the run's precision say
    so; --runtime-option tf32=0 (RunConfig.tf32=False) turns it off, and the Gemm outputs then agree with
    numpy float64 to float32 rounding (oracle: the mlp sample's fc1 Gemm, x @ W.T + b)."""
    import onnx
    from onnx import numpy_helper

    feeds = sample_feeds("mlp")
    on = api.layers(sample_path("mlp"), api.Selection(all=True), api.RunConfig(device="cuda"), inputs=api.InputSpec(arrays=feeds))
    assert on.info.precision == "tf32" and any("TF32" in n for n in on.notes), on.notes
    off = api.layers(sample_path("mlp"), api.Selection(all=True), api.RunConfig(device="cuda", tf32=False),
                     inputs=api.InputSpec(arrays=feeds), save=True)
    assert off.info.precision is None and not any("TF32" in n for n in off.notes)
    m = onnx.load(str(sample_path("mlp")))
    w = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in m.graph.initializer}
    x = next(iter(feeds.values())).astype(np.float64)
    want = x @ w["fc1.weight"].T + w["fc1.bias"] if w["fc1.weight"].shape[1] == x.shape[1] else x @ w["fc1.weight"] + w["fc1.bias"]
    np.testing.assert_allclose(off.arrays["fc1_out"], want, rtol=1e-5, atol=1e-5)
