"""diff --grad --vs-torch where forward() cuts torch's gradient on a value that is not a parameter.

``.detach()`` of an input or of a layer's output (``fc(x.detach())``, ``fc2(fc1(x).detach())``): the ONNX
graph has no stop-gradient, so it differentiates through it, torch autograd does not. x's gradient FAILed at
0 dB, and fc1's parameters (with gradient only through the detach) were "not compared: forward() reads it
detached", which it does not. torch's gradients are now taken through those .detach() calls (a second pass),
as the ONNX graph computes them, while a detached value turned into numpy still gets a detached tensor.

A differentiable value turned into a Python number (``k = float(y.max())``, ``.item()``) and used again:
torch autograd takes k as a constant; the legacy exporter bakes it in as one, the dynamo exporter keeps its
computation in the graph and differentiates through it. fc's gradients and x's FAILed at the dynamo export
(a note even said the gradients were taken through the cut). What lies upstream of such a number is now
not compared, with the reason. Oracle: torch autograd on the same module written without the cut.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402


class OnInput(torch.nn.Module):
    def __init__(self, cut: bool = True):
        super().__init__()
        self.fc, self.g, self.cut = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3), cut

    def forward(self, x):
        self.seen = x.detach().numpy().shape  # numpy of a detached value: no gradient needed there
        return self.fc(x.detach() if self.cut else x) * self.g(x)


class OnLayer(torch.nn.Module):
    def __init__(self, cut: bool = True):
        super().__init__()
        self.fc1, self.fc2, self.cut = torch.nn.Linear(4, 3), torch.nn.Linear(3, 2), cut

    def forward(self, x):
        h = torch.tanh(self.fc1(x))
        return self.fc2(h.detach() if self.cut else h) * h[:, :2]


class OnlyThroughTheCut(OnLayer):  # fc1's parameters have no torch gradient but through the .detach()
    def forward(self, x):
        h = torch.tanh(self.fc1(x))
        return self.fc2(h.detach() if self.cut else h)


def _export(m, x, path, dynamo):
    if dynamo:
        pytest.importorskip("onnxscript")
    torch.onnx.export(m, (x,), str(path), dynamo=dynamo, input_names=["x"], **({} if dynamo else {"opset_version": 17}))


def _grads(m, x) -> dict:
    x = x.clone().requires_grad_(True)
    m.zero_grad(set_to_none=True)
    m(x).sum().backward()
    out = {n: p.grad.numpy().copy() for n, p in m.named_parameters()}
    out["input:0"] = x.grad.numpy().copy()
    m.zero_grad(set_to_none=True)
    return out


@pytest.mark.parametrize("cls", [OnInput, OnLayer, OnlyThroughTheCut])
@pytest.mark.parametrize("dynamo", [False, True])
def test_a_detached_value_is_differentiated_through_as_the_onnx_graph_does(tmp_path, dynamo, cls):
    torch.manual_seed(0)
    m, x = cls().eval(), torch.randn(5, 4)
    path = tmp_path / "net.onnx"
    _export(m, x, path, dynamo)
    plain = cls(cut=False).eval()
    plain.load_state_dict(m.state_dict())
    every = _grads(plain, x)
    res = api.diff_grad_torch(path, (m, (x,)))
    assert torch.Tensor.detach(x).requires_grad is False
    assert all(p.grad is None and p.requires_grad for p in m.parameters())
    got = {r.pair.b.name: r for r in res.results}
    assert got["input[0]"].passed is True, got["input[0]"].metrics
    for p in (n for n, _ in m.named_parameters()):
        assert got[p].passed is True, (p, [(u.obs.name, u.reason) for u in res.matching.unmatched_a])
    assert res.verdict()[0] == "pass", res.verdict()
    assert any(".detach()" in n and "through" in n for n in res.notes), res.notes
    side = res.b.runner.values(["input:0"] + [f"param:{n}" for n in every if n != "input:0"], {"x": x.numpy()})
    for k, v in every.items():  # torch's gradient is the one without the cut (the oracle)
        np.testing.assert_allclose(side[k if k == "input:0" else f"param:{k}"], v, rtol=1e-5, atol=1e-6)


class ToNumber(torch.nn.Module):
    def __init__(self, how: str = "float"):
        super().__init__()
        self.fc, self.head, self.how = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3), how

    def forward(self, x):
        y = self.fc(x)
        if self.how == "no_grad":
            with torch.no_grad():
                k = float(y.abs().max())
        else:
            k = float(y.max()) if self.how == "float" else y.abs().max().item()
        return y * k + self.head(x)


@pytest.mark.parametrize("how", ["float", "item", "no_grad"])
@pytest.mark.parametrize("dynamo", [False, True])
def test_what_a_python_number_is_computed_from_is_not_compared(tmp_path, dynamo, how):
    torch.manual_seed(0)
    m, x = ToNumber(how).eval(), torch.randn(5, 4)
    path = tmp_path / "net.onnx"
    _export(m, x, path, dynamo)
    res = api.diff_grad_torch(path, (m, (x,)))
    got = {r.pair.b.name: r for r in res.results}
    for p in ("head.weight", "head.bias"):  # not upstream of k: compared, and right
        assert got[p].passed is True, p
    for p in ("fc.weight", "fc.bias", "input[0]", "fc"):  # upstream of k: another function on either side
        assert p not in got or got[p].passed is None, (p, got[p].metrics)
    reasons = {u.obs.name: u.reason for u in res.matching.unmatched_a}
    stopped = [r for r in reasons.values() if "Python number" in r]
    assert len(stopped) >= 4, reasons  # fc.weight, fc.bias, x, fc's output
    assert all("not compared" in r for r in stopped), stopped
    verdict, why = res.verdict()
    assert verdict == "error" and "fc.weight" in why, (verdict, why)
    assert any("Python number" in n for n in res.notes), res.notes


class Logs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        y = self.fc(x)
        self.peak = float(y.max())  # kept for a log: the output does not depend on it
        return torch.tanh(y)


@pytest.mark.parametrize("dynamo", [False, True])
def test_a_python_number_forward_does_not_compute_on_leaves_the_gradients_compared(tmp_path, dynamo):
    torch.manual_seed(0)
    m, x = Logs().eval(), torch.randn(5, 4)
    path = tmp_path / "net.onnx"
    _export(m, x, path, dynamo)
    res = api.diff_grad_torch(path, (m, (x,)))
    got = {r.pair.b.name: r for r in res.results}
    for p in ("fc.weight", "fc.bias", "input[0]"):
        assert got[p].passed is True, p
    assert res.verdict()[0] == "pass", res.verdict()
