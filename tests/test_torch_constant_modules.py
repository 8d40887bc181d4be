"""`diff --vs-torch` on a legacy export whose module computes its output from constants alone: a rotary
embedding's cos / sin of ``arange(seq) * inv_freq`` (Llama's rotary_emb), whose shapes are static, so the
exporter folds what feeds it into constants and its nodes read nothing of the model's inputs. Its tensors are
constants of the graph, not layers, so no observable stands for it; the reason said "its scope's tensors are
not observable here", which hid why (QA: Llama's rotary_emb, T5's relative_attention_bias, BART's
embed_positions). Oracle: the graph itself, walked here: no model input reaches the module's nodes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402
from onnxprobe.match.engine import NOT_OBSERVABLE  # noqa: E402


class Rotary(torch.nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d)), persistent=False)

    def forward(self, x):
        f = torch.arange(x.shape[1], dtype=torch.float32)[:, None] * self.inv_freq[None, :]
        return f.cos() * 1.0, f.sin() * 1.0


class WithRotary(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rot = Rotary(8)
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        c, s = self.rot(x)
        return self.lin(x) * c.repeat(1, 2) + s.repeat(1, 2)


def _reached(model: onnx.ModelProto) -> set[str]:
    """The tensors some model input reaches (the oracle: a plain forward walk)."""
    seen = {i.name for i in model.graph.input}
    for n in model.graph.node:  # the exporter writes nodes in order
        if any(i in seen for i in n.input):
            seen.update(n.output)
    return seen


def test_a_module_computed_from_constants_alone_says_so(tmp_path):
    torch.manual_seed(0)
    m, x = WithRotary().eval(), torch.randn(2, 5, 8)
    path = tmp_path / "m.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=False, opset_version=17, input_names=["x"])
    model = onnx.load(str(path))
    rot = [n for n in model.graph.node if n.name.startswith("/rot/")]
    assert rot and not any(o in _reached(model) for n in rot for o in n.output)  # no input reaches it
    res = api.diff_torch(path, m, example_args=(x,))
    why = {u.obs.name: u for u in res.matching.unmatched_b}
    assert why["rot"].cause == NOT_OBSERVABLE
    assert "not observable here" not in why["rot"].reason, why["rot"].reason
    assert "constants" in why["rot"].reason and "no model input" in why["rot"].reason, why["rot"].reason
    assert res.verdict()[0] == "pass"


class WithPositions(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pos = torch.nn.Embedding(10, 8)
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.lin(x) + self.pos(torch.arange(x.shape[1]))


@pytest.mark.parametrize("dynamo", [False, True])
def test_a_module_folded_whole_into_an_initializer_says_so(tmp_path, dynamo):
    """An Embedding of ``arange(n)`` with n static (Whisper's embed_positions, dynamo BART's): the exporter
    folds its whole output into an initializer and leaves no node of it. It was 'fused away or removed by the
    exporter'; its values are there, a constant of the export. Oracle: the initializer that equals the
    Embedding's first n rows, found here with numpy."""
    torch.manual_seed(0)
    m, x = WithPositions().eval(), torch.randn(2, 5, 8)
    path = tmp_path / "m.onnx"
    kw = {"dynamo": True, "opset_version": 18} if dynamo else {"dynamo": False, "opset_version": 17}
    torch.onnx.export(m, (x,), str(path), input_names=["x"], **kw)
    model = onnx.load(str(path))
    rows = m.pos.weight.detach().numpy()[:5]
    held = [t.name for t in model.graph.initializer if list(t.dims) == [5, 8]
            and np.array_equal(onnx.numpy_helper.to_array(t), rows)]
    assert len(held) == 1 and not any(n.op_type == "Gather" for n in model.graph.node)
    res = api.diff_torch(path, m, example_args=(x,))
    why = {u.obs.name: u for u in res.matching.unmatched_b}
    assert why["pos"].cause == NOT_OBSERVABLE
    assert "fused away" not in why["pos"].reason, why["pos"].reason
    assert "computed from constants alone" in why["pos"].reason and repr(held[0]) in why["pos"].reason, why["pos"].reason
    assert res.verdict()[0] == "pass"


def test_a_module_with_no_node_and_no_equal_constant_is_still_fused_away(tmp_path):
    """The search by value does not name a constant that merely has the module's shape: a Linear's output
    of [5, 8] next to an unrelated [5, 8] initializer stays as it was. Oracle: the values differ (checked)."""

    class Gone(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pos = torch.nn.Embedding(10, 8)
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            return self.lin(x) + self.pos(torch.arange(x.shape[1])) * 2.0

    torch.manual_seed(0)
    m, x = Gone().eval(), torch.randn(2, 5, 8)
    path = tmp_path / "m.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=False, opset_version=17, input_names=["x"])
    model = onnx.load(str(path))
    rows = m.pos.weight.detach().numpy()[:5]
    assert not any(list(t.dims) == [5, 8] and np.allclose(onnx.numpy_helper.to_array(t), rows)
                   for t in model.graph.initializer)
    res = api.diff_torch(path, m, example_args=(x,))
    why = {u.obs.name: u for u in res.matching.unmatched_b}
    if "pos" in why:
        assert "initializer" not in why["pos"].reason, why["pos"].reason
