"""`diff --vs-torch` of a float16 export measures the model output's row on a plain run of the export, as `diff`
does (README, Runtimes): onnxruntime's CPU provider rounds a probed float16 tensor to float16 where it is a graph
output, and keeps float32 between ops where it is not, so probing the module outputs changed the output itself
(max|a-b| 3.36e-4 where the export as it is gives 3.05e-4), with no note. The oracle: a plain onnxruntime session of
the file against torch's float16 forward, in numpy float64."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.act, self.ln = torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32)
        self.fc2, self.act2, self.ln2 = torch.nn.Linear(32, 32), torch.nn.GELU(approximate="tanh"), torch.nn.LayerNorm(32)
        self.fc3, self.out = torch.nn.Linear(32, 32), torch.nn.Linear(32, 4)
        self.register_buffer("scale", torch.tensor(0.5))

    def forward(self, x):
        h = self.ln(self.act(self.fc1(x)))
        h = self.ln2(self.act2(self.fc2(h))) * self.scale
        return self.out(torch.relu(self.fc3(h)))


def test_the_output_row_of_a_float16_export_is_the_plain_runs(tmp_path):
    torch.manual_seed(1)
    m = MLP()
    with torch.no_grad():
        m.ln.weight.uniform_(0.5, 1.5), m.ln.bias.uniform_(-0.3, 0.3), m.ln2.weight.uniform_(0.5, 1.5), m.ln2.bias.uniform_(-0.3, 0.3)
    m, x = m.half().eval(), torch.randn(3, 5, 16).half()
    path = tmp_path / "mlp16.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=False, opset_version=17, input_names=["x"], output_names=["y"])
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    plain = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(["y"], {"x": x.numpy()})[0]
    with torch.no_grad():
        want = m(x).numpy()
    oracle = float(np.abs(plain.astype(np.float64) - want.astype(np.float64)).max())
    res = api.diff_torch(path, m, example_args=(x,), config=api.RunConfig(device="cpu", opt_level="off", cache=False))
    row = next(r for r in res.results if r.pair.a.name == "y")
    assert row.metrics.max_abs == pytest.approx(oracle, rel=1e-6, abs=1e-9), (row.metrics.max_abs, oracle)


class Unused(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x, mask):  # mask never read: the legacy exporter drops it from the graph
        return self.fc(x)


def test_an_export_that_dropped_an_unused_forward_argument_is_checked(tmp_path):
    """The legacy exporter drops an argument forward() never reads (an unused attention mask): the example's two
    tensors were refused against the model's one input, with advice (--input) that failed again in forward(). The
    ONNX inputs are forward()'s parameters of their names; the other argument goes to torch as given."""
    torch.manual_seed(0)
    m, args = Unused().eval(), (torch.randn(2, 4), torch.randn(2, 4))
    path = tmp_path / "unused.onnx"
    torch.onnx.export(m, args, str(path), dynamo=False, input_names=["x", "mask"])
    import onnx

    assert [i.name for i in onnx.load(str(path)).graph.input] == ["x"]
    res = api.diff_torch(path, m, example_args=args)
    assert res.verdict()[0] == "pass", res.verdict()
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": args[0].numpy()})[0]
    with torch.no_grad():
        want = m(*args).numpy()
    row = next(r for r in res.results if r.pair.b.name == "fc")
    assert row.metrics.max_abs == pytest.approx(float(np.abs(got.astype(np.float64) - want).max()), abs=1e-9)
    grads = api.diff_grad_torch(path, m, example_args=args)
    assert grads.verdict()[0] == "pass", grads.verdict()
