"""The "SQNR along depth" sparkline draws the pairs in the table's order (--sort topo): a weight's gradients
and its activation's share their node's index, and were drawn by name (linear_grad, s.fc.bias_grad,
s.fc.weight_grad) where the table lists weight, bias, activation."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402
from onnxprobe.report.diff import diff_dict, diff_renderables, sparkline  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.head = torch.nn.Linear(4, 8), torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.head(torch.tanh(self.fc(x)))


@pytest.mark.parametrize("sort", ["topo", "accumulated"])
def test_the_depth_sparkline_follows_the_tables_order(tmp_path, sort):
    torch.manual_seed(0)
    m, x, path = Net().eval(), torch.randn(5, 4), tmp_path / "m.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=False, opset_version=17, input_names=["x"])
    res = api.diff_grad_torch(path, (m, (x,)))
    table = diff_dict(res)["pairs"]  # the rows under --sort topo
    assert len({p["index"] for p in table}) < len(table)  # some pairs share a node's index
    assert [p["index"] for p in table] == sorted(p["index"] for p in table)
    sq = [p["sqnr_db"] for p in table if not p["exact"]]
    top = max(sq + [140.0])
    want = sparkline([top if p["exact"] else p["sqnr_db"] for p in table], cap=top, room=200)
    d = diff_dict(res, api.sort_results(res.results, sort))
    line = next(str(r) for r in diff_renderables(d, 250) if str(r).startswith("SQNR along depth: "))
    assert line.startswith(f"SQNR along depth: {want}  "), (line, want)
    last = table[-1]
    end = "exact" if last["exact"] else f"{last['sqnr_db']:.3g}"
    assert f"→ {end}" in line and math.isfinite(top), line
