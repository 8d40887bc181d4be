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

from conftest import torch_grads64  # noqa: E402
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
    g = torch_grads64(Parallel, m, (x,))
    for w in ("weight", "bias"):
        (name,) = [n for n in by if n.startswith("ln1." + w)]
        assert name == f"ln1.{w}+ln2.{w}", name  # the sum, as the graph's one node reads both
        want = g[f"ln1.{w}"] + g[f"ln2.{w}"]
        assert by[name].metrics.max_abs <= 1e-5 * float(np.abs(want).max()) + 1e-7, (name, by[name].metrics.max_abs)


class Decoder(nn.Module):
    """A fresh nn.TransformerDecoderLayer: every bias is zeros, which both exporters merge into one initializer."""

    def __init__(self):
        super().__init__()
        self.dec = nn.TransformerDecoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(16, 3)

    def forward(self, x, mem):
        return self.head(self.dec(x, mem))


@pytest.mark.parametrize("kind", ["legacy", "dynamo"])
def test_attention_biases_merged_with_a_slice_or_read_by_two_attentions(tmp_path, kind):
    """dynamo keeps one in_proj_bias initializer that both attentions read (the cross-attention through a Split
    the optimizer left without scopes): its gradient was compared with the self-attention's alone. legacy folds the
    cross-attention's in_proj_bias[:16] into a constant merged with the out_proj and LayerNorm biases (16 zeros
    each): its gradient holds that slice's too. Both FAILed a faithful export; now the sum of both in_proj_biases,
    and a merged initializer with a slice in it is not compared (said). Oracle: torch autograd in float64."""
    torch.manual_seed(0)
    m, args = Decoder().eval(), (torch.randn(2, 5, 16), torch.randn(2, 7, 16))
    path = export(m, args, tmp_path / f"{kind}.onnx", dynamo=kind == "dynamo")
    res = api.diff_grad_torch(path, m, example_args=args)
    assert res.verdict()[0] == "pass", res.verdict()
    g = torch_grads64(Decoder, m, args)
    by = {r.pair.b.name: r for r in res.results if r.pair.b.op_type == "parameter"}
    unused = {u.obs.name: u.reason for u in res.matching.unmatched_b}
    if kind == "dynamo":
        name = "dec.self_attn.in_proj_bias+dec.multihead_attn.in_proj_bias"
        assert name in by, sorted(by)
        want = g["dec.self_attn.in_proj_bias"] + g["dec.multihead_attn.in_proj_bias"]
        assert by[name].metrics.max_abs <= 1e-5 * float(np.abs(want).max()) + 1e-7
    else:
        assert not [n for n in by if "norm1.bias" in n or "out_proj.bias" in n], sorted(by)
        assert "slice of dec.multihead_attn.in_proj_bias" in unused["dec.norm1.bias"]
    for n, r in by.items():  # every pair that stands agrees with torch's sum of its parameters
        want = sum(g[p] for p in n.split("+"))
        assert r.metrics.max_abs <= 1e-5 * float(np.abs(want).max()) + 1e-6, n


class FreshAndPlainNorm(nn.Module):
    """A fresh LayerNorm (weight: ones) and an affine-less one, whose scale of ones dynamo dedups with that weight."""

    def __init__(self):
        super().__init__()
        self.fc1, self.ln1 = nn.Linear(8, 8), nn.LayerNorm(8)
        self.fc2, self.ln2 = nn.Linear(8, 8), nn.LayerNorm(8, elementwise_affine=False)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.ln2(self.fc2(torch.tanh(self.ln1(self.fc1(x))))))


@pytest.mark.parametrize("kind", ["legacy", "dynamo"])
def test_a_weight_an_affine_less_norm_reads_as_its_constant_is_not_compared(tmp_path, kind):
    """dynamo: ln1.weight (ones) is one initializer with ln2's constant scale: its gradient, the sum over both
    LayerNormalization nodes, was compared with torch's ln1.weight gradient (ln1's use alone) and FAILed a faithful
    export. Now it is said, not compared; the rest compares. Oracle: torch autograd in float64."""
    torch.manual_seed(0)
    m, x = FreshAndPlainNorm().eval(), torch.randn(4, 8)
    path = export(m, (x,), tmp_path / f"{kind}.onnx", dynamo=kind == "dynamo")
    res = api.diff_grad_torch(path, m, example_args=(x,))
    assert res.verdict()[0] == "pass", res.verdict()
    want = torch_grads64(FreshAndPlainNorm, m, (x,))
    got = {r.pair.b.name: r for r in res.results if r.pair.b.op_type == "parameter"}
    for n, r in got.items():
        w = sum(want[p] for p in n.split("+"))
        assert r.metrics.max_abs <= 1e-5 * float(np.abs(w).max()) + 1e-7, n
    assert {"fc1.weight", "fc2.weight", "head.weight", "ln1.bias"} <= set(got), sorted(got)
    if kind == "dynamo":
        unused = {u.obs.name: u.reason for u in res.matching.unmatched_b}
        assert "ln1.weight" not in got and "also read by ln2 as a constant" in unused["ln1.weight"], unused
