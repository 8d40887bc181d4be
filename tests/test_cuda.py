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
    gpu = api.layers(sample_path(name), api.Selection(all=True), api.RunConfig(device="cuda"), inputs=api.InputSpec(arrays=feeds), save=True)
    assert gpu.info.device == "cuda" and "CUDAExecutionProvider" in gpu.info.providers
    for t, st in cpu.stats.items():
        g = gpu.stats[t]
        assert g.count == st.count and g.nan == st.nan and g.inf == st.inf, t
        assert g.mean == pytest.approx(st.mean, rel=1e-3, abs=1e-4), t
        np.testing.assert_allclose(gpu.arrays[t], cpu.arrays[t], rtol=1e-3, atol=1e-4, err_msg=t)


def test_auto_picks_cuda_when_usable():
    assert resolve_device("auto") == "cuda"


def test_diff_on_cuda_keeps_tensors_on_the_device_and_agrees_with_cpu():
    cpu = api.diff(sample_path("cnn"), vs_reference=True, selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))
    gpu = api.diff(sample_path("cnn"), vs_device="cpu", selection=api.Selection(all=True), config=api.RunConfig(device="cuda"))
    assert gpu.a.device == "cuda" and gpu.results
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
