"""A torch module whose forward() changes its own state (a counter buffer `cnt += 1`, or one reassigned,
`self.cnt = self.cnt + 1`): onnxprobe ran forward() several times (pairing, comparing, the teacher-forced pass,
the gradient passes) and never put the state back, so torch was judged on its 2nd to 4th call: an export of the
module's first call FAILed and one of a later call passed, and the caller's module was left changed. Every pass now
starts from the state the module was handed over in (with a note), and the module is left as it was. The oracle: the
ONNX model is written here by hand as the module's first call, x @ W.T + b + 1, its gradients numpy's."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api

torch = pytest.importorskip("torch")


class Counter(torch.nn.Module):
    def __init__(self, reassign: bool):
        super().__init__()
        self.fc = torch.nn.Linear(3, 4)
        self.register_buffer("cnt", torch.zeros(4))
        self.reassign = reassign

    def forward(self, x):
        if self.reassign:
            self.cnt = self.cnt + 1
        else:
            self.cnt += 1
        return self.fc(x) + self.cnt


def first_call(module, bump: float = 1.0):
    """The module's first call as an ONNX model: Gemm(x, fc.weight, fc.bias, transB=1) + (cnt + bump)."""
    w, b = (p.detach().numpy() for p in (module.fc.weight, module.fc.bias))
    k = module.cnt.detach().numpy() + bump
    nodes = [helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["h"], transB=1), helper.make_node("Add", ["h", "k"], ["y"])]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                      [numpy_helper.from_array(w, "fc.weight"), numpy_helper.from_array(b, "fc.bias"),
                       numpy_helper.from_array(k.astype(np.float32), "k")])


@pytest.mark.parametrize("reassign", [False, True])
def test_the_module_is_judged_on_its_first_call_and_left_as_it_was(tmp_path, reassign):
    torch.manual_seed(0)
    m = Counter(reassign)
    x = np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)
    inputs = api.InputSpec(arrays={"x": x})
    good, later = first_call(m), first_call(m, bump=2.0)  # the first call, and the second
    cfg = api.RunConfig(device="cpu", cache=False)
    res = api.diff_torch(good, m, example_args=(torch.from_numpy(x),), config=cfg, inputs=inputs)
    assert res.verdict()[0] == "pass", res.verdict()
    assert any("forward() changes the module's state (cnt)" in n for n in res.notes), res.notes
    assert api.diff_torch(later, m, example_args=(torch.from_numpy(x),), config=cfg, inputs=inputs).verdict()[0] == "fail"
    g = api.diff_grad_torch(good, m, example_args=(torch.from_numpy(x),), config=cfg, inputs=inputs)
    assert g.verdict()[0] == "pass", g.verdict()
    assert g.grad["loss_a"] == pytest.approx(g.grad["loss_b"], rel=1e-6)
    # the loss is sum(y): its value from numpy, the first call's
    want = float((x.astype(np.float64) @ m.fc.weight.detach().numpy().T + m.fc.bias.detach().numpy() + 1).sum())
    assert g.grad["loss_b"] == pytest.approx(want, rel=1e-5)
    assert torch.equal(m.cnt, torch.zeros(4)) and m.fc.weight.grad is None  # the caller's module as it was


class Variants(torch.nn.Module):
    """forward() changes its state in other ways: through .data (the version counter does not move), a plain
    tensor attribute, a Python counter, a buffer registered by forward() itself, a weight clamped in place."""

    def __init__(self, how: str):
        super().__init__()
        self.fc = torch.nn.Linear(3, 4)
        self.register_buffer("cnt", torch.zeros(4))
        self.plain, self.n, self.how = torch.zeros(4), 0, how

    def forward(self, x):
        if self.how == "data":
            self.cnt.data += 1
            bump = self.cnt
        elif self.how == "plain":
            self.plain = self.plain + 1
            bump = self.plain
        elif self.how == "int":
            self.n += 1
            bump = torch.full((4,), float(self.n))
        elif self.how == "lazy":
            if not hasattr(self, "extra"):
                self.register_buffer("extra", torch.zeros(4))
            self.extra += 1
            bump = self.extra
        else:  # "clamp": the weight clipped in place, then used (the export computes with the clipped weight)
            self.fc.weight.data.clamp_(-0.1, 0.1)
            bump = torch.ones(4)
        return self.fc(x) + bump


@pytest.mark.parametrize("how", ["data", "plain", "int", "lazy", "clamp"])
def test_every_kind_of_state_change_is_judged_on_the_first_call(how):
    torch.manual_seed(1)
    m = Variants(how)
    w0 = m.fc.weight.detach().clone()
    x = np.random.default_rng(2).normal(size=(2, 3)).astype(np.float32)
    first = Variants(how)
    first.load_state_dict(m.state_dict())
    if how == "clamp":
        first.fc.weight.data.clamp_(-0.1, 0.1)
    good = first_call(first)  # + (cnt + 1): the first call's bump, ones
    cfg, inputs = api.RunConfig(device="cpu", cache=False), api.InputSpec(arrays={"x": x})
    res = api.diff_torch(good, m, example_args=(torch.from_numpy(x),), config=cfg, inputs=inputs)
    assert res.verdict()[0] == "pass", (how, res.verdict())
    assert any("forward() changes the module's state" in n for n in res.notes), res.notes
    assert torch.equal(m.fc.weight, w0) and torch.equal(m.cnt, torch.zeros(4)) and torch.equal(m.plain, torch.zeros(4))
    assert m.n == 0 and not hasattr(m, "extra") and "extra" not in dict(m.named_buffers())


def test_a_weight_holding_nan_is_no_change_of_state():
    """The state is compared by value: a NaN in a weight (NaN != NaN) read as a change on every pass, a false note."""
    from onnxprobe.torch.load import FirstState

    m = torch.nn.Linear(3, 2)
    with torch.no_grad():
        m.weight[0, 0] = float("nan")
    st = FirstState(m)
    assert st.restore() == []
    with torch.no_grad():
        m.bias += 1
    assert st.restore() == ["bias"] and torch.isnan(m.weight[0, 0])
