"""At a kink the rules pick torch's one-sided value (rules/elementwise.py), checked where the input sits
exactly on the kink, against torch.autograd (in a worker process, tests/test_autodiff_torchref.py) and
against the numbers torch 2.13 gives: HardSwish's gradient is 0 at x = -3 and dy at x = 3 (the flat and
the identity pieces); the middle piece, dy (x / 3 + 1/2), holds only strictly inside (-3, 3) (it was taken
on [-3, 3]: -dy / 2 and 3 dy / 2 there). Values on a grid (a quantized model's) can sit exactly on +-3."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from conftest import make_model
from onnxprobe import api
from test_autodiff_torchref import in_worker

X = np.array([[-4.0, -3.0, -1.5, 0.0, 1.5, 3.0, 4.5]], np.float32)
DY = np.array([[0.7, -1.3, 0.4, 2.0, -0.6, 1.1, 0.9]], np.float32)


def _model(tmp_path, op: str, **attrs):
    m = make_model([helper.make_node(op, ["x"], ["y"], **attrs)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(X.shape))],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(X.shape))], opset=17)
    path = tmp_path / f"{op}.onnx"
    onnx.save(m, path)
    return m, path


def _grad(path):
    spec = api.GradSpec(loss="output-grad", output_grad=DY, wrt=("x",))
    return api.grad(path, None, api.RunConfig(device="cpu"), spec, inputs={"x": X}, save=True).arrays["x"]


def test_hardswish_at_its_kinks_is_torchs():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        m, path = _model(Path(d), "HardSwish")
        got = _grad(path)
    want = DY * np.array([[0.0, 0.0, 0.0, 0.5, 1.0, 1.0, 1.0]])  # slope 0 | x / 3 + 1/2 | 1
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    tg = in_worker([{"kind": "grads", "model": m.SerializeToString(), "feeds": {"x": X.astype(np.float64)},
                     "wrt": {"x": X.astype(np.float64)}, "outputs": [("y", DY.astype(np.float64))]}])[0]
    np.testing.assert_allclose(got, tg["x"], rtol=1e-6, atol=1e-7)


def test_clip_from_0_at_0_is_relu6s_and_elsewhere_on_a_bound_clamps(tmp_path):
    """Both exporters write nn.ReLU6 as Clip(x, 0, 6): at 0 torch's relu6 (as Relu) gives no gradient; the rule gave
    dy (torch.clamp's convention) and a fresh MobileNet, whose ReLU6 reads exact zeros, FAILed diff --grad
    --vs-torch. A value on any other bound keeps clamp's dy (a parameter clamp_()ed in forward() sits on its bound).
    Oracle: torch autograd in float64 (relu6 at 0, clamp at the other bounds); the bounds' gradients sum what x
    does not take (dlo + dhi + sum(dx) = sum(dy))."""
    import pytest

    torch = pytest.importorskip("torch")
    for lo, hi in ((0.0, 6.0), (-1.0, 1.0), (0.5, 2.0)):
        xs = np.array([[lo - 1, lo, (lo + hi) / 2, hi, hi + 1, lo, hi]], np.float32)
        bounds = [onnx.numpy_helper.from_array(np.array(v, np.float32), n) for v, n in ((lo, "lo"), (hi, "hi"))]
        m = make_model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xs.shape))],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(xs.shape))], bounds, opset=17)
        p = tmp_path / f"clip_{lo}.onnx"
        onnx.save(m, p)
        spec = api.GradSpec(loss="output-grad", output_grad=DY, wrt=("x", "lo", "hi"))
        got = api.grad(p, None, api.RunConfig(device="cpu"), spec, inputs={"x": xs}, save=True).arrays
        t = torch.tensor(xs.astype(np.float64), requires_grad=True)
        y = torch.nn.functional.relu6(t) if lo == 0 else torch.clamp(t, lo, hi)
        (y * torch.tensor(DY.astype(np.float64))).sum().backward()
        np.testing.assert_allclose(got["x"], t.grad.numpy(), rtol=1e-6, atol=0, err_msg=str((lo, hi)))
        assert float(got["lo"] + got["hi"] + got["x"].sum()) == pytest.approx(float(DY.sum()), rel=1e-6)
