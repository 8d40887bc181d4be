"""diff --vs-torch with the module in a wrapper whose one child is the exported module (nn.DataParallel's
``module``, torch.compile's ``_orig_mod``): the export's scopes name the child's paths (``a``), the torch
model's are ``module.a``. The legacy exporter's names paired them; dynamo's metadata did not, and every
module was unmatched as 'fused away or removed by the exporter', which it was not. The wrapper's paths
are now found under the child's, for both exporters, module by module and gradient by gradient."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = torch.nn.Linear(6, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.tanh(self.a(x)))))


@pytest.mark.parametrize("dynamo", [False, True])
def test_a_wrapped_module_pairs_module_by_module(tmp_path, dynamo):
    if dynamo:
        pytest.importorskip("onnxscript")
    torch.manual_seed(0)
    m, x = Net().eval(), torch.randn(4, 6)
    path = tmp_path / "net.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=dynamo, input_names=["x"], **({} if dynamo else {"opset_version": 17}))
    wrapped = torch.nn.DataParallel(m)
    res = api.diff_torch(path, (wrapped, (x,)))
    got = {r.pair.b.name for r in res.results}
    assert {"module.a", "module.b"} <= got, (got, [(u.obs.name, u.reason) for u in res.matching.unmatched_b])
    assert not any("fused away" in u.reason for u in res.matching.unmatched_b), res.matching.unmatched_b
    assert res.verdict()[0] == "pass", res.verdict()
    res = api.diff_grad_torch(path, (wrapped, (x,)))
    got = {r.pair.b.name: r for r in res.results}
    for p in ("module.a.weight", "module.a", "module.b"):
        assert p in got and got[p].passed, (p, sorted(got))
    assert res.verdict()[0] == "pass", res.verdict()
