"""A TopK with sorted=0 returns its K values (and indices) in an order the spec leaves open: onnxruntime's
CPU kernel leaves them as its selection does, onnx.reference sorts them. diff compared them position by
position and failed a correct model (`diff topk.onnx --vs-reference`: values at 31.7 dB, indices at 3 dB,
outputs FAIL). Now such a pair, and what an elementwise op computes from it, is compared as sorted along
the TopK's axis; a sorted=1 TopK is compared as it is, and a wrong K value still fails. Oracle: numpy's
sort of the input."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api

V = helper.make_tensor_value_info
F = TensorProto.FLOAT
N, K = 400, 40


def _topk(path, sorted_: int, scale: float = 1.0, perm=None) -> str:
    """values, indices = TopK(x * scale, K, axis=1, sorted); y = Relu(values) * 2; z = Cast(indices) * values;
    with ``perm``, values and indices pass through a Gather by that permutation (another runtime's order)."""
    raw = ("v0", "i0") if perm is not None else ("values", "indices")
    nodes = [helper.make_node("Mul", ["x", "s"], ["xs"], name="scale"),
             helper.make_node("TopK", ["xs", "k"], list(raw), axis=1, sorted=sorted_, name="topk")]
    inits = [numpy_helper.from_array(np.array([K], np.int64), "k"), numpy_helper.from_array(np.array(scale, np.float32), "s"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    if perm is not None:
        inits.append(numpy_helper.from_array(np.asarray(perm, np.int64), "perm"))
        nodes += [helper.make_node("Gather", ["v0", "perm"], ["values"], axis=1, name="pv"),
                  helper.make_node("Gather", ["i0", "perm"], ["indices"], axis=1, name="pi")]
    nodes += [helper.make_node("Relu", ["values"], ["r"], name="relu"),
              helper.make_node("Mul", ["r", "two"], ["y"], name="double"),
              helper.make_node("Cast", ["indices"], ["fi"], to=F, name="cast"),
              helper.make_node("Mul", ["fi", "values"], ["z"], name="weigh")]
    outs = [V("values", F, [2, K]), V("indices", TensorProto.INT64, [2, K]), V("y", F, [2, K]), V("z", F, [2, K])]
    onnx.save(make_model(nodes, [V("x", F, [2, N])], outs, inits), path)
    return str(path)


X = np.random.default_rng(0).standard_normal((2, N)).astype(np.float32)
CPU = api.RunConfig(device="cpu")


def _inputs():
    return api.InputSpec(arrays={"x": X})


def test_onnxruntime_really_leaves_unsorted_topk_unsorted(tmp_path):
    import onnxruntime as ort

    s = ort.InferenceSession(_topk(tmp_path / "u.onnx", 0), providers=["CPUExecutionProvider"])
    v, i, _, _ = s.run(None, {"x": X})
    assert not np.all(np.diff(v, axis=1) <= 0)  # else the tests below would prove nothing
    assert np.array_equal(np.sort(v, axis=1), np.sort(X, axis=1)[:, -K:])  # the same K values: numpy's oracle


@pytest.mark.parametrize("fuse", [True, False])
def test_unsorted_topk_against_sorted_passes(tmp_path, fuse):
    res = api.diff(_topk(tmp_path / "u.onnx", 0), _topk(tmp_path / "s.onnx", 1), selection=api.Selection(all=True),
                   config=CPU, inputs=_inputs(), fuse=fuse)
    by = {r.pair.a.name: r for r in res.results}
    assert {"values", "indices", "y", "z"} <= set(by)
    assert all(by[n].passed and by[n].metrics.exact for n in ("values", "indices", "y", "z")), \
        {n: (r.passed, r.metrics.max_abs) for n, r in by.items()}
    assert res.verdict()[0] == "pass", res.verdict()
    assert any("sorted=0" in n for n in res.notes), res.notes


def test_unsorted_topk_against_the_reference_evaluator_passes(tmp_path):
    res = api.diff(_topk(tmp_path / "u.onnx", 0), vs_reference=True, config=CPU, inputs=_inputs())
    assert res.verdict()[0] == "pass", res.verdict()


def test_unsorted_topk_against_saved_values_in_another_order(tmp_path):
    m = _topk(tmp_path / "u.onnx", 0)
    ref = _topk(tmp_path / "ref.onnx", 0, perm=list(range(K))[::-1])  # the same values, another order
    import onnxruntime as ort

    got = dict(zip(["values", "indices", "y", "z"], ort.InferenceSession(ref, providers=["CPUExecutionProvider"]).run(None, {"x": X})))
    res = api.diff(m, vs_npz={**got, "x": X}, config=CPU, inputs=_inputs(), selection=api.Selection(all=True))
    assert res.verdict()[0] == "pass", (res.verdict(), [(r.pair.a.name, r.passed) for r in res.results])


def test_a_wrong_value_still_fails(tmp_path):
    res = api.diff(_topk(tmp_path / "u.onnx", 0), _topk(tmp_path / "s.onnx", 1, scale=1.01), config=CPU, inputs=_inputs(),
                   selection=api.Selection(all=True))
    by = {r.pair.a.name: r for r in res.results}
    assert by["values"].passed is False and by["indices"].metrics.exact  # the same positions, other values
    assert res.verdict()[0] == "fail"


def test_sorted_topk_is_compared_in_order(tmp_path):
    """sorted=1 on both sides: the order is part of the result, and a permuted copy fails."""
    res = api.diff(_topk(tmp_path / "s.onnx", 1), _topk(tmp_path / "p.onnx", 1, perm=list(range(K))[::-1]),
                   config=CPU, inputs=_inputs(), user_map={"values": "values"})
    assert res.verdict()[0] == "fail", res.verdict()
    assert not any("sorted=0" in n for n in res.notes)


def _topk_in_bodies(path, sorted_: int, loop: bool = True) -> str:
    """The TopK inside control flow: an If whose branches each return TopK(x) (the If's outputs v and i,
    then r = Relu(v)), and a Loop whose scan output stacks each iteration's TopK values (vs: [3, 2, K])."""
    def topk(outs, name):
        return helper.make_node("TopK", ["x", "k"], outs, axis=1, sorted=sorted_, name=name)

    def branch(p):
        return helper.make_graph([topk([f"{p}v", f"{p}i"], f"topk_{p}")], p, [],
                                 [V(f"{p}v", F, None), V(f"{p}i", TensorProto.INT64, None)])

    body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]), topk(["bv", "bi"], "topk_body")], "body",
                             [V("it", TensorProto.INT64, []), V("c_in", TensorProto.BOOL, [])],
                             [V("c_out", TensorProto.BOOL, []), V("bv", F, [2, K])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="sum"),
             helper.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
             helper.make_node("If", ["c"], ["v", "i"], then_branch=branch("t"), else_branch=branch("e"), name="if"),
             helper.make_node("Relu", ["v"], ["r"], name="relu")]
    nodes += [helper.make_node("Loop", ["n", "true"], ["vs"], body=body, name="loop")] if loop else []
    inits = [numpy_helper.from_array(np.array([K], np.int64), "k"), numpy_helper.from_array(np.array(0, np.float32), "zero"),
             numpy_helper.from_array(np.array(3, np.int64), "n"), numpy_helper.from_array(np.array(True), "true")]
    outs = [V("r", F, [2, K]), V("i", TensorProto.INT64, [2, K])] + ([V("vs", F, [3, 2, K])] if loop else [])
    onnx.save(make_model(nodes, [V("x", F, [2, N])], outs, inits), path)
    return str(path)


def test_unsorted_topk_inside_if_branches_and_loop_bodies(tmp_path):
    """A sorted=0 TopK in an If branch (its tensors there, the If's outputs and what follows) or in a Loop body
    (the scan output stacking its values: the TopK's axis one further along) leaves the same order open; they
    were compared position by position, and a correct model failed (the If's values 25 dB, outputs FAIL)."""
    res = api.diff(_topk_in_bodies(tmp_path / "u.onnx", 0), _topk_in_bodies(tmp_path / "s.onnx", 1), config=CPU,
                   inputs=_inputs(), selection=api.Selection(all=True))
    by = {r.pair.a.name: r for r in res.results}
    ran = "tv" if by["tv"].metrics is not None else "ev"  # the branch x's sum chose
    names = (ran, ran[0] + "i", "v", "i", "r", "vs")
    assert all(by[n].passed and by[n].metrics.exact for n in names), \
        {n: (r.passed, r.metrics and r.metrics.max_abs) for n, r in by.items()}
    assert res.verdict()[0] == "pass", res.verdict()
    # against onnx.reference, whose Loop now stacks its scan outputs ([3, 2, K]; its own joined them: [6, K])
    res = api.diff(_topk_in_bodies(tmp_path / "r.onnx", 0), vs_reference=True, config=CPU, inputs=_inputs(),
                   selection=api.Selection(all=True))
    assert res.verdict()[0] == "pass", (res.verdict(), [(r.pair.a.name, r.passed) for r in res.results])
    assert {r.pair.a.name: r.passed for r in res.results}["vs"] is True


def _topk_in_scan(path, sorted_: int) -> str:
    """A Scan over 3 copies of x ([3, 2, N]) whose body returns TopK(x, K, axis=1) values, stacked along scan
    output axes 1 (ws0: [2, 3, K], the TopK's axis now 2), -1 (ws1: [2, K, 3], still 1) and 2 (ws2: [2, K, 3])."""
    body = helper.make_graph([helper.make_node("TopK", ["xe", "k"], ["bv", "bi"], axis=1, sorted=sorted_, name="topk_scan"),
                              helper.make_node("Identity", ["bv"], ["b1"]), helper.make_node("Identity", ["bv"], ["b2"])],
                             "scan_body", [V("xe", F, [2, N])], [V("bv", F, [2, K]), V("b1", F, [2, K]), V("b2", F, [2, K])])
    nodes = [helper.make_node("Concat", ["x", "x", "x"], ["x3"], axis=0, name="cat"),
             helper.make_node("Reshape", ["x3", "shape"], ["xs"], name="stack"),
             helper.make_node("Scan", ["xs"], ["ws0", "ws1", "ws2"], body=body, num_scan_inputs=1,
                              scan_output_axes=[1, -1, 2], name="scan")]
    inits = [numpy_helper.from_array(np.array([K], np.int64), "k"), numpy_helper.from_array(np.array([3, 2, N], np.int64), "shape")]
    outs = [V("ws0", F, [2, 3, K]), V("ws1", F, [2, K, 3]), V("ws2", F, [2, K, 3])]
    onnx.save(make_model(nodes, [V("x", F, [2, N])], outs, inits), path)
    return str(path)


def test_unsorted_topk_in_a_scan_with_scan_output_axes(tmp_path):
    """A Scan's scan output stacked along another axis than 0 moves the TopK's axis only where the new axis
    comes first; such outputs were compared position by position, and a correct model failed (against a
    sorted=1 copy, or against onnx.reference, which now runs such a Scan)."""
    res = api.diff(_topk_in_scan(tmp_path / "u.onnx", 0), _topk_in_scan(tmp_path / "s.onnx", 1), config=CPU, inputs=_inputs())
    by = {r.pair.a.name: r for r in res.results}
    assert all(by[n].passed and by[n].metrics.exact for n in ("ws0", "ws1", "ws2")), \
        {n: (r.passed, r.metrics and r.metrics.max_abs) for n, r in by.items()}
    res = api.diff(tmp_path / "u.onnx", vs_reference=True, config=CPU, inputs=_inputs())
    assert res.verdict()[0] == "pass", (res.verdict(), [(r.pair.a.name, r.passed, r.problem) for r in res.results])
