"""`grad` on CUDA: forward and backward in one CUDA session give the CPU gradients, and the exported
backward model runs under the CUDA provider of stock onnxruntime-gpu. Skipped without a usable CUDA
execution provider."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from conftest import sample_feeds, sample_path
from onnxprobe import api
from onnxprobe.runtime.ort import cuda_usable

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA execution provider (onnxruntime-gpu with CUDA libraries)")]


@pytest.mark.parametrize("name", ["cnn", "transformer_block", "mlp", "dynamic_batch"])
def test_cuda_gradients_agree_with_cpu(name):
    feeds = sample_feeds(name)
    cpu = api.grad(sample_path(name), api.Selection(all=True), api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays=feeds), save=True)
    gpu = api.grad(sample_path(name), api.Selection(all=True), api.RunConfig(device="cuda"), inputs=api.InputSpec(arrays=feeds), save=True)
    assert gpu.info.device == "cuda" and "CUDAExecutionProvider" in gpu.info.providers
    assert gpu.loss == pytest.approx(cpu.loss, rel=1e-4, abs=1e-5)
    for k, g in cpu.arrays.items():
        scale = max(float(np.abs(g).max()), 1e-6)
        np.testing.assert_allclose(gpu.arrays[k], g, rtol=0, atol=1e-3 * scale, err_msg=k)


def test_export_runs_under_the_cuda_provider(tmp_path):
    out = tmp_path / "bw.onnx"
    gp = api.export_backward(api.load(sample_path("cnn")), out)
    s = ort.InferenceSession(str(out), providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert "CUDAExecutionProvider" in s.get_providers()
    res = dict(zip([o.name for o in s.get_outputs()], s.run(None, sample_feeds("cnn"))))
    assert set(res) == {gp.loss.loss, *gp.grads.values()}
    assert all(np.isfinite(v).all() for v in res.values())
