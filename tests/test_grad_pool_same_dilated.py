"""A pool of auto_pad SAME_* with dilations: onnxruntime pads it as if undilated (1x2x4 out of 6 where the spec and
shape inference say 1x2x6), so AveragePool's gradient (the spec's windows) put its weight on the wrong columns,
silently, and MaxPool's backward graph failed inside onnxruntime. Both are refused in one line, naming the node and
why; the same pool with explicit pads keeps its gradient (torch autograd, float64, the oracle)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnxprobe import api
from onnxprobe.errors import RuleRefused

torch = pytest.importorskip("torch")
X = np.random.default_rng(0).standard_normal((1, 2, 6)).astype(np.float32)


def _pool(path, op, **attrs) -> str:
    g = h.make_graph([h.make_node(op, ["x"], ["y"], kernel_shape=[3], strides=[1], dilations=[2], **attrs)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, 2, 6])], [h.make_tensor_value_info("y", T.FLOAT, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 19)])
    m.ir_version = 9
    onnx.save(m, path)
    return str(path)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("auto", ["SAME_LOWER", "SAME_UPPER"])
def test_a_dilated_same_pool_is_refused_in_one_line(tmp_path, op, auto):
    m = _pool(tmp_path / "m.onnx", op, auto_pad=auto)
    with pytest.raises(RuleRefused) as e:
        api.grad(m, api.Selection(all=True), api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays={"x": X}))
    msg = str(e.value)
    assert op in msg and f"auto_pad={auto}" in msg and "dilations [2]" in msg and "\n" not in msg


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_a_dilated_pool_with_explicit_pads_keeps_its_gradient(tmp_path, op):
    m = _pool(tmp_path / "m.onnx", op, pads=[2, 2])
    res = api.grad(m, api.Selection(all=True), api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays={"x": X}), save=True)
    xt = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    if op == "MaxPool":
        win = torch.nn.functional.pad(xt, (2, 2), value=float("-inf")).unfold(2, 5, 1)[..., ::2]  # k 3, dilation 2
        y = win.max(-1).values
    else:  # count_include_pad=0, onnx's default: the mean over the window's inputs alone
        ones = torch.nn.functional.pad(torch.ones_like(xt), (2, 2))
        win = torch.nn.functional.pad(xt, (2, 2)).unfold(2, 5, 1)[..., ::2]
        y = win.sum(-1) / ones.unfold(2, 5, 1)[..., ::2].sum(-1)
    y.sum().backward()
    np.testing.assert_allclose(res.arrays["x"], xt.grad.numpy(), rtol=1e-5, atol=1e-6)
