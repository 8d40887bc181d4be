"""api.diff_grad_torch runs torch autograd on the user's own module: the gradients it had accumulated
(a training loop between two steps, gradient accumulation) are the user's, and are left as they were.
They were set to None, and a frozen parameter's requires_grad=False kept, but its .grad too."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)
        self.b.bias.requires_grad_(False)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


def test_the_modules_accumulated_gradients_are_left_as_they_were(tmp_path):
    torch.manual_seed(0)
    m, x = Net().eval(), torch.randn(5, 3)
    path = tmp_path / "net.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=False, opset_version=17, input_names=["x"])
    (m(x) ** 2).sum().backward()
    before = {n: None if p.grad is None else p.grad.clone() for n, p in m.named_parameters()}
    assert before["a.weight"] is not None and before["b.bias"] is None
    res = api.diff_grad_torch(path, (m, (x,)))
    assert res.verdict()[0] == "pass", res.verdict()
    for n, p in m.named_parameters():
        if before[n] is None:
            assert p.grad is None, n
        else:
            assert p.grad is not None and torch.equal(p.grad, before[n]), n
    assert not m.b.bias.requires_grad and m.a.weight.requires_grad


class Raises(Net):
    """Runs for the forward comparison (no autograd), raises in the gradient pass."""

    def forward(self, x):
        if torch.is_grad_enabled():
            raise RuntimeError("boom")
        return super().forward(x)


def test_a_forward_that_raises_leaves_the_module_as_it_was(tmp_path):
    torch.manual_seed(0)
    m, x = Net().eval(), torch.randn(5, 3)
    path = tmp_path / "net.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=False, opset_version=17, input_names=["x"])
    r = Raises()
    r.load_state_dict(m.state_dict())
    r.b.bias.requires_grad_(False)
    from onnxprobe.errors import OnnxProbeError
    with pytest.raises(OnnxProbeError, match="boom"):
        api.diff_grad_torch(path, (r, (x,)))
    assert not r.b.bias.requires_grad and all(p.grad is None for p in r.parameters())
