"""diff --grad --vs-torch: forward() computes on values that carry a gradient with gradient off
(``with torch.no_grad(): s = x[:, :3] * self.fc.bias``; ``torch.set_grad_enabled(False)``, a ``@torch.no_grad()``
helper, ``torch.inference_mode()``). torch autograd's gradient leaves those reads out; the ONNX graph, which has
no stop-gradient, differentiates through them. The two were compared and the export of a correct model FAILed
(fc.bias -12.8 dB and the input's gradient -6.3 dB, both exporters). torch's gradients are now taken with
gradient left on where forward() turned it off (a second pass), the function the ONNX graph differentiates,
with a note; writes into the module's state made there still run with gradient off and are put back before
that pass (not made twice). Oracle: torch autograd on the same module written without the gradient-off region.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402


@torch.no_grad()
def _scaled(x, b):
    return x[:, :3] * b


class Net(torch.nn.Module):
    def __init__(self, kind: str = "no_grad", write: bool = False):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.head = torch.nn.Linear(3, 2)
        self.scale = torch.nn.Parameter(torch.tensor([0.3, 1.5, 2.0]))
        self.register_buffer("calls", torch.zeros(()))
        self.kind, self.write = kind, write

    def forward(self, x):
        y = torch.relu(self.fc(x))
        if self.write:  # an update of the module's state made with gradient off, as a forward may do
            with torch.no_grad():
                self.calls += 1
                self.scale.clamp_(min=0.5)
        if self.kind == "no_grad":
            with torch.no_grad():
                s = x[:, :3] * self.fc.bias
        elif self.kind == "set_grad_enabled":
            with torch.set_grad_enabled(False):
                s = x[:, :3] * self.fc.bias
        elif self.kind == "decorator":
            s = _scaled(x, self.fc.bias)
        elif self.kind == "inference_mode":
            with torch.inference_mode():
                s = x[:, :3] * self.fc.bias
            s = s.clone()
        else:  # the oracle: the same function, every read with gradient
            s = x[:, :3] * self.fc.bias
        return self.head((y + s) * self.scale)


def _grads(m, x) -> dict:
    m.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_(True)
    m(x).sum().backward()
    out = {n: p.grad.numpy().copy() for n, p in m.named_parameters() if p.grad is not None}
    out["input[0]"] = x.grad.numpy().copy()
    m.zero_grad(set_to_none=True)
    return out


@pytest.mark.parametrize("kind,dynamo,write", [("no_grad", False, False), ("no_grad", True, False),
                                               ("set_grad_enabled", False, False), ("decorator", False, False),
                                               ("inference_mode", False, False), ("no_grad", False, True)])
def test_values_read_with_gradient_off_are_differentiated_through(tmp_path, kind, dynamo, write):
    if dynamo:
        pytest.importorskip("onnxscript")
    torch.manual_seed(0)
    m, x = Net(kind, write).eval(), torch.randn(5, 4)
    path = tmp_path / "net.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=dynamo, input_names=["x"], **({} if dynamo else {"opset_version": 17}))
    plain = Net("plain").eval()
    plain.load_state_dict(m.state_dict())
    cut, every = _grads(m, x), _grads(plain, x)
    for k in ("fc.bias", "input[0]"):  # else the test would prove nothing
        assert not np.allclose(cut[k], every[k], rtol=1e-3, atol=1e-4), k
    calls = float(m.calls)
    enter = torch.autograd.grad_mode.inference_mode.__enter__
    res = api.diff_grad_torch(path, (m, (x,)))
    assert torch.is_grad_enabled() and torch.autograd.grad_mode.inference_mode.__enter__ is enter  # all undone
    assert all(p.grad is None and p.requires_grad and p.is_leaf for p in m.parameters())  # the module as it was
    assert m.calls.grad_fn is None and not m.calls.requires_grad
    if write:  # every pass started from the state the module was handed over in, which it is left in, with a note
        assert float(m.calls) == calls and torch.equal(m.scale, plain.scale), (float(m.calls), calls)
        assert any("forward() changes the module's state (calls)" in n for n in res.notes), res.notes
    got = {r.pair.b.name: r for r in res.results}
    for k in ("fc.weight", "fc.bias", "scale", "head.weight", "head.bias", "input[0]"):
        assert k in got and got[k].passed is True, (k, got.get(k) and got[k].metrics, [u.reason for u in res.matching.unmatched_a])
    assert res.verdict()[0] == "pass", res.verdict()
    assert any("gradient off" in n and "fc.bias" in n for n in res.notes), res.notes
    # the gradients torch gave are those through every read (the oracle), not the cut ones
    side = res.b.runner.values(["param:fc.bias", "input:0"], {"x": x.numpy()})
    np.testing.assert_allclose(side["param:fc.bias"], every["fc.bias"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(side["input:0"], every["input[0]"], rtol=1e-5, atol=1e-6)
