"""`diff --vs-torch` on the tiny BERT and GPT-2 of fetch_models.sh, both exporters, against the modules
rebuilt from `transformers` (tests/tiny_transformers.py).

Opt-in: ONNXPROBE_MODELS=DIR, as for tests/test_real_models.py, and transformers installed
(the version of shared/models/scripts/export_tiny_transformers.py: pip install transformers==5.24.0)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from onnxprobe import api

MODELS = Path(os.environ["ONNXPROBE_MODELS"]) if os.environ.get("ONNXPROBE_MODELS") else None
pytestmark = pytest.mark.skipif(MODELS is None or not MODELS.is_dir(),
                                reason="real models not fetched: run ../shared/models/fetch_models.sh DIR and set ONNXPROBE_MODELS=DIR")
FILE = Path(__file__).with_name("tiny_transformers.py")
CASES = [("bert", "bert_tiny_random_legacy_op17"), ("bert", "bert_tiny_random_dynamo_op18"),
         ("gpt2", "gpt2_tiny_random_legacy_op17"), ("gpt2", "gpt2_tiny_random_dynamo_op18")]


@pytest.fixture(scope="module")
def tiny():
    pytest.importorskip("torch")
    pytest.importorskip("transformers", reason="the tiny BERT/GPT-2 modules need transformers (==5.24.0)")
    import tiny_transformers

    return tiny_transformers


@pytest.mark.parametrize("func, stem", CASES)
def test_linear_and_layernorm_modules_pair_and_pass(tiny, func, stem):
    path = MODELS / "transformers" / f"{stem}.onnx"
    if not path.is_file():
        pytest.skip(f"{path.name} not fetched")
    res = api.diff_torch(path, f"{FILE}:{func}")
    assert res.verdict()[0] == "pass", res.verdict()
    module, _ = getattr(tiny, func)()
    layers = {p for p, m in module.named_modules() if type(m).__name__ in ("Linear", "LayerNorm", "Conv1D")}
    paired = {r.pair.b.module for r in res.results if r.metrics is not None}
    assert len(layers & paired) >= 0.9 * len(layers), sorted(layers - paired)


@pytest.mark.parametrize("func, stem", CASES)
def test_gradients_agree_with_torch_autograd(tiny, func, stem):
    path = MODELS / "transformers" / f"{stem}.onnx"
    if not path.is_file():
        pytest.skip(f"{path.name} not fetched")
    res = api.diff_grad_torch(path, f"{FILE}:{func}")
    assert res.verdict()[0] == "pass", res.verdict()
    weights = [r for r in res.results if r.pair.strategy == "torch-param"]
    # a sum of a LayerNormalization of scale 1 is constant before it: those gradients are noise, not judged
    assert len(weights) >= 10 and all(r.passed or (r.passed is None and r.unjudged) for r in weights)
    assert any(r.passed for r in weights)
    if func == "gpt2":  # the tied wte / lm_head: compared (legacy stores it twice: the sum of both gradients)
        assert any(r.pair.b.name.endswith("transformer.wte.weight") and r.passed for r in weights), res.matching.unmatched_b
    weight_grads = [o for o in res.a.observation.observables if o.effective_op.endswith(" weight")]
    explained = {u.obs.name for u in res.matching.unmatched_a if u.reason}
    assert all(o.name in explained or any(r.pair.a.name == o.name for r in weights) for o in weight_grads)
