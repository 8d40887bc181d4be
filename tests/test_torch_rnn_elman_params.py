"""diff --grad --vs-torch and diff --vs-torch on nn.RNN (tanh and relu): the legacy exporter writes each layer
as one ONNX RNN node whose W [dirs, H, I], R [dirs, H, H] and B [dirs, 2H] hold weight_ih, weight_hh and
[bias_ih, bias_hh] stacked over directions (_reverse second), one block, not reordered, the node's
activations the module's nonlinearity. Those initializers were "derived" and every nn.RNN parameter went
unjudged; each is now its own row, compared with its block of the initializer's gradient.

Oracles: torch autograd (B's side), and the layout measured here with numpy against the module's own
parameters: an ONNX gradient sliced by it equals torch's. An edited block fails the verdict naming the
parameter it stands for, and only that one."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402
from rnn_layout import blocks  # noqa: E402
from onnxprobe.match.engine import OTHER_VALUES  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self, layers: int, bidi: bool, nonlinearity: str):
        super().__init__()
        self.rnn = torch.nn.RNN(4, 3, num_layers=layers, batch_first=True, bidirectional=bidi, nonlinearity=nonlinearity)
        self.head = torch.nn.Linear(3 * (2 if bidi else 1), 2)

    def forward(self, x):
        return self.head(self.rnn(x)[0].mean(1))  # every step: each direction's recurrent weights get a gradient


def _export(tmp_path, layers, bidi, nonlinearity):
    torch.manual_seed(0)
    m = Net(layers, bidi, nonlinearity).eval()
    x = torch.randn(2, 5, 4)
    path = tmp_path / f"rnn_{layers}_{bidi}_{nonlinearity}.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=False, opset_version=17, input_names=["x"])
    return path, m, x


def _rnn_params(m) -> list[str]:
    return [n for n, _ in m.named_parameters() if n.startswith("rnn.")]


def _blocks(model: onnx.ModelProto, m) -> dict[str, tuple[str, int, np.ndarray]]:
    return blocks(model, m, ("RNN",))


@pytest.mark.parametrize("layers,bidi,nonlinearity", [(1, False, "tanh"), (2, True, "tanh"), (2, False, "relu"),
                                                      (1, True, "relu")])
def test_every_rnn_parameter_gradient_is_compared_with_torch_autograd(tmp_path, layers, bidi, nonlinearity):
    path, m, x = _export(tmp_path, layers, bidi, nonlinearity)
    model = onnx.load(str(path))
    blocks = _blocks(model, m)
    rnn = _rnn_params(m)
    assert sorted(blocks) == sorted(rnn)  # the layout the exporter wrote, measured (the test's own oracle)
    m.zero_grad()
    m(x).sum().backward()
    want = {n: p.grad.numpy().copy() for n, p in m.named_parameters()}
    g = api.grad(path, None, api.RunConfig(device="cpu"), api.GradSpec(loss="sum"),
                 inputs=api.InputSpec(arrays={"x": x.numpy()}), save=True)
    for n, (init, d, rows) in blocks.items():
        np.testing.assert_allclose(g.arrays[init][d][rows], want[n], rtol=1e-3,
                                   atol=1e-5 * max(1.0, float(np.abs(want[n]).max())), err_msg=n)
    res = api.diff_grad_torch(path, m, example_args=(x,))
    assert res.verdict()[0] == "pass", res.verdict()
    rows_of = {r.pair.b.name: r for r in res.results}
    for n in rnn:  # each parameter its own row, judged, against torch's gradient of it
        r = rows_of.get(n)
        assert r is not None, (n, [u.reason for u in res.matching.unmatched_b if u.obs.name == n])
        # its block (a one-direction W or R, [1, H, ...], is the parameter with a unit axis added: as it is)
        assert r.passed is True and r.pair.a.name in (f"{blocks[n][0]}[{n}]_grad", f"{blocks[n][0]}_grad"), (n, r.pair.a.name)
        assert r.metrics.b_absmax > 0 and r.metrics.max_abs <= 1e-3 * r.metrics.b_absmax, (n, r.metrics.max_abs)
    assert not [u for u in res.matching.unmatched_b if u.obs.name in rnn]
    assert api.diff_torch(path, m, example_args=(x,)).verdict()[0] == "pass"


def test_a_module_of_the_other_nonlinearity_gets_no_blocks(tmp_path):
    """A relu export compared with the tanh module: the RNN nodes are not the module's (their activations
    say so), so no block claims them; the outputs differ and the verdict fails."""
    path, _, x = _export(tmp_path, 1, True, "relu")  # two directions: W, R, B hold no parameter as it is
    torch.manual_seed(0)
    tanh = Net(1, True, "tanh").eval()
    res = api.diff_grad_torch(path, tanh, example_args=(x,))
    assert not [r for r in res.results if r.pair.b.name in _rnn_params(tanh)]
    assert res.verdict()[0] == "fail"


@pytest.mark.parametrize("param,nonlinearity", [("rnn.weight_hh_l1_reverse", "tanh"), ("rnn.bias_hh_l0", "relu"),
                                                ("rnn.weight_ih_l0", "tanh")])
def test_an_edited_block_fails_naming_its_parameter(tmp_path, param, nonlinearity):
    path, m, x = _export(tmp_path, 2, True, nonlinearity)
    model = onnx.load(str(path))
    init, d, rows = _blocks(model, m)[param]
    t = next(i for i in model.graph.initializer if i.name == init)
    v = numpy_helper.to_array(t).copy()
    v[d][rows[1]] *= 1.5
    t.CopyFrom(numpy_helper.from_array(v, init))
    edited = tmp_path / "edited.onnx"
    onnx.save(model, str(edited))
    res = api.diff_grad_torch(edited, m, example_args=(x,))
    verdict, why = res.verdict()
    assert verdict == "fail" and param in why, why
    bad = [u for u in res.matching.unmatched_a if u.cause == OTHER_VALUES]
    assert [u.obs.name for u in bad] == [f"{init}[{param}]_grad"], [u.obs.name for u in bad]
    assert [u.obs.name for u in res.matching.unmatched_b if u.cause == OTHER_VALUES] == [param]
    others = [n for n in _rnn_params(m) if n != param]
    assert sorted(r.pair.b.name for r in res.results if r.pair.b.name in others) == sorted(others)
    fwd = api.diff_torch(edited, m, example_args=(x,))
    assert fwd.other_values == [f"{init}[{param}]"] and fwd.verdict()[0] == "fail", fwd.verdict()
    assert param in fwd.verdict()[1]


def _export_dynamo(tmp_path):
    pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    torch.manual_seed(0)
    m = Net(2, True, "tanh").eval()
    x = torch.randn(2, 5, 4)
    path = tmp_path / "rnn_dynamo.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=True, input_names=["x"])
    return path, m, x


def _broadcast_copies(model: onnx.ModelProto, m) -> dict[str, str]:
    """bias_hh -> the initializer holding it broadcast over the batch ([1, B, H]; dynamo folds the first step's
    0 @ W_hh^T + b_hh into it), found by value with numpy: what the exporter was measured to write."""
    out = {}
    for t in model.graph.initializer:
        v = numpy_helper.to_array(t)
        for n, p in m.named_parameters():
            p = p.detach().numpy()
            if "bias_hh" in n and v.ndim == 3 and v.shape[-1] == p.shape[0] and np.array_equal(v, np.broadcast_to(p, v.shape)):
                out[n] = t.name
    return out


def test_dynamo_rnn_every_parameter_gradient_is_compared_with_torch_autograd(tmp_path):
    """dynamo unrolls nn.RNN; the first step's h0 @ W_hh^T + b_hh (h0 = 0) is folded into a constant holding b_hh
    broadcast over the batch, so the step-0 share of b_hh's gradient went to it: the four bias_hh rows FAILED
    against torch (QA). The copy's gradient, summed over the batch, is now added to the parameter's."""
    path, m, x = _export_dynamo(tmp_path)
    copies = _broadcast_copies(onnx.load(str(path)), m)
    assert sorted(copies) == sorted(n for n in _rnn_params(m) if "bias_hh" in n), copies
    m.zero_grad()
    m(x).sum().backward()
    want = {n: p.grad.numpy().copy() for n, p in m.named_parameters()}
    res = api.diff_grad_torch(path, m, example_args=(x,), spec=api.GradSpec(loss="sum"))
    rows = {r.pair.b.name: r for r in res.results}
    for n in [n for n, _ in m.named_parameters()]:
        assert n in rows and rows[n].passed is True, (n, rows.get(n) and rows[n].metrics)
    for n, copy in copies.items():
        a = rows[n].pair.a
        assert f"{copy}_grad^sum(0,1)" in a.name.split("+"), a.name
        got = res.a.runner.values([a.probe], {"x": x.numpy()})[a.probe]
        np.testing.assert_allclose(got, want[n], rtol=1e-4, atol=1e-6, err_msg=n)  # the oracle: torch autograd
    why = {u.obs.name: u.reason for u in res.matching.unmatched_a}
    for n, copy in copies.items():
        assert n in why[f"{copy}_grad"] and "broadcast" in why[f"{copy}_grad"], why[f"{copy}_grad"]
    assert not res.matching.unmatched_b and res.verdict()[0] == "pass", res.verdict()
    assert api.diff_torch(path, m, example_args=(x,)).verdict()[0] == "pass"


@pytest.mark.parametrize("edit", ["parameter", "copy"])
def test_dynamo_rnn_an_edited_bias_hh_fails_naming_it(tmp_path, edit):
    """bias_hh edited in its own initializer (named as the parameter: other values, the verdict names it; its
    broadcast copy is then not summed), or in the broadcast copy only (not summed: the parameter's own
    initializer's gradient, a part of torch's, fails at rnn.bias_hh_l0; the forward values change too, so other
    rows may fail as well)."""
    path, m, x = _export_dynamo(tmp_path)
    model = onnx.load(str(path))
    param = "rnn.bias_hh_l0"
    name = param if edit == "parameter" else _broadcast_copies(model, m)[param]
    t = next(i for i in model.graph.initializer if i.name == name)
    v = numpy_helper.to_array(t).copy()
    v[..., 1] *= 1.5
    t.CopyFrom(numpy_helper.from_array(v, name))
    edited = tmp_path / "edited.onnx"
    onnx.save(model, str(edited))
    res = api.diff_grad_torch(edited, m, example_args=(x,))
    verdict, why = res.verdict()
    assert verdict == "fail", why
    if edit == "parameter":
        assert param in why, why
        assert [u.obs.name for u in res.matching.unmatched_b if u.cause == OTHER_VALUES] == [param]
        fwd = api.diff_torch(edited, m, example_args=(x,))
        assert fwd.other_values == [param] and param in fwd.verdict()[1], fwd.verdict()
    else:
        rows = {r.pair.b.name: r for r in res.results}
        assert rows[param].passed is False and "+" not in rows[param].pair.a.name, rows[param].pair
        summed = [r.pair.a.name for r in res.results if any(s.split("^")[0] == f"{name}_grad" for s in r.pair.a.name.split("+"))]
        assert not summed, summed
