"""`diff --grad --vs-torch` of a dynamo export that merged two modules of the same values on one input (a
GPT-NeoX parallel block's two fresh LayerNorms: the exporter keeps one LayerNormalization, whose weight's gradient
is the sum of both modules'): the weight was compared with ln1's gradient alone and FAILed a faithful export. A
parameter equal to another's whose module reads no initializer at all is merged into that initializer's sum, as
the legacy exporter's merged initializers already are. Oracle: torch autograd in float64."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from onnxprobe import api  # noqa: E402
from onnxprobe.torch.export import export  # noqa: E402


class Parallel(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(8), nn.LayerNorm(8)
        self.attn = nn.Linear(8, 8)
        self.mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))

    def forward(self, x):
        return x + self.attn(self.ln1(x)) + self.mlp(self.ln2(x))


@pytest.mark.parametrize("kind", ["legacy", "dynamo"])
def test_merged_layernorms_are_compared_with_the_sum_of_their_gradients(tmp_path, kind):
    torch.manual_seed(0)
    m, x = Parallel().eval(), torch.randn(2, 3, 8)
    path = export(m, (x,), tmp_path / f"{kind}.onnx", dynamo=kind == "dynamo")
    res = api.diff_grad_torch(path, m, example_args=(x,))
    assert res.verdict()[0] == "pass", res.verdict()
    by = {r.pair.b.name: r for r in res.results if r.pair.b.op_type == "parameter"}
    m64 = Parallel().eval()
    m64.load_state_dict(m.state_dict())
    m64 = m64.double()
    m64(x.double()).sum().backward()
    g = {n: p.grad.numpy() for n, p in m64.named_parameters()}
    for w in ("weight", "bias"):
        (name,) = [n for n in by if n.startswith("ln1." + w)]
        assert name == f"ln1.{w}+ln2.{w}", name  # the sum, as the graph's one node reads both
        want = g[f"ln1.{w}"] + g[f"ln2.{w}"]
        assert by[name].metrics.max_abs <= 1e-5 * float(np.abs(want).max()) + 1e-7, (name, by[name].metrics.max_abs)
