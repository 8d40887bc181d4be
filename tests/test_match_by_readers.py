"""A GELU one exporter spells out (torch's legacy exporter: Div, Erf, Add, Mul, Mul) and the other writes as one Gelu
node (dynamo, opset 20): no name, op or place in common, so the GELU's output was compared nowhere, and a bug inside it
read as the next Gemm's error ('error starts at y (Gemm)', intro 16 dB, where that Gemm is exact). The paired Gemms
read them at the same place, and the spelled-out region is computed from what the Gelu reads, alone: they pair, and
the region's inside is folded into the Gelu. Oracle: numpy float64 of the GELU on A's first Gemm's output."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api

RNG = np.random.default_rng(7)
W1, B1 = RNG.standard_normal((8, 16)).astype(np.float32), RNG.standard_normal(16).astype(np.float32)
W2, B2 = RNG.standard_normal((16, 4)).astype(np.float32), RNG.standard_normal(4).astype(np.float32)
X = RNG.standard_normal((2, 8)).astype(np.float32)


def _save(path, nodes, opset) -> str:
    inits = [numpy_helper.from_array(v, n) for n, v in (("W1", W1), ("B1", B1), ("W2", W2), ("B2", B2))]
    inits += [numpy_helper.from_array(np.float32(v), n) for n, v in (("sqrt2", math.sqrt(2)), ("half", 0.5))]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
    return str(path)


def _spelled_out(path, one: float = 1.0, also: bool = False) -> str:
    """A: Gemm -> x * 0.5 * (1 + erf(x / sqrt 2)) -> Gemm; ``one``: the 1 added to erf (1 is GELU); ``also``: the mean
    of the graph input added to the erf too (the region then reads another tensor than the Gelu does)."""
    nodes = [helper.make_node("Gemm", ["x", "W1", "B1"], ["h"], name="fc1"),
             helper.make_node("Div", ["h", "sqrt2"], ["d"], name="div"), helper.make_node("Erf", ["d"], ["e"], name="erf")]
    if also:
        nodes += [helper.make_node("ReduceMean", ["x"], ["xm"], name="mean", axes=[1], keepdims=1),
                  helper.make_node("Add", ["e", "xm"], ["e2"], name="also")]
    nodes += [helper.make_node("Add", ["e2" if also else "e", "one"], ["a"], name="add"),
              helper.make_node("Mul", ["h", "a"], ["m"], name="mul"), helper.make_node("Mul", ["m", "half"], ["g"], name="mul1"),
              helper.make_node("Gemm", ["g", "W2", "B2"], ["y"], name="fc2")]
    path = _save(path, nodes, 17)
    m = onnx.load(path)
    m.graph.initializer.append(numpy_helper.from_array(np.float32(one), "one"))
    onnx.save(m, path)
    return path


def _one_node(path) -> str:
    nodes = [helper.make_node("Gemm", ["x", "W1", "B1"], ["linear"], name="node_linear"),
             helper.make_node("Gelu", ["linear"], ["gelu"], name="node_gelu"),
             helper.make_node("Gemm", ["gelu", "W2", "B2"], ["y"], name="node_linear_1")]
    return _save(path, nodes, 20)


@pytest.mark.parametrize("one", [1.0, 0.8])
def test_a_spelled_out_gelu_pairs_with_one_gelu_node_and_a_bug_inside_it_is_where_the_error_starts(tmp_path, one):
    a, b = _spelled_out(tmp_path / "a.onnx", one), _one_node(tmp_path / "b.onnx")
    res = api.diff(a, b, selection=api.Selection(all=True), inputs=api.InputSpec(arrays={"x": X}))
    by_b = {r.pair.b.name: r for r in res.results}
    assert by_b["gelu"].pair.a.name == "g", [(r.pair.a.name, r.pair.b.name) for r in res.results]
    folded = {u.obs.name: u for u in res.unmatched_in("a")}
    assert set(folded) == {"d", "e", "a", "m"} and all(u.cause == "folded" and "Gelu" in u.reason for u in folded.values()), folded
    h = X.astype(np.float64) @ W1 + B1
    want_b = h * 0.5 * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))
    got_a = h * 0.5 * (one + np.vectorize(math.erf)(h / math.sqrt(2)))
    if one == 1.0:
        assert res.verdict()[0] == "pass"
        return
    sqnr = 10 * math.log10((want_b ** 2).sum() / ((got_a - want_b) ** 2).sum())
    r = by_b["gelu"]
    assert r.introduced is not None and r.introduced.sqnr_db == pytest.approx(sqnr, abs=0.05), (r.introduced, sqnr)
    assert res.first_failure.pair.b.name == "gelu"  # not the next Gemm, which is exact on A's values
    assert by_b["y"].introduced.exact


def test_a_region_that_reads_another_tensor_is_not_the_gelu(tmp_path):
    """The spelled-out GELU adds the input's mean to its erf: another function of the data than B's Gelu, which reads
    the Gemm's output alone: no pair, and nothing is said to be folded into it."""
    a, b = _spelled_out(tmp_path / "a.onnx", also=True), _one_node(tmp_path / "b.onnx")
    res = api.diff(a, b, selection=api.Selection(all=True), inputs=api.InputSpec(arrays={"x": X}))
    assert "gelu" not in {r.pair.b.name for r in res.results}
    assert not any(u.cause == "folded" for u in res.unmatched_in("a"))


def test_two_nodes_against_one_of_an_op_never_written_out_are_other_functions(tmp_path):
    """x -> Neg -> Relu against x -> Abs, both read by paired Gemms: Abs is no op that is written out as several
    nodes, so the two stay unpaired (another function of the data, not one op spelled two ways)."""
    def model(path, ops):
        nodes = [helper.make_node("Gemm", ["x", "W1", "B1"], ["h"], name="fc1")]
        prev = "h"
        for k, op in enumerate(ops):
            nodes.append(helper.make_node(op, [prev], [f"t{k}"], name=f"n{k}"))
            prev = f"t{k}"
        nodes.append(helper.make_node("Gemm", [prev, "W2", "B2"], ["y"], name="fc2"))
        return _save(path, nodes, 17)

    res = api.diff(model(tmp_path / "a.onnx", ["Neg", "Relu"]), model(tmp_path / "b.onnx", ["Abs"]),
                   selection=api.Selection(all=True), inputs=api.InputSpec(arrays={"x": X}))
    assert {(r.pair.a.name, r.pair.b.name) for r in res.results} == {("h", "h"), ("y", "y")}


def test_the_readers_other_input_is_never_the_one_node(tmp_path):
    """y = fc2(gelu(h) - log(h h + 1)) in A, GELU spelled out; fc2(Gelu(h) - tanh(sigmoid(h))) in B. The Subs pair,
    and each reads two tensors computed from h alone: what a node reads is a set (sorted by name), so a pairing by
    place paired A's log branch with B's Gelu ('error starts at' the Gelu, which both compute alike). The GELU
    pairs with the region that is a GELU's written-out form, and the branches stay apart."""
    def a_model(path):
        nodes = [helper.make_node("Gemm", ["x", "W1", "B1"], ["h"], name="fc1"),
                 helper.make_node("Div", ["h", "sqrt2"], ["zd"], name="div"), helper.make_node("Erf", ["zd"], ["ze"], name="erf"),
                 helper.make_node("Add", ["ze", "one"], ["za"], name="add"), helper.make_node("Mul", ["h", "za"], ["zm"], name="mul"),
                 helper.make_node("Mul", ["zm", "half"], ["zz_gelu"], name="mul1"),
                 helper.make_node("Mul", ["h", "h"], ["a_sq"], name="sq"), helper.make_node("Add", ["a_sq", "one"], ["a_sq1"], name="sq1"),
                 helper.make_node("Log", ["a_sq1"], ["a_log"], name="log"),
                 helper.make_node("Sub", ["zz_gelu", "a_log"], ["d"], name="sub"),
                 helper.make_node("Gemm", ["d", "W2", "B2"], ["y"], name="fc2")]
        path = _save(path, nodes, 17)
        m = onnx.load(path)
        m.graph.initializer.append(numpy_helper.from_array(np.float32(1.0), "one"))
        onnx.save(m, path)
        return path

    def b_model(path):
        nodes = [helper.make_node("Gemm", ["x", "W1", "B1"], ["linear"], name="node_linear"),
                 helper.make_node("Gelu", ["linear"], ["gelu"], name="node_gelu"),
                 helper.make_node("Sigmoid", ["linear"], ["s"], name="sig"), helper.make_node("Tanh", ["s"], ["t"], name="tanh"),
                 helper.make_node("Sub", ["gelu", "t"], ["d"], name="sub"),
                 helper.make_node("Gemm", ["d", "W2", "B2"], ["y"], name="fc2")]
        return _save(path, nodes, 20)

    res = api.diff(a_model(tmp_path / "a.onnx"), b_model(tmp_path / "b.onnx"), selection=api.Selection(all=True),
                   inputs=api.InputSpec(arrays={"x": X}))
    pairs = {r.pair.b.name: r.pair.a.name for r in res.results}
    assert pairs.get("gelu") == "zz_gelu", pairs
    assert "a_log" not in pairs.values() and "t" not in pairs, pairs
    assert res.results[[r.pair.b.name for r in res.results].index("gelu")].passed
