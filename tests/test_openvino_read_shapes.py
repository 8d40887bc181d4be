"""A model OpenVINO reads neither with its dynamic input dimensions nor with them set to 1 (silero-vad: a
reflect Pad needs 2 samples): the error says both reads failed and, when onnxprobe set the dimensions,
how to give real ones. Skipped without the openvino extra."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import ExecutionError

pytest.importorskip("openvino")
pytestmark = pytest.mark.openvino
runner = CliRunner()


def _model(path) -> str:
    """x [1, 1, n] -> Squeeze (rank unknown while n is: Conv cannot be converted) -> Unsqueeze -> reflect
    Pad by 2 (needs n >= 3) -> Conv with a ones kernel of 3."""
    inits = [numpy_helper.from_array(np.ones((1, 1, 3), np.float32), "w"),
             numpy_helper.from_array(np.array([0, 0, 2, 0, 0, 2], np.int64), "pads"),
             numpy_helper.from_array(np.array([0, 1], np.int64), "ax")]
    nodes = [helper.make_node("Squeeze", ["x"], ["sq"], name="sq"), helper.make_node("Unsqueeze", ["sq", "ax"], ["x2"], name="unsq"),
             helper.make_node("Pad", ["x2", "pads"], ["p"], name="pad", mode="reflect"), helper.make_node("Conv", ["p", "w"], ["y"], name="conv")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "n"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return str(path)


def test_a_model_unreadable_with_dimensions_set_to_1_says_so_and_how_to_give_them(tmp_path):
    """It read "OpenVINO cannot read the model: Conversion is failed for: Conv-17" (the first read's
    message) with no --shape hint, and README's retry with the feeds' shapes seemed not to happen."""
    p = _model(tmp_path / "m.onnx")
    for args in (["diff", p, "--vs-runtime", "openvino", "--all"], ["layers", p, "--runtime", "openvino"]):
        r = runner.invoke(app, args)
        assert r.exit_code == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "nor with its inputs fixed to the feeds' shapes (x 1x1x1)" in r.stderr, r.stderr
        assert "--shape x=DIMS" in r.stderr, r.stderr
    with pytest.raises(ExecutionError, match="nor with its inputs fixed") as e:  # sizes given: no hint about them
        api.layers(p, runtime="openvino", inputs=api.InputSpec(shapes={"x": (1, 1, 1)}))
    assert "--shape" not in str(e.value)


def test_real_sizes_make_it_readable(tmp_path):
    p = _model(tmp_path / "m.onnx")
    x = np.random.default_rng(0).standard_normal((1, 1, 8)).astype(np.float32)
    res = api.diff(p, vs_runtime="openvino", inputs=api.InputSpec(arrays={"x": x}), runtime_options={"INFERENCE_PRECISION_HINT": "f32"})
    assert any("read with the inputs fixed to the shapes of the feeds" in n for n in res.notes), res.notes
    padded = np.pad(x[0, 0].astype(np.float64), 2, mode="reflect")
    want = padded[:-2] + padded[1:-1] + padded[2:]  # the oracle: a ones kernel of 3 over the reflect-padded row
    got = api.layers(p, runtime="openvino", inputs=api.InputSpec(arrays={"x": x}), runtime_options={"INFERENCE_PRECISION_HINT": "f32"}).stats["y"]
    assert (got.min, got.max, got.mean) == pytest.approx((want.min(), want.max(), want.mean()), rel=1e-5, abs=1e-6)
    assert res.verdict()[0] == "pass"
