"""grad --check runs in float64 on models with control flow: ``to_float64`` converts the If / Loop / Scan
bodies too (their float32 Constants, Cast targets, inputs, outputs and value_info, nested bodies included),
so the check is not pushed back to float32 (tolerance 5e-2) by a body typed float32 inside a float64
graph. Oracle: the gradients of the loss written out in numpy float64."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.api.grad_plan import GradSpec
from onnxprobe.autodiff.check import to_float64

F = TensorProto.FLOAT
RNG = np.random.default_rng(5)
W = RNG.standard_normal((1, 4)).astype(np.float32)
X = RNG.standard_normal((1, 4)).astype(np.float32)
vi = helper.make_tensor_value_info


def _const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value, np.float32)))


def _step_body(name, inputs, s_in, s_out, extra_outputs=()):
    """s_out = Cast(tanh(s_in * W + 0.5), float): a Constant, a Cast to float and a value_info in the body."""
    nodes = [_const(f"{name}_c", 0.5), helper.make_node("Mul", [s_in, "W"], [f"{name}_m"]),
             helper.make_node("Add", [f"{name}_m", f"{name}_c"], [f"{name}_a"]),
             helper.make_node("Tanh", [f"{name}_a"], [f"{name}_t"]),
             helper.make_node("Cast", [f"{name}_t"], [s_out], to=F)]
    return nodes, [vi(f"{name}_m", F, [1, 4])]


def _step(s):
    return np.tanh(s * W.astype(np.float64) + 0.5)


def _oracle(x, trips):
    """(loss, dL/dW) of loss = sum(s_trips), s_0 = x, s_k = tanh(s_{k-1} W + 0.5), in float64."""
    w = W.astype(np.float64)
    states = [x.astype(np.float64)]
    for _ in range(trips):
        states.append(_step(states[-1]))
    ds, dw = np.ones_like(states[0]), np.zeros_like(w)
    for k in range(trips, 0, -1):
        da = ds * (1 - states[k] ** 2)
        dw += da * states[k - 1]
        ds = da * w
    return float(states[-1].sum()), dw


def _loop():
    nodes, info = _step_body("b", [], "s_in", "s_out")
    nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    body = helper.make_graph(nodes, "body", [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
                                             vi("s_in", F, [1, 4])],
                             [vi("cond_out", TensorProto.BOOL, []), vi("s_out", F, [1, 4])], value_info=info)
    return make_model([helper.make_node("Loop", ["n", "cond", "x"], ["y"], body=body)], [vi("x", F, [1, 4])],
                      [vi("y", F, [1, 4])], [numpy_helper.from_array(W, "W"),
                                             numpy_helper.from_array(np.array(3, np.int64), "n"),
                                             numpy_helper.from_array(np.array(True), "cond")]), 3


def _scan():
    """Scan over 2 steps of a sequence that is not read: the carried state makes the 2 steps; the scan
    output is the state too (one float body output per iteration)."""
    nodes, info = _step_body("b", [], "s_in", "s_out")
    nodes.append(helper.make_node("Identity", ["s_out"], ["scan_out"]))
    body = helper.make_graph(nodes, "body", [vi("s_in", F, [1, 4]), vi("e", F, [1])],
                             [vi("s_out", F, [1, 4]), vi("scan_out", F, [1, 4])], value_info=info)
    seq = numpy_helper.from_array(np.zeros((2, 1), np.float32), "seq")
    return make_model([helper.make_node("Scan", ["x", "seq"], ["y", "all"], body=body, num_scan_inputs=1)],
                      [vi("x", F, [1, 4])], [vi("y", F, [1, 4])], [numpy_helper.from_array(W, "W"), seq]), 2


def _nested_if():
    """If (true) whose then branch holds another If (true) that runs the step once; else: Identity."""
    inner_then_nodes, info = _step_body("t", [], "x", "inner_y")
    inner_then = helper.make_graph(inner_then_nodes, "inner_then", [], [vi("inner_y", F, [1, 4])], value_info=info)
    inner_else = helper.make_graph([helper.make_node("Identity", ["x"], ["inner_e"])], "inner_else", [],
                                   [vi("inner_e", F, [1, 4])])
    then = helper.make_graph([helper.make_node("If", ["flag"], ["then_y"], then_branch=inner_then,
                                               else_branch=inner_else)], "then", [], [vi("then_y", F, [1, 4])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["else_y"])], "else", [], [vi("else_y", F, [1, 4])])
    return make_model([helper.make_node("If", ["flag"], ["y"], then_branch=then, else_branch=other)],
                      [vi("x", F, [1, 4])], [vi("y", F, [1, 4])],
                      [numpy_helper.from_array(W, "W"), numpy_helper.from_array(np.array(True), "flag")]), 1


@pytest.mark.parametrize("build", [_loop, _scan, _nested_if], ids=["loop", "scan", "nested-if"])
def test_the_check_of_a_model_with_bodies_runs_in_float64(build):
    model, trips = build()
    onnx.checker.check_model(model, full_check=True)
    before = model.SerializeToString()
    res = api.grad(model, spec=GradSpec(wrt=("W",)), inputs={"x": X}, check=True, save=True)
    assert model.SerializeToString() == before  # the check converted a copy
    assert res.check_mode == "float64", res.notes
    assert not any("float32" in n for n in res.notes), res.notes
    loss, dw = _oracle(X, trips)
    assert res.loss == pytest.approx(loss, rel=1e-6)
    np.testing.assert_allclose(res.arrays["W"], dw, rtol=1e-5, atol=1e-6)
    (row,) = res.rows
    assert row.check["ok"] is True and row.check["precision"] == "float64" and row.check["error"] < 1e-6, row.check


def test_to_float64_converts_nested_bodies_and_leaves_its_input_alone():
    model, _ = _nested_if()
    before = model.SerializeToString()
    out = to_float64(model)
    assert model.SerializeToString() == before
    then = lambda node: next(a.g for a in node.attribute if a.name == "then_branch")  # noqa: E731
    body = then(then(out.graph.node[0]).node[0])  # the inner If's then branch
    types = {n.op_type: n for n in body.node}
    assert types["Cast"].attribute[0].i == TensorProto.DOUBLE
    assert types["Constant"].attribute[0].t.data_type == TensorProto.DOUBLE
    assert all(v.type.tensor_type.elem_type == TensorProto.DOUBLE for v in list(body.output) + list(body.value_info))


def _ln_branch(name, s, b):
    """y = tanh(LayerNormalization(x, s, b) + InvStdDev): the statistics outputs are read (float32, the stash
    type, unless the LayerNormalization is written out in float64)."""
    nodes = [helper.make_node("LayerNormalization", ["x", s, b], [f"{name}_o", f"{name}_mean", f"{name}_isd"]),
             helper.make_node("Add", [f"{name}_o", f"{name}_isd"], [f"{name}_a"]),
             helper.make_node("Tanh", [f"{name}_a"], [f"{name}_y"])]
    return helper.make_graph(nodes, name, [], [vi(f"{name}_y", F, [2, 4])])


def test_a_layer_norm_in_a_body_is_checked_in_float64():
    """LayerNormalization inside an If's branches, its InvStdDev read: the float64 copy writes it out in
    float64 as it does in the main graph (it was left as is, its statistics float32 in a float64 body: the
    session refused it and the check fell back to float32, tolerance 5e-2). Oracle: dL/ds, dL/db in numpy
    float64 (the then branch runs: flag is true)."""
    s, b = RNG.standard_normal(4).astype(np.float32), RNG.standard_normal(4).astype(np.float32)
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    dy = RNG.standard_normal((2, 4)).astype(np.float32)
    model = make_model([helper.make_node("If", ["flag"], ["y"], then_branch=_ln_branch("then", "s", "b"),
                                         else_branch=_ln_branch("else", "b", "s"))],
                       [vi("x", F, [2, 4])], [vi("y", F, [2, 4])],
                       [numpy_helper.from_array(s, "s"), numpy_helper.from_array(b, "b"),
                        numpy_helper.from_array(np.array(True), "flag")])
    onnx.checker.check_model(model, full_check=True)
    res = api.grad(model, spec=GradSpec(wrt=("s", "b"), loss="output-grad", output_grad=dy), inputs={"x": x},
                   check=True, save=True)
    assert res.check_mode == "float64", res.notes
    assert all(row.check["ok"] is True and row.check["precision"] == "float64" for row in res.rows), res.rows
    xd = x.astype(np.float64)
    xc = xd - xd.mean(-1, keepdims=True)
    isd = 1 / np.sqrt((xc ** 2).mean(-1, keepdims=True) + 1e-5)
    t = np.tanh(xc * isd * s + b + isd)
    da = dy * (1 - t ** 2)
    np.testing.assert_allclose(res.arrays["b"], da.sum(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(res.arrays["s"], (da * xc * isd).sum(0), rtol=1e-4, atol=1e-5)
