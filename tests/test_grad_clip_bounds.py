"""Clip's min / max inputs get a gradient, as torch.clamp's tensor bounds do (a learnable clamp, PACT's
alpha: torch.clamp(h, min=lo, max=hi) with nn.Parameters, which both exporters write as Clip(h, lo, hi)).
They had none "by design", and diff --grad --vs-torch passed with the two parameters unmatched as "the
loss does not depend on it". dlo = sum of dy where x < lo (< hi), dhi = sum of dy where x > hi or hi < lo
(torch's clamp_backward_min_max). Oracle: central differences of L = sum(dy * clip(x, lo, hi)) in numpy
float64 (L is linear in each bound between kinks; the inputs stay away from them)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model

RNG = np.random.default_rng(3)


def _loss(x, lo, hi, dy):
    return float(np.sum(dy * np.minimum(np.maximum(x, lo), hi)))


@pytest.mark.parametrize("lo,hi", [(-0.3, 0.5), (0.4, -0.2), (None, 0.5), (-0.3, None)])
def test_clip_bounds_get_the_gradient_of_finite_differences(tmp_path, lo, hi):
    from onnxprobe import api

    x = RNG.standard_normal((3, 5)).astype(np.float32)
    x[np.abs(x - (lo or 0)) < 0.05] += 0.1  # away from the kinks
    x[np.abs(x - (hi or 0)) < 0.05] += 0.1
    dy = RNG.standard_normal((3, 5)).astype(np.float32)
    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("lo", lo), ("hi", hi)) if v is not None]
    ins = ["x", "lo" if lo is not None else "", "hi" if hi is not None else ""]
    m = make_model([helper.make_node("Clip", ins, ["y"], name="clip")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5])], inits)
    onnx.save(m, tmp_path / "m.onnx")
    wrt = tuple(n for n, v in (("lo", lo), ("hi", hi)) if v is not None)
    res = api.grad(tmp_path / "m.onnx", spec=api.GradSpec(output_grad=dy, wrt=wrt), inputs={"x": x}, save=True)
    x64, dy64, h = x.astype(np.float64), dy.astype(np.float64), 1e-4
    big = np.inf
    for name, v in (("lo", lo), ("hi", hi)):
        if v is None:
            continue
        at = {"lo": lo if lo is not None else -big, "hi": hi if hi is not None else big}
        up, down = dict(at), dict(at)
        up[name], down[name] = v + h, v - h
        want = (_loss(x64, up["lo"], up["hi"], dy64) - _loss(x64, down["lo"], down["hi"], dy64)) / (2 * h)
        assert name in res.arrays, (name, res.notes)
        assert np.shape(res.arrays[name]) == ()
        np.testing.assert_allclose(float(res.arrays[name]), want, rtol=1e-5, atol=1e-5)
