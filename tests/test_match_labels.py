"""A pair's op is the op that produced the tensor: a Flatten (or Reshape, MaxPool) run on a QOperator model's
uint8 tensor is labelled Flatten, not the op of the QLinear layer before it (a QOperator Reshape read
"Mul" on a real model). The oracle is the producing node's op_type in each graph."""

from __future__ import annotations

import onnx

from conftest import sample_path
from onnxprobe import api
from quantize_fixtures import quantize


def test_ops_on_quantized_values_keep_their_own_op(tmp_path):
    q = quantize("cnn", "qoperator", tmp_path)
    res = api.diff(str(q), str(sample_path("cnn")), selection=api.Selection(all=True),
                   config=api.RunConfig(device="cpu", cache=False))
    made_by = {o: n.op_type for n in onnx.load(str(q)).graph.node for o in n.output}
    moved = [r for r in res.results if made_by.get(r.pair.a.name) in ("Flatten", "Reshape", "MaxPool", "Transpose")]
    assert moved, [r.pair.a.name for r in res.results]
    for r in moved:
        assert r.pair.a.effective_op == made_by[r.pair.a.name], (r.pair.a.name, r.pair.a.effective_op)
