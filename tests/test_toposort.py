"""graph.walk.kahn / toposort: one linear topological pass, shared by the backward graphs' ordering and
the cycle check of graph.integrity."""

from __future__ import annotations

import random

from onnx import helper

from onnxprobe.graph.walk import kahn, toposort


def _chain(n: int) -> list:
    return [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"n{i}") for i in range(n)]


def test_a_shuffled_chain_comes_back_in_order():
    nodes = _chain(300)
    shuffled = nodes[:]
    random.Random(0).shuffle(shuffled)
    assert [n.name for n in toposort(shuffled, {"t0"})] == [n.name for n in nodes]


def test_a_graph_in_order_keeps_it_and_waiting_nodes_go_last_in_their_order():
    nodes = _chain(5)
    extra = [helper.make_node("Add", ["t2", "missing"], ["u"], name="needs_missing"),
             helper.make_node("Neg", ["u"], ["v"], name="after_it"), helper.make_node("Neg", ["t0"], ["w"], name="free")]
    got = [n.name for n in toposort(nodes + extra, {"t0"})]
    assert got == ["n0", "n1", "n2", "n3", "n4", "free", "needs_missing", "after_it"]


def test_kahn_reports_the_nodes_a_cycle_holds():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Add", ["a", "c"], ["b"]),
             helper.make_node("Relu", ["b"], ["c"]), helper.make_node("Relu", ["c"], ["d"])]
    order, stuck = kahn(nodes, {"x"}.__contains__)
    assert order == [0] and stuck == [1, 2, 3]
