"""diff --grad --vs-torch: an ``nn.Embedding(padding_idx=P)`` read at P. torch's embedding backward gives row P
no gradient (a rule of its backward alone: the forward is a plain lookup), while the ONNX graph's Gather, which
cannot say it, gives row P the gradient of every position that reads it. The export of a correct model FAILed at
emb.weight (QA: an LM head tied to an embedding with padding_idx, both exporters). torch's gradient is now taken
without the padding rule, the function the ONNX graph differentiates, with a note. Oracle: torch autograd on
the same module with padding_idx removed."""

from __future__ import annotations

import copy

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402

IDS = [[0, 3, 5, 0], [7, 1, 0, 10]]  # the padding index 0 is read


class Net(torch.nn.Module):
    def __init__(self, tied: bool):
        super().__init__()
        self.emb = torch.nn.Embedding(11, 6, padding_idx=0)
        self.fc = torch.nn.Linear(6, 6)
        self.head = torch.nn.Linear(6, 11, bias=False)
        if tied:
            self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(torch.tanh(self.fc(self.emb(ids))))


def _grad(m, ids) -> np.ndarray:
    m.zero_grad(set_to_none=True)
    m(ids).sum().backward()
    g = m.emb.weight.grad.numpy().copy()
    m.zero_grad(set_to_none=True)
    return g


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("dynamo", [False, True])
def test_a_padding_row_read_gets_the_gradient_the_onnx_gather_gives_it(tmp_path, dynamo, tied):
    if dynamo:
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    torch.manual_seed(0)
    m, ids = Net(tied).eval(), torch.tensor(IDS)
    path = tmp_path / "emb.onnx"
    torch.onnx.export(m, (ids,), str(path), dynamo=dynamo, input_names=["ids"], **({} if dynamo else {"opset_version": 17}))
    plain = copy.deepcopy(m)
    plain.emb.padding_idx = None
    padded, every = _grad(m, ids), _grad(plain, ids)
    assert not np.allclose(padded[0], every[0], atol=1e-3)  # else the test would prove nothing
    assert api.diff_torch(path, (m, (ids,))).verdict()[0] == "pass"
    res = api.diff_grad_torch(path, (m, (ids,)))
    got = {r.pair.b.name: r for r in res.results}
    assert got["emb.weight"].passed is True, got["emb.weight"].metrics
    assert res.verdict()[0] == "pass", res.verdict()
    assert any("padding_idx" in n and "emb" in n for n in res.notes), res.notes
    side = res.b.runner.values(["param:emb.weight"], {"ids": ids.numpy()})
    np.testing.assert_allclose(side["param:emb.weight"], every, rtol=1e-5, atol=1e-6)
    assert m.emb.padding_idx == 0  # the module as it was


@pytest.mark.parametrize("dynamo", [False, True])
def test_a_changed_embedding_row_still_fails(tmp_path, dynamo):
    if dynamo:
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    torch.manual_seed(0)
    m, ids = Net(False).eval(), torch.tensor(IDS)
    path = tmp_path / "emb.onnx"
    torch.onnx.export(m, (ids,), str(path), dynamo=dynamo, input_names=["ids"], **({} if dynamo else {"opset_version": 17}))
    model = onnx.load(str(path))
    t = next(i for i in model.graph.initializer if tuple(i.dims) == (11, 6))
    v = numpy_helper.to_array(t).copy()
    v[3] *= 1.01
    t.CopyFrom(numpy_helper.from_array(v, t.name))
    onnx.save(model, str(path))
    res = api.diff_grad_torch(path, (m, (ids,)))
    verdict, why = res.verdict()
    assert verdict == "fail" and t.name in why, why


class Options(torch.nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.emb = torch.nn.Embedding(7, 4, **kw)
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, ids):
        return self.fc(self.emb(ids))


@pytest.mark.parametrize("kw", [{"scale_grad_by_freq": True}, {"sparse": True, "padding_idx": 1}, {"padding_idx": -1}])
def test_the_other_backward_only_options_are_left_out_too(tmp_path, kw):
    """scale_grad_by_freq scales each row's gradient by its count (FAILed); sparse=True gave a sparse gradient
    that numpy cannot take (an error); a negative padding_idx is the row counted from the end."""
    torch.manual_seed(0)
    m, ids = Options(**kw).eval(), torch.tensor([[1, 1, 2, 6]])
    path = tmp_path / "emb.onnx"
    torch.onnx.export(m, (ids,), str(path), dynamo=False, input_names=["ids"], opset_version=17)
    plain = Options().eval()
    plain.load_state_dict(m.state_dict())
    res = api.diff_grad_torch(path, (m, (ids,)))
    assert res.verdict()[0] == "pass", res.verdict()
    side = res.b.runner.values(["param:emb.weight"], {"ids": ids.numpy()})
    np.testing.assert_allclose(side["param:emb.weight"], _grad(plain, ids), rtol=1e-5, atol=1e-6)
    assert m.emb.sparse == kw.get("sparse", False)
