"""LSTM, GRU and RNN through the reference runner (runners.reference_rnn): onnx.reference ignores
sequence_lens, activations and clip. Against tests/recurrent_oracle (float64, as the ONNX operators define
them; checked against onnxruntime's kernels by test_recurrent_oracle_matches_onnxruntime) and, for clip, a
loop of the specification's RNN."""

from __future__ import annotations

import numpy as np
import pytest

import recurrent_oracle
from conftest import reference_node

T, NB, I, H = 4, 3, 5, 6


def _run(op, inputs, nout, opset=14, **attrs):
    return reference_node(op, inputs, nout, opset, hidden_size=H, **attrs)


def _weights(op, D, rng):
    g = recurrent_oracle.GATES[op]
    return [rng.standard_normal(s).astype(np.float32) * 0.5 for s in ((D, g * H, I), (D, g * H, H), (D, 2 * g * H))]


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("case", ["lens", "activations", "layout", "linear_before_reset"])
def test_recurrent_as_specified(op, direction, case):
    rng = np.random.default_rng(5)
    D = 2 if direction == "bidirectional" else 1
    x = rng.standard_normal((T, NB, I)).astype(np.float32)
    W, R, B = _weights(op, D, rng)
    lens = np.array([4, 2, 3], np.int32) if case == "lens" else None
    h0 = rng.standard_normal((D, NB, H)).astype(np.float32)
    attrs = {"direction": direction}
    acts = None
    if case == "activations":
        acts = {"LSTM": ["Sigmoid", "Relu", "Tanh"], "GRU": ["Sigmoid", "Relu"], "RNN": ["Relu"]}[op] * D
        attrs["activations"] = acts
    if case == "layout":
        attrs["layout"] = 1
    if case == "linear_before_reset":
        if op != "GRU":
            pytest.skip("GRU's attribute")
        attrs["linear_before_reset"] = 1
    xin, h0in = (x.transpose(1, 0, 2).copy(), h0.transpose(1, 0, 2).copy()) if case == "layout" else (x, h0)
    inputs = {"x": xin, "w": W, "r": R, "b": B, "l": lens, "h0": h0in}
    nout = 3 if op == "LSTM" else 2
    got = _run(op, inputs, nout, **attrs)
    want = recurrent_oracle.run(op, xin.astype(np.float64), W.astype(np.float64), R.astype(np.float64), B.astype(np.float64),
                                lens, h0in.astype(np.float64), direction=direction, linear_before_reset=attrs.get("linear_before_reset", 0),
                                layout=attrs.get("layout", 0), activations=acts)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_rnn_clip_bounds_the_activation_input():
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((T, NB, I)) * 4).astype(np.float32)
    W, R, B = _weights("RNN", 1, rng)
    y, yh = _run("RNN", {"x": x, "w": W, "r": R, "b": B}, 2, clip=0.3)
    h = np.zeros((NB, H))
    for t in range(T):
        h = np.tanh(np.clip(x[t] @ W[0].T.astype(np.float64) + h @ R[0].T + B[0, :H] + B[0, H:], -0.3, 0.3))
        np.testing.assert_allclose(y[t, 0], h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(yh[0], h, rtol=1e-5, atol=1e-6)
