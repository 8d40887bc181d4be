"""`diff --vs-torch` on a module whose nodes the exporter left without its scope: the dynamo exporter
writes the nodes computed inside a ``torch.no_grad()`` region of forward() with the root scope only. The
module then has no tensor to pair with; the reason must say its nodes exist (a node reads its weight),
not that the exporter fused or removed it."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")

from onnxprobe import api  # noqa: E402
from onnxprobe.match.engine import NOT_OBSERVABLE  # noqa: E402


class NoGradRegion(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.c = torch.nn.Linear(8, 4)

    def forward(self, x):
        with torch.no_grad():
            h = self.a(x)
        return self.c(torch.relu(h + x))


def test_a_module_whose_nodes_lost_its_scope_is_not_said_to_be_fused_away(tmp_path):
    torch.manual_seed(0)
    m, x = NoGradRegion().eval(), torch.randn(4, 8)
    path = tmp_path / "m.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=True, input_names=["x"], verbose=False)
    res = api.diff_torch(path, m, example_args=(x,))
    why = {u.obs.name: u for u in res.matching.unmatched_b}
    if "a" not in why:  # an exporter that keeps the scope pairs it: nothing to say
        assert any(p.b.name == "a" for p in res.matching.pairs)
        return
    assert why["a"].cause == NOT_OBSERVABLE
    assert "fused away or removed" not in why["a"].reason, why["a"].reason
    assert "a.weight" in why["a"].reason and "without its scope" in why["a"].reason, why["a"].reason
    assert res.verdict()[0] == "pass"
