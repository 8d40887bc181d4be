"""``grad --check`` of a LayerNormalization whose Mean output a later node reads: the float64 copy wrote the
normalisation out with the Mean output's name for the mean Y subtracts, so perturbing Mean (what reads it) moved Y too,
and finite differences measured another function: a right dL/dMean (sum of dy over the normalised axis) FAILed; outputs
named as the expansion's inner tensors ('mean', 'var') gave two nodes of one name (the check fell back to float32). The
oracle: torch autograd in float64 on the same computation, and the check passing every gradient."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from onnxprobe import api

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("with_bias", [False, True])
def test_a_read_layernorm_mean_passes_the_check(tmp_path, with_bias):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    s, b = rng.standard_normal(5).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    dy = rng.standard_normal((3, 5)).astype(np.float32)
    inits = [nh.from_array(s, "s")] + ([nh.from_array(b, "b")] if with_bias else [])
    g = h.make_graph([h.make_node("LayerNormalization", ["x", "s"] + (["b"] if with_bias else []), ["y0", "mean", "var"], axis=-1),
                      h.make_node("Mul", ["mean", "var"], ["m2"]), h.make_node("Add", ["y0", "m2"], ["y"])],
                     "g", [h.make_tensor_value_info("x", T.FLOAT, [3, 5])], [h.make_tensor_value_info("y", T.FLOAT, [3, 5])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "m.onnx")
    res = api.grad(str(tmp_path / "m.onnx"), api.Selection(all=True), api.RunConfig(device="cpu"),
                   api.GradSpec(output_grad=dy), api.InputSpec(arrays={"x": x}), save=True, check=True)
    # the oracle: torch float64, the same computation
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    mu = xt.mean(-1, keepdim=True)
    mu.retain_grad()
    var = ((xt - mu) ** 2).mean(-1, keepdim=True)
    isd = 1 / torch.sqrt(var + 1e-5)
    isd.retain_grad()
    y0 = (xt - mu) * isd * torch.tensor(s, dtype=torch.float64) + (torch.tensor(b, dtype=torch.float64) if with_bias else 0)
    (y0 + mu * isd).backward(torch.tensor(dy, dtype=torch.float64))
    np.testing.assert_allclose(res.arrays["x"], xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    checked = {r.name: r.check for r in res.rows if r.check is not None}
    assert "mean" in checked and "var" in checked  # (named as the expansion's own tensors: no two nodes of one name)
    assert res.check_mode == "float64"
    assert all(c["ok"] for c in checked.values()), checked
    assert res.checked >= 3
