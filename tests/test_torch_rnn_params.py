"""diff --grad --vs-torch and diff --vs-torch on nn.GRU and nn.LSTM: both exporters write each layer as one
ONNX GRU / LSTM node whose W, R and B hold the layer's weight_ih, weight_hh and [bias_ih, bias_hh] with the
gate blocks reordered and the directions stacked. Those initializers were "derived" and 8 of the 10
parameters of a GRU + LSTM model went unjudged; each parameter is now compared with its block of the
initializer's gradient (and its values with the block's, in the forward check).

Oracles: torch autograd (B's side), and the layout measured here with numpy against the module's own
parameters (the test's ORDER, not onnxprobe's): an ONNX gradient rearranged by it equals torch's. An edited
gate block fails the verdict naming the parameter it stands for, and only that one."""

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
    def __init__(self, layers: int, bidi: bool):
        super().__init__()
        d = 2 if bidi else 1
        self.gru = torch.nn.GRU(4, 3, num_layers=layers, batch_first=True, bidirectional=bidi)
        self.lstm = torch.nn.LSTM(3 * d, 5, num_layers=layers, bidirectional=bidi)
        self.head = torch.nn.Linear(5 * d, 2)

    def forward(self, x):
        y = self.gru(x)[0]
        z = self.lstm(y.transpose(0, 1))[0]
        return self.head(z.mean(0))  # every step: each direction's recurrent weights get a gradient


def _export(tmp_path, layers, bidi, dynamo):
    if dynamo:
        pytest.importorskip("onnxscript")
    torch.manual_seed(0)
    m = Net(layers, bidi).eval()
    x = torch.randn(2, 5, 4)
    path = tmp_path / f"rnn_{layers}_{bidi}_{dynamo}.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=dynamo, opset_version=17, input_names=["x"])
    return path, m, x


def _rnn_params(m) -> list[str]:
    return [n for n, _ in m.named_parameters() if not n.startswith("head.")]


def _blocks(model: onnx.ModelProto, m) -> dict[str, tuple[str, int, np.ndarray]]:
    return blocks(model, m, ("GRU", "LSTM"))


CASES = [(1, True, False), (2, False, False), (2, True, False), (1, True, True), (2, True, True)]


@pytest.mark.parametrize("layers,bidi,dynamo", CASES)
def test_every_rnn_parameter_gradient_is_compared_with_torch_autograd(tmp_path, layers, bidi, dynamo):
    path, m, x = _export(tmp_path, layers, bidi, dynamo)
    model = onnx.load(str(path))
    blocks = _blocks(model, m)
    rnn = _rnn_params(m)
    assert sorted(blocks) == sorted(rnn)  # the layout the exporter wrote, measured (the test's own oracle)
    # torch autograd on the module; the ONNX gradient of each initializer rearranged by the measured layout
    m.zero_grad()
    m(x).sum().backward()
    want = {n: p.grad.numpy().copy() for n, p in m.named_parameters()}
    g = api.grad(path, None, api.RunConfig(device="cpu"), api.GradSpec(loss="sum"),
                 inputs=api.InputSpec(arrays={"x": x.numpy()}), save=True)
    for n, (init, d, rows) in blocks.items():
        got = g.arrays[init][d][rows]
        np.testing.assert_allclose(got, want[n], rtol=1e-3, atol=1e-5 * max(1.0, float(np.abs(want[n]).max())), err_msg=n)
    res = api.diff_grad_torch(path, m, example_args=(x,))
    assert res.verdict()[0] == "pass", res.verdict()
    rows_of = {r.pair.b.name: r for r in res.results}
    for n in rnn:  # each parameter its own row, judged, against torch's gradient of it
        r = rows_of.get(n)
        assert r is not None, (n, [u.reason for u in res.matching.unmatched_b if u.obs.name == n])
        assert r.passed is True and blocks[n][0] in r.pair.a.name, (n, r.pair.a.name)
        assert r.metrics.b_absmax > 0 and r.metrics.max_abs <= 1e-3 * r.metrics.b_absmax, (n, r.metrics.max_abs)
    assert not [u for u in res.matching.unmatched_b if u.obs.name in rnn]
    assert api.diff_torch(path, m, example_args=(x,)).verdict()[0] == "pass"


def _edit(path, m, param: str, gate: int, tmp_path):
    """``param``'s torch gate block ``gate`` scaled by 1.5 in the ONNX initializer that holds it."""
    model = onnx.load(str(path))
    init, d, rows = _blocks(model, m)[param]
    t = next(i for i in model.graph.initializer if i.name == init)
    v = numpy_helper.to_array(t).copy()
    h = len(rows) // (4 if "lstm" in param else 3)
    v[d][rows[gate * h:(gate + 1) * h]] *= 1.5
    t.CopyFrom(numpy_helper.from_array(v, init))
    out = tmp_path / "edited.onnx"
    onnx.save(model, str(out))
    return out, init


@pytest.mark.parametrize("param,gate,dynamo", [("lstm.weight_hh_l1_reverse", 1, False), ("gru.bias_hh_l0", 2, False),
                                               ("lstm.weight_ih_l0", 3, True)])
def test_an_edited_gate_block_fails_naming_its_parameter(tmp_path, param, gate, dynamo):
    path, m, x = _export(tmp_path, 2, True, dynamo)
    edited, init = _edit(path, m, param, gate, tmp_path)
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
