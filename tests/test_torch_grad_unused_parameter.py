"""diff --grad --vs-torch where one initializer holds two equal parameters (an exporter merges equal-valued
tensors: BERT's zero biases) and one of them feeds only an output the loss does not read (BERT's pooler under a
loss of last_hidden_state). torch autograd leaves that parameter's .grad None: its gradient is 0, the loss does
not depend on it. It was taken for a parameter forward() reads detached, and the merged weight went uncompared
(the verdict an error on the tiny BERT, both exporters). Oracle: torch autograd of the loss, by hand."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402


class Two(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)
        with torch.no_grad():
            self.fc1.bias.fill_(0.5)
            self.fc2.bias.fill_(0.5)

    def forward(self, x):
        return torch.tanh(self.fc1(x)), self.fc2(x)


def test_a_merged_parameter_the_loss_does_not_read_has_a_zero_gradient(tmp_path):
    torch.manual_seed(0)
    m, x = Two().eval(), torch.rand(2, 4)
    path = tmp_path / "two.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=False, opset_version=17, input_names=["x"], output_names=["y", "z"])
    model = onnx.load(str(path))  # the equal biases in one initializer (the legacy exporter merges them itself)
    if any(i.name == "fc2.bias" for i in model.graph.initializer):
        for n in model.graph.node:
            n.input[:] = ["fc1.bias" if i == "fc2.bias" else i for i in n.input]
        model.graph.initializer.remove(next(i for i in model.graph.initializer if i.name == "fc2.bias"))
        onnx.save(model, str(path))
    res = api.diff_grad_torch(path, (m, (x,)), api.GradSpec(output="y"))
    assert res.verdict()[0] == "pass", res.verdict()
    (bias,) = [r for r in res.results if r.pair.a.name == "fc1.bias_grad"]
    y = torch.tanh(x @ m.fc1.weight.detach().T + m.fc1.bias.detach())
    want = (1 - y * y).sum(0).numpy()  # d sum(y) / d fc1.bias; fc2.bias adds 0
    assert bias.passed and "fc2.bias" in bias.pair.b.name, bias.pair.b.name
    np.testing.assert_allclose(bias.metrics.b_absmax, np.abs(want).max(), rtol=1e-5)
