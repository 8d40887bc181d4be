"""diff --grad --vs-torch: one-element parameters (nn.PReLU()'s single slope, a learnable temperature) are
parameters to torch, whatever onnxprobe's 'a one-element constant is a constant of the formula' rule says
of anonymous ONNX constants: the initializer holding one (as it is, or dynamo's PReLU [1, 1]) is compared
with torch's gradient of it. They were unmatched with 'the loss does not depend on it', and the verdict
read 'weight gradients pass' with them compared by nobody. Oracle: torch autograd here."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(3, 4)
        self.act = torch.nn.PReLU()
        self.temp = torch.nn.Parameter(torch.tensor(1.7))

    def forward(self, x):
        return self.act(self.a(x)) / self.temp


@pytest.mark.parametrize("dynamo", [False, True])
def test_one_element_parameters_are_compared(tmp_path, dynamo):
    if dynamo:
        pytest.importorskip("onnxscript")
    torch.manual_seed(0)
    m, x = Net().eval(), torch.randn(2, 3)
    path = tmp_path / "net.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=dynamo, input_names=["x"], **({} if dynamo else {"opset_version": 17}))
    res = api.diff_grad_torch(path, (m, (x,)))
    got = {r.pair.b.name: r for r in res.results}
    m.zero_grad()
    m(x).sum().backward()
    for p in ("act.weight", "temp"):
        assert p in got, (p, sorted(got), [(u.obs.name, u.reason) for u in res.matching.unmatched_b])
        assert got[p].passed is True, (p, got[p].metrics)
        assert abs(dict(m.named_parameters())[p].grad.item()) > 1e-3  # the loss does depend on it
    assert res.verdict()[0] == "pass", res.verdict()
