"""graph.merge.side_by_side: two models in one graph, neither touched, each computing bitwise what it
computes alone (onnxruntime, optimisations off), in a topologically sorted graph that the checker
accepts; names inside If/Loop bodies renamed with their uses."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from conftest import SAMPLE_NAMES, sample_feeds, sample_path
from onnxprobe.graph.merge import NotMergeable, side_by_side


def _run(model: onnx.ModelProto, feeds: dict, outputs: list[str] | None = None) -> dict:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = outputs or [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(names, feeds)))


def _perturbed(m: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(m)
    rng = np.random.default_rng(0)
    for t in out.graph.initializer:
        if t.data_type == onnx.TensorProto.FLOAT and int(np.prod(t.dims)) > 4:
            a = onnx.numpy_helper.to_array(t)
            t.CopyFrom(onnx.numpy_helper.from_array((a * (1 + 1e-2 * rng.standard_normal(a.shape))).astype(a.dtype), t.name))
    return out


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_both_models_compute_what_they_compute_alone(name):
    a = onnx.load(str(sample_path(name)))
    b = _perturbed(a)
    before = (a.SerializeToString(), b.SerializeToString())
    merged, an, bn = side_by_side(a, b, [])
    assert (a.SerializeToString(), b.SerializeToString()) == before  # neither input is touched
    onnx.checker.check_model(merged)
    feeds = sample_feeds(name)
    alone_a, alone_b = _run(a, feeds), _run(b, feeds)
    both = _run(merged, feeds, [an[o] for o in alone_a] + [bn[o] for o in alone_b])
    for o, v in alone_a.items():
        np.testing.assert_array_equal(both[an[o]], v)
    for o, v in alone_b.items():
        np.testing.assert_array_equal(both[bn[o]], v)
    assert set(an.values()).isdisjoint(set(bn.values()) - {i.name for i in a.graph.input})


def test_lockstep_order_keeps_pairs_together():
    a = onnx.load(str(sample_path("mlp")))
    pairs = [(n.output[0], n.output[0]) for n in a.graph.node]
    merged, an, bn = side_by_side(a, a, pairs)
    order = {o: k for k, n in enumerate(merged.graph.node) for o in n.output}
    for x, y in pairs:  # each pair's producers sit next to each other
        assert abs(order[an[x]] - order[bn[y]]) == 1


def test_different_opsets_are_refused():
    a = onnx.load(str(sample_path("mlp")))
    b = onnx.ModelProto()
    b.CopyFrom(a)
    b.opset_import[0].version = a.opset_import[0].version - 1
    with pytest.raises(NotMergeable, match="different versions"):
        side_by_side(a, b, [])
