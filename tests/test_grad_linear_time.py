"""grad on a graph of many small nodes takes time linear in the node count: learning the run's shapes
(``grad_plan._runtime_shapes``) read every graph's value_info once per node of it, so a chain of 20,000
nodes spent minutes there (5.8 s at 6,000 nodes against 0.26 s at 1,000: 22x for 6x the nodes)."""

from __future__ import annotations

import time

import numpy as np
from onnx import TensorProto, helper

from onnxprobe.api.grad_plan import _runtime_shapes
from onnxprobe.graph.shapes import infer_shapes


def _chain(n: int):
    nodes = [helper.make_node("Relu" if i % 2 else "Neg", [f"t{i - 1}" if i else "x"], [f"t{i}"], name=f"n{i}")
             for i in range(n)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info(f"t{n - 1}", TensorProto.FLOAT, [2, 3])])
    return infer_shapes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


def _seconds(n: int) -> float:
    m, feed = _chain(n), {"x": np.ones((2, 3), np.float32)}
    best = float("inf")
    for _ in range(2):
        t = time.perf_counter()
        out = _runtime_shapes(m, feed, [], cache=False)
        best = min(best, time.perf_counter() - t)
    assert len(out.graph.node) == n
    return best


def test_runtime_shapes_are_linear_in_the_nodes():
    small, large = _seconds(1000), _seconds(6000)
    # linear: ~6x; reading value_info per node made it 20x and more
    assert large < 12 * small, (small, large)
