"""`grad` on LSTM and GRU models exported from torch by both exporters (TorchScript, opset 17; dynamo,
opset 18): a 2-layer LSTM and a bidirectional GRU, each under a Linear head (tests/torch_rnn_models.py).

- ``--check`` passes on every weight and activation gradient;
- every weight gradient that maps onto a module parameter (the exporters reorder the gates and concatenate
  the biases: matched by value) agrees with torch.autograd on the nn.Module itself, in float64, to 1e-4 of
  the largest value (onnxprobe's run is float32: onnxruntime has no double LSTM or GRU kernel).

The models are built and exported by a torch worker process (importing torch here would raise the test
session's peak memory); skipped without torch, the dynamo exports without onnxscript.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from onnxprobe import api
from onnxprobe.autodiff.select import weight_value

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from torch_rnn_models import MODELS, onnx_grads_from_module  # noqa: E402

EXPORTS = [f"{m}_{e}" for m in ("lstm", "gru") for e in ("legacy", "dynamo")]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (test-only dependency)")
    out = tmp_path_factory.mktemp("rnn")
    r = subprocess.run([sys.executable, str(HERE / "torch_rnn_models.py"), str(out), "lstm", "gru"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def _model(exported: Path, name: str):
    p = exported / f"{name}.onnx"
    if not p.exists():
        pytest.skip(f"{p.name} was not exported (the dynamo exporter needs onnxscript)")
    ref = dict(np.load(exported / f"{name.split('_')[0]}.npz"))
    return p, ref


def _grad(p: Path, ref: dict, **kw):
    """`grad` with torch's input and output gradient."""
    return api.grad(p, None, api.RunConfig(device="cpu"), api.GradSpec(loss="output-grad", output_grad=ref["dy"].astype(np.float32)),
                    inputs=api.InputSpec(arrays={"x": ref["x"].astype(np.float32)}), **kw)


@pytest.mark.parametrize("name", EXPORTS)
def test_check_passes(exported, name):
    p, ref = _model(exported, name)
    r = _grad(p, ref, check=True)
    kinds = {row.target.kind for row in r.rows}
    assert "weight" in kinds and len(r.rows) >= 5
    bad = [(row.name, row.check) for row in r.rows if not row.check["ok"]]
    assert not bad, bad[:3]


@pytest.mark.parametrize("name", EXPORTS)
def test_weight_gradients_match_the_torch_module(exported, name):
    p, ref = _model(exported, name)
    r = _grad(p, ref, save=True)
    proto = api.load(p).proto
    w = {row.name: weight_value(proto, row.name) for row in r.rows if row.target.kind == "weight"}
    want = onnx_grads_from_module(w, ref)
    rnn = [k for k, v in w.items() if v.ndim == 3 and v.shape[1] > v.shape[0] * 8]  # the W and R of the layers
    assert rnn and all(k in want for k in rnn), f"recurrent weights not matched to parameters: {set(rnn) - set(want)}"
    layers = MODELS[name.split("_")[0]][3]
    assert len(want) == 3 * layers + 2  # W, R, B (b_ih and b_hh, both directions) per layer, the head's two
    for k, g in want.items():
        np.testing.assert_allclose(r.arrays[k], g, rtol=0, atol=1e-4 * max(float(np.abs(g).max()), 1e-12), err_msg=k)
