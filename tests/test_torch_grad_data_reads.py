"""diff --grad --vs-torch of a forward() that reads a parameter or a value through ``.data``.

``.data`` cuts torch's gradient as ``.detach()`` does. torch's legacy exporter writes what it reads as a
Constant (the traced values), so the ONNX graph has that cut too: the gradients agree and the verdict is
an earned pass; the oracle is torch autograd of the graph's function written out by hand, the constant a
constant. A model whose graph reads the parameter itself there (exported from the module without the cut)
gets no torch gradient for a parameter read only through ``.data``: not compared, and the reason said
"(.detach(), torch.no_grad())", not the ``.data`` forward() reads it through.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from onnxprobe import api  # noqa: E402


class Both(torch.nn.Module):  # the weight read through .data and with gradient
    def __init__(self, cut: bool = True):
        super().__init__()
        self.fc, self.cut = torch.nn.Linear(4, 3), cut

    def forward(self, x):
        return F.linear(x, self.fc.weight.data if self.cut else self.fc.weight) * self.fc(x)


class Only(torch.nn.Module):  # the weight read through .data alone
    def __init__(self, cut: bool = True):
        super().__init__()
        self.fc, self.cut = torch.nn.Linear(4, 3), cut

    def forward(self, x):
        return F.linear(x, self.fc.weight.data if self.cut else self.fc.weight, self.fc.bias)


class OnInput(torch.nn.Module):  # an input read through .data
    def __init__(self, cut: bool = True):
        super().__init__()
        self.fc, self.g, self.cut = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3), cut

    def forward(self, x):
        return self.fc(x.data if self.cut else x) * self.g(x)


def _oracle(cls, m, x) -> dict:
    """torch autograd of the function the legacy export computes: what .data read is a constant there."""
    w, b = (m.fc.weight.detach().clone().requires_grad_(True), m.fc.bias.detach().clone().requires_grad_(True))
    xv = x.clone().requires_grad_(True)
    const_w, const_x = m.fc.weight.detach().clone(), x.detach().clone()
    if cls is Both:
        y = (xv @ const_w.T) * (xv @ w.T + b)
    elif cls is Only:
        y = xv @ const_w.T + b
    else:
        g = m.g
        y = (const_x @ w.T + b) * (xv @ g.weight.detach().T + g.bias.detach())
    y.sum().backward()
    out = {"input[0]": xv.grad.numpy(), "fc.bias": b.grad.numpy()}
    if cls is Both:
        out["fc.weight"] = w.grad.numpy()
    elif cls is OnInput:
        out["fc.weight"] = w.grad.numpy()
    return out


@pytest.mark.parametrize("cls", [Both, Only, OnInput])
def test_data_reads_exported_as_constants_earn_a_pass(tmp_path, cls):
    torch.manual_seed(0)
    m, x = cls().eval(), torch.randn(5, 4)
    path = tmp_path / "net.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=False, input_names=["x"], opset_version=17)
    res = api.diff_grad_torch(path, (m, (x,)))
    assert res.verdict()[0] == "pass", res.verdict()
    got = {r.pair.b.name: r for r in res.results}
    for name, want in _oracle(cls, m, x).items():
        r = got[name]
        assert r.passed is True, name
        a = res.a.runner.values([r.pair.a.probe], {"x": x.numpy()})[r.pair.a.probe]
        np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-6, err_msg=name)
    if cls is Only:  # no gradient on either side: never compared, listed with why
        assert "fc.weight" not in got
        assert any(u.obs.name == "fc.weight" for u in res.matching.unmatched_b)


def test_a_parameter_read_only_through_data_is_not_compared_and_says_so(tmp_path):
    pytest.importorskip("onnxscript")
    torch.manual_seed(0)
    m, x = Only().eval(), torch.randn(5, 4)
    plain = Only(cut=False).eval()
    plain.load_state_dict(m.state_dict())
    path = tmp_path / "net.onnx"
    torch.onnx.export(plain, (x,), str(path), dynamo=True, input_names=["x"])  # the graph reads fc.weight
    res = api.diff_grad_torch(path, (m, (x,)))
    reasons = {u.obs.name: u.reason for u in res.matching.unmatched_a}
    assert ".data" in reasons["fc.weight_grad"], reasons
    verdict, why = res.verdict()
    assert verdict == "error" and "fc.weight_grad" in why and ".data" in why, (verdict, why)
    got = {r.pair.b.name: r for r in res.results}
    assert got["fc.bias"].passed is True and got["input[0]"].passed is True
