"""`diff --grad --vs-torch` on a module with a frozen parameter (``requires_grad=False``: Whisper's
sinusoidal embed_positions.weight). The ONNX graph has no such flag: its backward graph differentiates every
weight, so onnxprobe's gradient of that initializer is compared with the gradient torch computes once the
flag is set (autograd's, the same formula), and the report says the parameter is frozen in torch (a training
loop would not update it): it was compared with no word (QA). Oracle: torch autograd on a copy of the module
with the flag set, and the module's own flags."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402


class Frozen(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pos = torch.nn.Embedding(6, 8)
        self.pos.weight.requires_grad_(False)
        self.lin = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.lin(x + self.pos.weight[: x.shape[1]])


def test_a_frozen_parameter_is_compared_and_said_to_be_frozen(tmp_path):
    torch.manual_seed(0)
    m, x = Frozen().eval(), torch.randn(2, 6, 8)
    path = tmp_path / "m.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=False, opset_version=17, input_names=["x"])
    res = api.diff_grad_torch(path, m, example_args=(x,))
    pair = next(r for r in res.results if r.pair.b.name == "pos.weight")
    assert "frozen" in pair.pair.reason and "requires_grad=False" in pair.pair.reason, pair.pair.reason
    assert any("pos.weight" in n and "requires_grad=False" in n for n in res.notes), res.notes
    assert res.grad.get("frozen") == ["pos.weight"]
    assert "lin.weight" not in "".join(res.notes)
    # the oracle: autograd with the flag set gives the gradient compared, and it agrees with onnxprobe's
    twin = copy.deepcopy(m)
    twin.pos.weight.requires_grad_(True)
    twin(x).sum().backward()
    got = res.b.runner.values([pair.pair.b.probe], res.feed)[pair.pair.b.probe]
    assert np.allclose(got, twin.pos.weight.grad.numpy(), atol=1e-6)
    assert pair.passed and res.verdict()[0] == "pass", res.verdict()
    assert not m.pos.weight.requires_grad and m.pos.weight.grad is None  # the module as it was
