"""OpenVINO on a model that declares an input no node reads (onnxruntime's optimized copy of an IR-3 model
adds such '..._SHAPE' inputs): OpenVINO drops it at conversion and refused the feed the model declares
("Port for tensor name W_0__SHAPE was not found"), so `layers --runtime openvino`, `diff OPT --vs-runtime
openvino` and `diff OPT --runtime openvino --vs-runtime ...` failed. Its runner now goes through
runtime.feeds.fed as the onnxruntime and onnx.reference runners do. Oracle: onnx.reference on the same feeds."""

from __future__ import annotations

import numpy as np
import pytest

from onnxprobe import api
from test_diff_unread_inputs import W, W2, X, _model, _ref

pytest.importorskip("openvino")
pytestmark = pytest.mark.openvino
F32 = {"INFERENCE_PRECISION_HINT": "f32"}  # this CPU's default is bf16


@pytest.fixture
def pair(tmp_path):
    return _model(tmp_path / "plain.onnx", W), _model(tmp_path / "extra.onnx", W2, "W_0__SHAPE")


def test_layers_on_openvino_gives_the_reference_values(pair):
    _, extra = pair
    res = api.layers(extra, api.Selection(all=True), inputs=api.InputSpec(arrays={"x": X}), runtime="openvino", save=True,
                     runtime_options=F32)
    np.testing.assert_allclose(res.arrays["y"], _ref(extra, X), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("sides", [dict(vs_runtime="openvino"), dict(runtime="openvino", vs_runtime="reference"),
                                   dict(runtime="openvino", vs_runtime="ort")])
def test_one_model_against_itself_on_openvino(pair, sides):
    _, extra = pair
    res = api.diff(extra, inputs=api.InputSpec(arrays={"x": X}), runtime_options=F32, **sides)
    y = next(r for r in res.results if r.pair.a.name == "y")
    assert y.metrics is not None and y.metrics.max_abs < 1e-5 and res.verdict()[0] == "pass"


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("fuse", [True, False])
def test_two_models_on_openvino(pair, swap, fuse):
    a, b = pair[::-1] if swap else pair
    res = api.diff(a, b, inputs=api.InputSpec(arrays={"x": X}), runtime="openvino", fuse=fuse,
                   runtime_options=F32)
    y = next(r for r in res.results if r.pair.a.name == "y")
    want = np.max(np.abs(_ref(a, X).astype(np.float64) - _ref(b, X).astype(np.float64)))
    assert want > 1e-3 and y.metrics.max_abs == pytest.approx(want, rel=1e-4, abs=1e-6)
    assert res.verdict()[0] == "fail"
    assert any("no node reads ('W_0__SHAPE'): fed zeros" in n for n in res.notes)
