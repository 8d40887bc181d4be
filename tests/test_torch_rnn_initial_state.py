"""diff --grad --vs-torch: the zero initial state the exporters write for an nn.GRU / nn.LSTM called without
one (legacy: a Constant, '/gru/Constant_output_0', Expanded to the batch; dynamo: an initializer, 'val_10',
read directly) was listed as 'derived from the parameters by the exporter' or 'no torch parameter holds its
values'. It is a constant of the export, not a parameter: said so (cause folded, naming what reads it). A
learnable initial state the exporter expanded into such a tensor, changed to zeros, is not called one.

Oracle: the tensors are found here by walking back from each node's initial_h / initial_c input and
checking their values with numpy."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402
from onnxprobe.match.engine import FOLDED  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self, learnable_h0: bool = False):
        super().__init__()
        self.gru = torch.nn.GRU(4, 3, batch_first=True, bidirectional=True)
        self.lstm = torch.nn.LSTM(6, 5)
        self.h0 = torch.nn.Parameter(torch.randn(2, 1, 3)) if learnable_h0 else None
        self.head = torch.nn.Linear(5, 2)

    def forward(self, x):
        h0 = None if self.h0 is None else self.h0.expand(2, x.shape[0], 3).contiguous()
        y = self.gru(x, h0)[0]
        return self.head(self.lstm(y.transpose(0, 1))[0].mean(0))


def _export(tmp_path, dynamo, learnable_h0=False):
    if dynamo:
        pytest.importorskip("onnxscript")
    torch.manual_seed(0)
    m = Net(learnable_h0).eval()
    x = torch.randn(2, 5, 4)
    path = tmp_path / f"rnn_{dynamo}_{learnable_h0}.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=dynamo, opset_version=17, input_names=["x"])
    return path, m, x


def _state_sources(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The initializer or Constant each GRU / LSTM initial_h / initial_c comes from (through one-input ops)."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    made = {o: n for n in model.graph.node for o in n.output}
    out = {}
    for n in model.graph.node:
        for k in (5, 6) if n.op_type in ("GRU", "LSTM") else ():
            t = n.input[k] if len(n.input) > k else ""
            while t and t not in inits and made[t].op_type != "Constant":
                t = made[t].input[0]
            if t:
                out[t] = inits[t] if t in inits else numpy_helper.to_array(made[t].attribute[0].t)
    return out


@pytest.mark.parametrize("dynamo", [False, True])
def test_a_zero_initial_state_is_a_constant_not_a_parameter(tmp_path, dynamo):
    path, m, x = _export(tmp_path, dynamo)
    sources = _state_sources(onnx.load(str(path)))
    assert len(sources) >= 2 and all(v.dtype.kind == "f" and not v.any() for v in sources.values()), sources
    res = api.diff_grad_torch(path, m, example_args=(x,))
    assert res.verdict()[0] == "pass", res.verdict()
    said = {u.obs.name: u for u in res.matching.unmatched_a}
    for t in sources:
        u = said[f"{t}_grad"]
        assert u.cause == FOLDED and "initial_h" in u.reason and "not a parameter" in u.reason, u.reason
        assert "derived" not in u.reason and "no torch parameter" not in u.reason, u.reason


def test_a_learnable_initial_state_changed_to_zeros_is_not_called_a_constant(tmp_path):
    """dynamo folds h0.expand(...) into one initializer the GRU reads: zeroed, it is all zeros and read only
    as an initial state, but the module's h0 (no initializer holds it) may be it: it stays derived, and the
    verdict fails (the forward passes disagree)."""
    path, m, x = _export(tmp_path, True, learnable_h0=True)
    model = onnx.load(str(path))
    t = next(iter(_state_sources(model)))  # the GRU's, first in graph order
    init = next((i for i in model.graph.initializer if i.name == t), None)
    assert init is not None and numpy_helper.to_array(init).any()  # h0 expanded: not zeros as exported
    init.CopyFrom(numpy_helper.from_array(np.zeros_like(numpy_helper.to_array(init)), t))
    edited = tmp_path / "zeroed.onnx"
    onnx.save(model, str(edited))
    res = api.diff_grad_torch(edited, m, example_args=(x,))
    assert res.verdict()[0] == "fail", res.verdict()
    u = next(u for u in res.matching.unmatched_a if u.obs.name == f"{t}_grad")
    assert "not a parameter" not in u.reason, u.reason
