"""diff --grad --vs-torch: a parameter forward() reads both detached and not (``self.fc.bias.detach()`` in one
place, ``self.fc(x)`` in another). torch autograd's gradient is of the undetached read only; the ONNX graph,
which has no stop-gradient, sums its initializer's gradient over every reader. The two were compared and the
export of a correct model FAILed at that weight (fc.bias at -12.8 dB, both exporters). torch's gradient of
such a parameter is now taken through every read (a second backward pass with those .detach() calls kept in
the graph), the function the ONNX graph differentiates, with a note; the other gradients are unchanged and a
parameter read only detached stays 'not compared' (test_torch_grad_detached_params.py). Oracle: torch
autograd on the same module written without the .detach()."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self, detach: bool = True, weight: bool = False):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.head = torch.nn.Linear(3, 2)
        self.detach, self.weight = detach, weight

    def forward(self, x):
        cut = (lambda t: t.detach()) if self.detach else (lambda t: t)
        if self.weight:  # the weight read again (a view of it detached)
            h = torch.relu(self.fc(x)) * torch.nn.functional.linear(x, cut(self.fc.weight))
        else:
            h = torch.relu(self.fc(x)) + x[:, :3] * cut(self.fc.bias)
        return self.head(h)


def _grads(m, x) -> dict:
    m.zero_grad(set_to_none=True)
    m(x).sum().backward()
    out = {n: p.grad.numpy().copy() for n, p in m.named_parameters()}
    m.zero_grad(set_to_none=True)
    return out


@pytest.mark.parametrize("weight", [False, True])
@pytest.mark.parametrize("dynamo", [False, True])
def test_a_parameter_read_detached_and_not_is_compared_through_every_read(tmp_path, dynamo, weight):
    if dynamo:
        pytest.importorskip("onnxscript")
    torch.manual_seed(0)
    m, x = Net(weight=weight).eval(), torch.randn(5, 4)
    name = "fc.weight" if weight else "fc.bias"
    path = tmp_path / "net.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=dynamo, input_names=["x"], **({} if dynamo else {"opset_version": 17}))
    plain = Net(detach=False, weight=weight).eval()
    plain.load_state_dict(m.state_dict())
    cut, every = _grads(m, x), _grads(plain, x)
    assert not np.allclose(cut[name], every[name], rtol=1e-3, atol=1e-4)  # else the test would prove nothing
    detach = torch.Tensor.detach
    res = api.diff_grad_torch(path, (m, (x,)))
    assert torch.Tensor.detach is detach  # the watch is undone
    assert all(p.grad is None and p.requires_grad for p in m.parameters())  # the module as it was
    got = {r.pair.b.name: r for r in res.results}
    if name in got:
        assert got[name].passed is True, got[name].metrics
    else:  # legacy stores the detached read's transposed copy apart: two initializers hold it, said so (README)
        held = [u.reason for u in res.matching.unmatched_b if "held by 2 initializers" in u.reason]
        assert weight and not dynamo and held, [u.reason for u in res.matching.unmatched_b]
        # one parameter stored as it is (Gemm) and transposed (the detached read's MatMul), not a tied weight
        assert "transposed" in held[0] and "tied" not in held[0], held[0]
    for p in ("fc.weight", "fc.bias", "head.weight", "head.bias"):
        if p in got:
            assert got[p].passed is True, p
    assert res.verdict()[0] == "pass", res.verdict()
    assert any("both detached" in n and name in n for n in res.notes), res.notes
    # the gradient torch gave is the one through every read (the oracle), not the cut one
    torch_side = res.b.runner.values([f"param:{name}"], {"x": x.numpy()})[f"param:{name}"]
    np.testing.assert_allclose(torch_side, every[name], rtol=1e-5, atol=1e-6)
