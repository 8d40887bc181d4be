"""diff --grad --vs-torch: an initializer the exporter made for one module (dynamo's all-ones scale of a
LayerNorm(elementwise_affine=False)) is not a parameter of another module because its values happen to equal
that parameter's (a fresh GroupNorm's weight, ones). It was paired with gn.weight by value, the verdict FAILed
on a pair of two different functions of the data, and gn.weight's own initializer (stored [C, 1, 1]) went
unmatched as 'derived'. Which module reads an initializer decides, where the file says it. Oracle: torch
autograd here."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxprobe.torch.params import map_parameters

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv1d(3, 4, 3)
        self.ln = torch.nn.LayerNorm(6, elementwise_affine=False)
        self.ct = torch.nn.ConvTranspose2d(4, 6, 3, stride=2)
        self.gn = torch.nn.GroupNorm(2, 6)
        self.fc = torch.nn.Linear(6, 2)

    def forward(self, x):
        y = self.ln(self.c1(x)).unsqueeze(-1).expand(-1, -1, -1, 2)
        return self.fc(self.gn(self.ct(y)).mean((2, 3)))


@pytest.mark.parametrize("dynamo", [False, True])
def test_a_constant_of_another_module_is_not_the_parameter_of_its_values(tmp_path, dynamo):
    if dynamo:
        pytest.importorskip("onnxscript")
    torch.manual_seed(0)
    m, x = Net().eval(), torch.randn(2, 3, 8)
    path = tmp_path / "net.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=dynamo, input_names=["x"], **({} if dynamo else {"opset_version": 17}))
    res = api.diff_grad_torch(path, (m, (x,)))
    got = {r.pair.b.name: r for r in res.results}
    m.zero_grad()
    m(x).sum().backward()
    for p in ("gn.weight", "gn.bias"):
        assert p in got, (p, sorted(got), [(u.obs.name, u.reason) for u in res.matching.unmatched_b])
        assert got[p].passed is True, (p, got[p].pair.a.name, got[p].metrics)
    assert res.verdict()[0] == "pass", res.verdict()


def _model(readers: dict[str, tuple[str, np.ndarray]]) -> onnx.ModelProto:
    """One Add per initializer, in the legacy exporter's scope of the module that reads it."""
    nodes, prev = [], "x"
    for k, (name, (scope, _)) in enumerate(readers.items()):
        nodes.append(helper.make_node("Add", [prev, name], [f"h{k}"], name=f"/{scope}/Add" if scope else f"/Add_{k}"))
        prev = f"h{k}"
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 1, 1])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, n) for n, (_, v) in readers.items()])
    return helper.make_model(g)


def test_the_reading_module_decides_between_equal_values():
    ones = np.ones(6, np.float32)
    readers = {"val_2": ("ln", ones), "val_33": ("gn", ones.reshape(6, 1, 1))}
    users = {"val_2": {"", "ln"}, "val_33": {"", "gn"}}
    pm = map_parameters(_model(readers), {"gn.weight": ones}, list(readers), users=users)
    assert "val_2" not in pm.links and "ln" in pm.refused["val_2"], (pm.links, pm.refused)
    assert pm.links["val_33"].params == ["gn.weight"], (pm.links, pm.refused)
    # a tied parameter read by the module that holds it under its other name is still its own
    pm = map_parameters(_model({"w": ("proj", ones)}), {"emb.weight": ones}, ["w"], users={"w": {"", "proj"}},
                        owners={"emb.weight": {"emb", "proj"}})
    assert pm.links["w"].params == ["emb.weight"], (pm.links, pm.refused)
    # read by an ancestor (F.linear(x, self.side.weight) in the root) or with no scopes: still linked
    for users in ({"w": {""}}, None, {}):
        pm = map_parameters(_model({"w": ("", ones)}), {"side.weight": ones}, ["w"], users=users)
        assert pm.links["w"].params == ["side.weight"], (users, pm.links, pm.refused)


def test_readers_that_are_no_module_of_the_torch_model_say_nothing():
    """A module renamed since the export (``a`` is now ``seq.0``): its scope names no module of the torch
    model, so the values decide, as before."""
    ones = np.ones(6, np.float32)
    pm = map_parameters(_model({"a.weight": ("a", ones)}), {"seq.0.weight": ones}, ["a.weight"],
                        users={"a.weight": {"", "a"}}, modules={"", "seq", "seq.0"})
    assert pm.links["a.weight"].params == ["seq.0.weight"], (pm.links, pm.refused)
    pm = map_parameters(_model({"val_2": ("ln", ones)}), {"gn.weight": ones}, ["val_2"],
                        users={"val_2": {"", "ln"}}, modules={"", "ln", "gn"})
    assert "val_2" not in pm.links and "ln" in pm.refused["val_2"], (pm.links, pm.refused)
