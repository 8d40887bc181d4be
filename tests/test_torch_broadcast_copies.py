"""`diff --vs-torch`: an Expand or Tile that copies a module's output to its own shape (a no-op broadcast:
``h.expand(b, t, d)`` of a [b, t, d] tensor, ``h.repeat(1, 1, 1)``) holds the values of the tensor it reads,
as a Reshape does; the tensor was listed as "an intermediate tensor", where a Reshape copy says whose values
it holds (QA). Told from the graph's structure (the shapes of the node's input and output), for both
exporters; an Expand that does broadcast stays an intermediate tensor. Oracle: onnxruntime's values of the
unmatched tensor against the paired one's, with every node output exposed."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402
from onnxprobe.match.engine import COPY  # noqa: E402


class Broadcasts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.mid = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        h = self.lin(x).expand(x.shape[0], 5, 8)  # to its own shape
        g = self.mid(h).repeat(1, 1, 1)  # likewise
        wide = self.head(torch.relu(g)).unsqueeze(1).expand(-1, 2, -1, -1)  # a real broadcast
        return wide.sum(1)


def _values(path) -> dict:
    model = onnx.load(str(path))
    have = {o.name for o in model.graph.output}
    for n in model.graph.node:
        model.graph.output.extend(onnx.ValueInfoProto(name=o) for o in n.output if o and o not in have)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess, model


@pytest.mark.parametrize("kind", ["legacy", "dynamo"])
def test_a_same_shape_expand_or_tile_is_a_copy(tmp_path, kind):
    if kind == "dynamo":
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    torch.manual_seed(0)
    m, x = Broadcasts().eval(), torch.randn(2, 5, 8)
    path = tmp_path / "m.onnx"
    kwargs = {"opset_version": 17} if kind == "legacy" else {}
    torch.onnx.export(m, (x,), str(path), dynamo=kind == "dynamo", input_names=["x"], **kwargs)
    res = api.diff_torch(path, m, example_args=(x,))
    paired = {p.a.name: p.b.name for p in res.matching.pairs}
    sess, model = _values(path)
    names = [o.name for o in sess.get_outputs()]
    vals = dict(zip(names, sess.run(names, {"x": x.numpy()})))
    un = {u.obs.name: u for u in res.matching.unmatched_a}
    copies = [n for n in model.graph.node if n.op_type in ("Expand", "Tile")
              and np.shape(vals[n.output[0]]) == np.shape(vals[n.input[0]]) and n.output[0] in un]
    assert {n.op_type for n in copies} == {"Expand", "Tile"}, [(n.op_type, n.output[0]) for n in copies]
    for n in copies:
        u = un[n.output[0]]
        assert u.cause == COPY, (n.op_type, u.reason)
        src = next(t for t in paired if repr(t) in u.reason)  # the paired tensor whose values it holds
        assert np.array_equal(vals[n.output[0]], vals[src]), (n.op_type, u.reason)
    wide = [n for n in model.graph.node if n.op_type == "Expand"
            and np.shape(vals[n.output[0]]) != np.shape(vals[n.input[0]]) and n.output[0] in un]
    assert wide and all(un[n.output[0]].cause != COPY for n in wide)
    assert res.verdict()[0] == "pass"
