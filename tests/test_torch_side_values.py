"""`--vs-torch` on a module whose forward computes something after the value it returns (``self.aux =
y * 2 + 1``; a scalar statistic) that its parent reads too: several tensors leave the module's scope,
and the last one is not its output. The module pairs with the one whose values are what it returns
(the oracle: a forward hook on the module, and onnx.reference on the export); none agreeing, it is
unmatched with that reason."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402


class Side(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = torch.tanh(self.fc(x))
        self.aux = y * 2.0 + 1.0  # after the returned value, of its shape
        return y


class Stat(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        out = torch.relu(h)
        self.stat = h.abs().mean()  # a scalar after the returned value
        return out


class Parent(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.s, self.head = inner, torch.nn.Linear(4, 2)

    def forward(self, x):
        y = self.s(x)
        extra = self.s.aux if hasattr(self.s, "aux") else 1.0 / self.s.stat
        return self.head(y + extra if hasattr(self.s, "aux") else y * extra)


def _export(m, x, path, dynamo):
    torch.onnx.export(m, (x,), str(path), dynamo=dynamo, opset_version=18 if dynamo else 17, input_names=["x"])
    return path


def _oracle(path, m, x, tensor):
    """(torch's return value of m.s, the ONNX tensor's value under onnx.reference), in float64."""
    got = {}

    def keep(_m, _a, out):
        got["s"] = out.detach().numpy().copy()

    h = m.s.register_forward_hook(keep)
    with torch.no_grad():
        m(x)
    h.remove()
    model = onnx.load(str(path))
    model.graph.output.append(onnx.helper.make_empty_tensor_value_info(tensor))
    ref = ReferenceEvaluator(model)
    outs = ref.run(None, {"x": x.numpy()})
    return got["s"].astype(np.float64), np.asarray(outs[-1], np.float64)


@pytest.mark.parametrize("dynamo", [False, True])
@pytest.mark.parametrize("inner", [Side, Stat])
def test_a_module_pairs_with_the_tensor_that_holds_its_return_value(tmp_path, dynamo, inner):
    torch.manual_seed(0)
    m, x = Parent(inner()).eval(), torch.randn(2, 4)
    path = _export(m, x, tmp_path / "m.onnx", dynamo)
    res = api.diff_torch(path, (m, (x,)), introduced=False)
    pair = next(p for p in res.results if p.pair.b.name == "s")
    want, onnx_value = _oracle(path, m, x, pair.pair.a.name)
    assert np.allclose(onnx_value, want, rtol=1e-5, atol=1e-6), pair.pair.a.name  # the tensor torch returns
    assert res.verdict()[0] == "pass" and res.first_failure is None
    assert "s" not in {u.obs.name for u in res.matching.unmatched_b}


@pytest.mark.parametrize("dynamo", [False, True])
def test_the_gradient_of_such_a_module_pairs_with_its_return_values_gradient(tmp_path, dynamo):
    torch.manual_seed(0)
    m, x = Parent(Side()).eval(), torch.randn(2, 4)
    path = _export(m, x, tmp_path / "m.onnx", dynamo)
    res = api.diff_grad_torch(path, (m, (x,)))
    pair = next(p for p in res.results if p.pair.b.name == "s")
    assert onnx.load(str(path)).graph.node  # the export exists
    assert "Tanh" in pair.pair.a.op_type, pair.pair.a.name
    assert res.verdict()[0] == "pass"


def test_no_tensor_of_its_scope_holding_its_value_leaves_it_unmatched_with_that_reason(tmp_path):
    """The export's Tanh made a Neg (not what the module returns, nor is the tensor after it): unmatched,
    with the reason, not paired with the last tensor and failed."""
    torch.manual_seed(0)
    m, x = Parent(Side()).eval(), torch.randn(2, 4)
    path = _export(m, x, tmp_path / "m.onnx", False)
    model = onnx.load(str(path))
    tanh = next(n for n in model.graph.node if n.op_type == "Tanh")
    tanh.op_type = "Neg"
    onnx.save(model, str(tmp_path / "broken.onnx"))
    res = api.diff_torch(tmp_path / "broken.onnx", (m, (x,)), introduced=False)
    assert "s" not in {p.pair.b.name for p in res.results}
    why = next(u.reason for u in res.matching.unmatched_b if u.obs.name == "s")
    assert "none of the 2 tensors of its shape" in why, why
