"""One model run alike on both sides (the same runtime, device, level and precision: ``--runtime openvino --vs-runtime
openvino`` on a CPU that computes in bf16) is one computation, as the note says ('B is the same model run the same
way'): judged by allclose, not by the 20 dB a bf16 run against a float32 one gets (10% of RMS error waved through)."""

from __future__ import annotations

import numpy as np

from conftest import SAMPLES
from onnxprobe import api
from onnxprobe.runtime.runners import ort


def test_one_model_run_alike_in_bf16_is_judged_as_one_computation(monkeypatch):
    monkeypatch.setattr(ort.OrtRunner, "inference_precision", lambda self: "bf16")  # a runtime computing in bf16
    res = api.diff(str(SAMPLES / "mlp.onnx"), vs_runtime="ort", config=api.RunConfig(device="cpu"))
    tol = res.results[0].tolerance
    assert tol.metric == "allclose" and "bf16" not in tol.why
    assert res.verdict()[0] == "pass" and all(np.isclose(r.metrics.max_abs, 0.0) for r in res.results)


def test_a_bf16_run_against_a_float32_one_keeps_the_reduced_precision_rule(monkeypatch):
    # one runner in bf16 (the first asked), the other onnxruntime as it is: two computations
    seen: list = []

    def precision(self):
        if self not in seen:
            seen.append(self)
        return "bf16" if self is seen[0] else None
    monkeypatch.setattr(ort.OrtRunner, "inference_precision", precision)
    res = api.diff(str(SAMPLES / "mlp.onnx"), vs_runtime="ort", config=api.RunConfig(device="cpu"))
    tol = res.results[0].tolerance
    assert len(seen) == 2 and tol.metric == "sqnr" and tol.min_sqnr == 20.0


def test_both_sides_expose_the_same_tensors_of_one_model(monkeypatch):
    """Run apart (here against onnx.reference), A exposed the tensors B's introduced-error cones start from and B
    did not: a compiled runtime's rounding moves with what a run exposes, and OpenVINO in bf16 read a model
    against itself failing (test_openvino's twin). B exposes their counterparts too: one model, one set of outputs."""
    from onnxprobe.compare import sides

    seen: dict[int, set] = {}
    real = sides.Side.values

    def spy(self, observables, feeds, **k):
        seen.setdefault(id(self), set()).update(o.probe for o in observables)
        return real(self, observables, feeds, **k)

    monkeypatch.setattr(sides.Side, "values", spy)
    for name in ("mlp", "transformer_block"):
        seen.clear()
        res = api.diff(str(SAMPLES / f"{name}.onnx"), vs_runtime="reference")
        assert res.verdict()[0] == "pass" and len(seen) == 2, seen
        a, b = seen.values()
        assert len(a) > len(res.results) and a == b, (name, sorted(a ^ b))  # cones' inputs asked for: the test can fail
