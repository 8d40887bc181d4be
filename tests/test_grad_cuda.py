"""`grad` on CUDA: forward and backward in one CUDA session give the CPU gradients (the sample models, every
rule-table case of the recurrent, control-flow, algebra, attention and com.microsoft rules, the torch-exported
LSTM and GRU), and the exported backward model runs under the CUDA provider of stock onnxruntime-gpu.
Skipped without a usable CUDA execution provider."""

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
    # float32 products in float32 (tf32=False): TF32, the CUDA provider's default, is 1e-3 off by design
    gpu = api.grad(sample_path(name), api.Selection(all=True), api.RunConfig(device="cuda", tf32=False),
                   inputs=api.InputSpec(arrays=feeds), save=True)
    assert gpu.info.device == "cuda" and "CUDAExecutionProvider" in gpu.info.providers
    assert gpu.loss == pytest.approx(cpu.loss, rel=1e-4, abs=1e-5)
    # a gradient that is 0 but for rounding (attention's key bias: softmax ignores a shift of every key) is
    # compared at the rounding of the model's gradients, not at its own noise's
    floor = 1e-4 * max(float(np.abs(g).max()) for g in cpu.arrays.values())
    for k, g in cpu.arrays.items():
        scale = max(float(np.abs(g).max()), floor, 1e-6)
        np.testing.assert_allclose(gpu.arrays[k], g, rtol=0, atol=1e-3 * scale, err_msg=k)


def test_export_runs_under_the_cuda_provider(tmp_path):
    out = tmp_path / "bw.onnx"
    gp = api.export_backward(api.load(sample_path("cnn")), out)
    s = ort.InferenceSession(str(out), providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert "CUDAExecutionProvider" in s.get_providers()
    res = dict(zip([o.name for o in s.get_outputs()], s.run(None, sample_feeds("cnn"))))
    assert set(res) == {gp.loss.loss, *gp.grads.values()}
    assert all(np.isfinite(v).all() for v in res.values())


# the rules of recurrent layers, control flow, tensor algebra and the com.microsoft ops, on CUDA: each case of
# the rule table (tests/test_autodiff_rules.py) gives the CPU gradients in one CUDA session
NEW_FAMILIES = {"recurrent", "lstm", "control", "algebra", "scatter", "attention", "fused", "activation", "loss"}


def _new_cases():
    from test_autodiff_rules import CASES

    from onnxprobe.autodiff import registry

    registry.load()
    extra = {"GroupNormalization", "RMSNormalization", "ReduceProd", "ReduceLogSumExp", "ReduceLogSum", "ReduceL1"}
    return [c for c in CASES if c.ort and (registry.RULES[c.op].family in NEW_FAMILIES or c.op in extra)]


@pytest.mark.parametrize("case", _new_cases(), ids=lambda c: c.id)
def test_new_rules_on_cuda_match_cpu(case):
    from test_autodiff_rules import FLOAT, build, cotangents, values, with_cotangents, wrt_of

    from onnxprobe.autodiff.engine import attach_backward

    vals = values(case)
    cot = cotangents(case, vals)
    model, seeds = with_cotangents(build(case, FLOAT), case, FLOAT)
    bw = attach_backward(model, seeds, wrt_of(case), outputs=list(case.outputs))
    feeds = {k: v.astype(np.float32) for k, v in vals.items() if k in case.inputs}
    feeds.update({f"d_{o}": cot[o].astype(np.float32) for o in case.outputs})
    names = list(bw.grads.values())
    got = {}
    for provider in (CPU, CUDA):
        s = ort.InferenceSession(bw.model.SerializeToString(), providers=[provider, CPU])
        got[provider[0] if isinstance(provider, tuple) else provider] = dict(zip(names, s.run(names, feeds)))
    for n in names:
        c, g = got[CPU][n], got[CUDA[0]][n]
        if not np.allclose(g, c, rtol=0, atol=1e-3 * max(float(np.abs(c).max()), 1e-6)):
            forward = _forward_differs(build(case, FLOAT), case, feeds)
            if forward:  # onnxruntime's CUDA kernel of the op itself disagrees with its CPU one: not the rule's doing
                pytest.xfail(f"onnxruntime's CUDA provider computes another forward value than its CPU one: {forward}")
        np.testing.assert_allclose(g, c, rtol=0, atol=1e-3 * max(float(np.abs(c).max()), 1e-6), err_msg=n)


CPU = "CPUExecutionProvider"
CUDA = ("CUDAExecutionProvider", {"use_tf32": "0"})  # float32 products in float32: TF32 is 1e-3 off by design


def _forward_differs(model, case, feeds) -> str | None:
    """Which output of the forward model alone differs between the CPU and CUDA providers, and by how much."""
    inputs = {k: v for k, v in feeds.items() if k in {i.name for i in model.graph.input}}
    outs = [o.name for o in model.graph.output]
    res = [ort.InferenceSession(model.SerializeToString(), providers=[p, CPU]).run(outs, inputs) for p in (CPU, CUDA)]
    for name, c, g in zip(outs, *res):
        if np.shape(c) != np.shape(g) or not np.allclose(g, c, rtol=1e-4, atol=1e-5, equal_nan=True):
            return f"{case.op} output {name}: CPU {np.asarray(c).ravel()[:4]} CUDA {np.asarray(g).ravel()[:4]}"
    return None


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_torch_rnn_exports_on_cuda_match_cpu(name, tmp_path):
    """The torch-exported LSTM and GRU (tests/torch_rnn_models.py): the CUDA gradients are the CPU ones."""
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parent
    r = subprocess.run([sys.executable, str(here / "torch_rnn_models.py"), str(tmp_path), name], capture_output=True,
                       text=True, timeout=900)
    if r.returncode != 0:
        pytest.skip(f"torch export failed: {r.stderr[-300:]}")
    ref = dict(np.load(tmp_path / f"{name}.npz"))
    spec = api.GradSpec(loss="output-grad", output_grad=ref["dy"].astype(np.float32))
    inputs = api.InputSpec(arrays={"x": ref["x"].astype(np.float32)})
    p = tmp_path / f"{name}_legacy.onnx"
    cpu = api.grad(p, None, api.RunConfig(device="cpu"), spec, inputs=inputs, save=True)
    gpu = api.grad(p, None, api.RunConfig(device="cuda", tf32=False), spec, inputs=inputs, save=True)
    assert gpu.info.device == "cuda"
    for k, g in cpu.arrays.items():
        np.testing.assert_allclose(gpu.arrays[k], g, rtol=0, atol=1e-3 * max(float(np.abs(g).max()), 1e-6), err_msg=k)
