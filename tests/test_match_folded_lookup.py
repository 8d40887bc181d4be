"""A lookup of an embedding table at constant indices (BERT's token types and positions, GPT-2's positions) that a
tool folded into a weight of the output's size (onnxruntime's basic level: 256 values of a 64-value table): the Add
reading it was "another layer, whatever the values" (a weight of 256 elements against one of 64), and everything
after it "another function of the data" (50 tensors of a BERT's basic copy against itself, all bit-identical; 3 pairs
of a GPT-2's legacy export against its dynamo one). A weight read through a Gather, Expand or Tile tells no size.
The oracle: the two models' tensors from plain onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from conftest import saved_and_ort_copy
from onnxprobe import api
from test_diff import _run_with_outputs


def _models(tmp_path) -> tuple[str, str]:
    rng = np.random.default_rng(0)
    inits = [nh.from_array(rng.standard_normal((2, 32)).astype(np.float32), "table"),
             nh.from_array(np.array([[0, 1, 1, 0, 1, 0, 0, 1]], np.int64), "types"),
             nh.from_array(rng.uniform(0.5, 1.5, 32).astype(np.float32), "gamma"),
             nh.from_array(rng.uniform(-0.3, 0.3, 32).astype(np.float32), "beta"),
             nh.from_array(rng.standard_normal((32, 16)).astype(np.float32), "W")]
    nodes = [h.make_node("Gather", ["table", "types"], ["emb"], name="lookup"), h.make_node("Add", ["x", "emb"], ["s"], name="add"),
             h.make_node("LayerNormalization", ["s", "gamma", "beta"], ["ln"], axis=-1, name="ln"),
             h.make_node("MatMul", ["ln", "W"], ["mm"], name="mm"), h.make_node("Relu", ["mm"], ["y"], name="relu")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 8, 32])], [h.make_tensor_value_info("y", T.FLOAT, [1, 8, 16])], inits)
    return saved_and_ort_copy(g, tmp_path, "basic")


def test_an_add_of_a_folded_lookup_pairs_and_so_does_what_follows(tmp_path):
    a, b = _models(tmp_path)
    assert "lookup" not in {n.name for n in onnx.load(a).graph.node}  # folded into a 1x8x32 weight
    x = np.random.default_rng(1).standard_normal((1, 8, 32)).astype(np.float32)
    res = api.diff(a, b, selection=api.Selection(all=True), inputs=api.InputSpec(arrays={"x": x}),
                   config=api.RunConfig(device="cpu", cache=False))
    pairs = {r.pair.a.name: r.pair.b.name for r in res.results}
    assert {"s", "ln", "mm", "y"} <= set(pairs.values()), (pairs, [(u.obs.name, u.reason) for u in res.unmatched_in("a")])
    assert not [u for u in res.unmatched_in("a") + res.unmatched_in("b") if u.cause == "different-function"]
    for r in res.results:  # the oracle: each pair holds the same values
        va, vb = _run_with_outputs(a, [r.pair.a.name], {"x": x}), _run_with_outputs(b, [r.pair.b.name], {"x": x})
        assert np.array_equal(va[r.pair.a.name], vb[r.pair.b.name]), r.pair
    assert res.verdict()[0] == "pass"
