"""`diff --grad --vs-torch`: PReLU's and GroupNorm's parameters, which both exporters store with unit axes
added ([C, 1, 1], dynamo's PReLU [1, C, 1, 1]), pair with the torch parameter whose values they hold and are
compared (they were unmatched on both sides, 'no torch parameter holds these values', though one does). The
oracle: torch autograd's gradient of the same loss, reshaped, computed here."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402
from onnxprobe.types import forward_name  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(3, 4, 3)
        self.act = torch.nn.PReLU(4)
        self.gn = torch.nn.GroupNorm(2, 4)

    def forward(self, x):
        return self.gn(self.act(self.c(x)))


def _net():
    torch.manual_seed(0)
    m = Net().eval()
    with torch.no_grad():  # values no other parameter holds
        m.act.weight.uniform_(0.05, 0.5)
        m.gn.weight.uniform_(0.5, 1.5)
        m.gn.bias.uniform_(-1, 1)
    return m, torch.randn(1, 3, 6, 6)


@pytest.mark.parametrize("dynamo", [False, True])
def test_prelu_and_groupnorm_parameters_are_compared(tmp_path, dynamo):
    if dynamo:
        pytest.importorskip("onnxscript")
    m, x = _net()
    path = tmp_path / "net.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=dynamo, input_names=["x"], **({} if dynamo else {"opset_version": 17}))
    target = np.random.default_rng(1).standard_normal((1, 4, 4, 4)).astype(np.float32)
    res = api.diff_grad_torch(path, (m, (x,)), api.GradSpec(loss="mse", target=target))
    got = {r.pair.b.name: r for r in res.results}
    m.zero_grad()
    ((m(x) - torch.from_numpy(target)) ** 2).mean().backward()
    onnx_grads = api.grad(path, None, None, api.GradSpec(loss="mse", target=target), inputs={"x": x.numpy()},
                          save=True).arrays
    for p in ("act.weight", "gn.weight", "gn.bias"):
        assert p in got, (p, sorted(got))
        r = got[p]
        assert r.passed is True, (p, r.metrics)
        want = dict(m.named_parameters())[p].grad.detach().numpy()
        g = onnx_grads[forward_name(r.pair.a.name)]
        assert g.size == want.size and g.shape != want.shape  # stored with unit axes added
        np.testing.assert_allclose(g.reshape(want.shape), want, rtol=1e-4, atol=1e-6)
    assert res.verdict()[0] == "pass", res.verdict()


def test_param_probes_read_back_whatever_the_parameter_names_hold():
    """``read_param_probe`` inverts ``param_probe``: a name holding '@' or digits only (a ParameterList's '0')
    is read as a name, the shape only after the last '@' (it split at the first one). (A bare parameter
    registered as 'x@3' would read as x reshaped to [3]: torch names hold a '.' before any '@' of a module key.)"""
    from onnxprobe.torch.grads import param_probe, read_param_probe

    for params in (["a.weight"], ["0"], ["heads.a@b.weight"], ["heads.x@3.weight"], ["a.w", "b.w"]):
        for transposed in (False, True):
            for shape in (None, (4, 1, 1), (7,)):
                got = read_param_probe(param_probe(params, transposed, shape))
                assert got == (params, transposed, shape), (params, transposed, shape, got)
