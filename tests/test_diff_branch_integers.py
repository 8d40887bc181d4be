"""Integer tensors inside If branches (Shape, Gather, Unsqueeze, Concat of a Reshape target) are accounted for
by ``diff --all``: compared where the two are provably one function of the data, unmatched with a reason
otherwise. They were listed nowhere (neither compared nor unmatched). A branch tensor records what it reads,
the outer-scope tensors its branch reads implicitly included, so that the integer checks of
``match.integers`` hold inside branches too: Gather(Shape(x), 0) of one model is never paired with
Gather(Shape(x), 1) of the other by op and shape."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from onnxprobe import api
from onnxprobe.graph.walk import walk
from onnxprobe.match.engine import DIFFERENT_FUNCTION, match
from onnxprobe.match.observe import observe

X0 = np.arange(1, 9, dtype=np.float32).reshape(2, 4)


def _model(path, k_then: int, k_else: int, prefix: str = "") -> str:
    """x = Relu(x0) [2, 4]; If c: then o = Relu(Reshape(x, [dim k_then of x, -1])), else the same with k_else;
    the target computed as Concat(Unsqueeze(Gather(Shape(x), k)), [-1]) inside the branch, reading x and
    the constant [-1] from the main graph, k and the axes from Constant nodes of its own."""
    i = lambda n, v: numpy_helper.from_array(np.array(v, np.int64), n)
    p = lambda n: prefix + n

    def branch(name: str, k: int, tag: str) -> onnx.GraphProto:
        t = lambda n: p(tag + n)
        nodes = [helper.make_node("Constant", [], [t("k")], value=numpy_helper.from_array(np.array(k, np.int64))),
                 helper.make_node("Constant", [], [t("ax")], value_ints=[0]),
                 helper.make_node("Shape", ["x"], [t("s")]), helper.make_node("Gather", [t("s"), t("k")], [t("g")], axis=0),
                 helper.make_node("Unsqueeze", [t("g"), t("ax")], [t("u")]),
                 helper.make_node("Concat", [t("u"), "m1"], [t("c")], axis=0),
                 helper.make_node("Reshape", ["x", t("c")], [t("r")]), helper.make_node("Relu", [t("r")], [t("o")])]
        return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(t("o"), T.FLOAT, None)])

    nodes = [helper.make_node("Relu", ["x0"], ["x"]),
             helper.make_node("If", ["c"], ["y"], then_branch=branch("then", k_then, "t"),
                              else_branch=branch("else", k_else, "e"))]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("c", T.BOOL, []),
                                       helper.make_tensor_value_info("x0", T.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)],
                          [i("m1", [-1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(onnx.shape_inference.infer_shapes(m), str(path))
    return str(path)


def _branch_tensors(path: str) -> set[str]:
    """Every tensor the branches compute from the data (constants are no layers)."""
    return {t for s in walk(onnx.load(path)) if s.chain and s.node.op_type != "Constant" for t in s.node.output if t}


def _diff(a: str, b: str, cond: bool):
    return api.diff(a, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                    inputs=api.InputSpec(arrays={"c": np.array(cond), "x0": X0}))


def _accounted(res, side: str) -> set[str]:
    paired = {getattr(r.pair, side).name for r in res.results}
    return paired | {u.obs.name for u in getattr(res.matching, f"unmatched_{side}")}


@pytest.mark.parametrize("cond", [True, False])
def test_branch_integers_of_one_function_are_compared(cond, tmp_path):
    a, b = _model(tmp_path / "a.onnx", 0, 1), _model(tmp_path / "b.onnx", 0, 1, "b_")
    res = _diff(a, b, cond)
    by = {r.pair.a.name: r for r in res.results}
    ran, idle = ("t", "e") if cond else ("e", "t")
    for n in ("s", "g", "u", "c"):  # paired with B's tensor of the same function
        assert by[ran + n].pair.b.name == "b_" + ran + n, (n, by.get(ran + n))
        assert by[ran + n].metrics is not None and by[ran + n].metrics.exact and by[ran + n].passed
        assert by[idle + n].passed is None and "did not run" in by[idle + n].problem
    assert _branch_tensors(a) <= _accounted(res, "a") and _branch_tensors(b) <= _accounted(res, "b")
    assert res.verdict()[0] == "pass"


def test_branch_integers_of_other_functions_are_unmatched_with_why(tmp_path):
    """Then branches: dim 0 of x against dim 1 of x; the Gather, its Unsqueeze and the Concat are other
    functions of the data (and so the Reshape and what follows: their shapes differ at run time)."""
    a, b = _model(tmp_path / "a.onnx", 0, 1), _model(tmp_path / "b.onnx", 1, 1, "b_")
    res = _diff(a, b, True)
    pairs = {(r.pair.a.name, r.pair.b.name) for r in res.results}
    assert not pairs & {("tg", "b_tg"), ("tu", "b_tu"), ("tc", "b_tc")}
    assert ("ts", "b_ts") in pairs and ("eg", "b_eg") in pairs  # Shape(x) is one function; so is the else branch
    why = {u.obs.name: u for u in res.matching.unmatched_a}
    for n in ("tg", "tu", "tc"):
        assert why[n].cause == DIFFERENT_FUNCTION and "b_" + n in why[n].reason, why[n]
    assert "reads 0 as operand 2 where b_tg reads 1" in why["tg"].reason  # the Gather's index, a Constant of its branch
    assert _branch_tensors(a) <= _accounted(res, "a") and _branch_tensors(b) <= _accounted(res, "b")


def test_branch_tensors_record_what_they_read(tmp_path):
    """A branch tensor's ``sources`` name the outer tensor its branch reads implicitly (x), and an integer
    tensor its values."""
    obs = {o.name: o for o in observe(onnx.load(_model(tmp_path / "a.onnx", 0, 1))).observables}
    assert obs["ts"].sources == ("x",) and obs["tg"].sources == ("ts",) and obs["tr"].sources == ("tc", "x")
    assert obs["tg"].values == (("d", "x", 0, 2),) and obs["eg"].values == (("d", "x", 1, 4),)
    assert obs["tr"].data and not obs["tg"].data
    m = match(list(obs.values()), observe(onnx.load(_model(tmp_path / "b.onnx", 1, 0, "b_"))).observables)
    assert not {(p.a.name, p.b.name) for p in m.pairs} & {("tg", "b_tg"), ("eg", "b_eg")}
