"""grad on a graph of many small nodes does work linear in the node count where it learns the run's shapes
(``grad_plan._runtime_shapes``): it read every graph's value_info once per node of it, so a chain of 20,000
nodes spent minutes there. Counted, not timed: how many times a graph's value_info is read."""

from __future__ import annotations

import importlib

import numpy as np
from onnx import TensorProto, helper

from onnxprobe.graph.shapes import infer_shapes
from onnxprobe.graph.walk import walk

grad_plan = importlib.import_module("onnxprobe.api.grad_plan")  # the module (api.grad_plan is its function)


def _chain(n: int):
    nodes = [helper.make_node("Relu" if i % 2 else "Neg", [f"t{i - 1}" if i else "x"], [f"t{i}"], name=f"n{i}")
             for i in range(n)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info(f"t{n - 1}", TensorProto.FLOAT, [2, 3])])
    return infer_shapes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


class _Counted:
    """A graph whose value_info reads are counted (everything else is the graph's own)."""

    def __init__(self, graph, reads: list):
        object.__setattr__(self, "_g", graph)
        object.__setattr__(self, "_reads", reads)

    def __getattr__(self, name):
        if name == "value_info":
            self._reads.append(1)
        return getattr(self._g, name)


def test_runtime_shapes_read_each_graph_once(monkeypatch):
    reads: list = []
    proxies: dict = {}

    def counted_walk(model):
        sites = walk(model)
        for s in sites:
            s.graph = proxies.setdefault(id(s.graph), _Counted(s.graph, reads))
        return sites

    monkeypatch.setattr(grad_plan, "walk", counted_walk)
    out = grad_plan._runtime_shapes(_chain(300), {"x": np.ones((2, 3), np.float32)}, [], cache=False)
    assert len(out.graph.node) == 300
    assert len(reads) <= 2, len(reads)  # once per graph (one graph here), not once per node
