"""diff --grad --vs-torch: a parameter forward() reads detached (``.detach()``, under ``torch.no_grad()``)
has no gradient in torch autograd, while the ONNX graph, which has no stop-gradient, gives it one. It was
compared with zeros and FAILed at that weight, an export error where there is none (the forward passes
agree); it is now left unpaired with the reason (cause gradient-stopped, as an op without a gradient rule on
A's side is), and the verdict says it could not be compared. Oracle: torch autograd here (norm_w.grad is
None), the forward passes agreeing."""

from __future__ import annotations


import pytest

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(6, 8)
        self.norm_w = torch.nn.Parameter(torch.rand(8) + 0.5)
        self.c = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.c(torch.relu(self.a(x)) * self.norm_w.detach())


@pytest.mark.parametrize("dynamo", [False, True])
def test_a_parameter_read_detached_is_not_compared_with_zeros(tmp_path, dynamo):
    if dynamo:
        pytest.importorskip("onnxscript")
    torch.manual_seed(0)
    m, x = Net().eval(), torch.randn(4, 6)
    path = tmp_path / "net.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=dynamo, input_names=["x"], **({} if dynamo else {"opset_version": 17}))
    m(x).sum().backward()
    assert m.norm_w.grad is None and m.a.weight.grad is not None
    m.zero_grad(set_to_none=True)
    assert api.diff_torch(path, (m, (x,))).verdict()[0] == "pass"
    res = api.diff_grad_torch(path, (m, (x,)))
    got = {r.pair.b.name: r for r in res.results}
    assert "norm_w" not in got, (got["norm_w"].pair.a.name, got["norm_w"].metrics)
    for p in ("a.weight", "a.bias", "c.weight", "c.bias"):
        assert got[p].passed is True, p
    stopped = [u for u in res.matching.unmatched_a if "norm_w" in u.reason]
    assert len(stopped) == 1 and stopped[0].cause == "gradient-stopped", [(u.obs.name, u.reason) for u in res.matching.unmatched_a]
    assert "no gradient" in stopped[0].reason and "detach" in stopped[0].reason, stopped[0].reason
    verdict, why = res.verdict()
    assert verdict == "error" and "norm_w" in why, (verdict, why)
