"""Two parallel branches of one op and shape that differ only in a setting (a Transpose's perm, a LeakyRelu's slope,
a Conv's dilations, a Gather's constant indices), written in the other order in B with other names: structural
alignment paired them by order, crossed, and both FAILed on equal outputs ("error starts at" a layer nothing
changed). Nodes of one op whose settings differ are other functions. Oracle: the models, built here, whose outputs
are equal by construction."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api

F = TensorProto.FLOAT
W = np.random.default_rng(5).standard_normal((4, 4, 3, 3)).astype(np.float32)


def _branch(kind, k, p):
    o = f"{p}br{k}"
    if kind == "transpose":
        return [helper.make_node("Transpose", ["x"], [o], perm=[0, 2, 1, 3] if k == 0 else [0, 3, 2, 1], name=f"{p}tr{k}")], []
    if kind == "leaky":
        return [helper.make_node("LeakyRelu", ["x"], [o], alpha=0.1 * (k + 1), name=f"{p}lr{k}")], []
    if kind == "gather":
        idx = numpy_helper.from_array(np.array([0, 1] if k == 0 else [2, 3], np.int64), f"{p}i{k}")
        return [helper.make_node("Gather", ["x", f"{p}i{k}"], [o], axis=1, name=f"{p}g{k}")], [idx]
    return [helper.make_node("Conv", ["x", f"{p}w"], [o], pads=[1, 1, 1, 1] if k == 0 else [2, 2, 2, 2],
                             dilations=[1, 1] if k == 0 else [2, 2], name=f"{p}cv{k}")], \
        [numpy_helper.from_array(W, f"{p}w")] if k == 0 else []


def _model(kind, reverse, p):
    nodes, inits, branches = [], [], []
    for k in range(2):
        made, consts = _branch(kind, k, p)
        branches.append(made + [helper.make_node("Tanh", [f"{p}br{k}"], [f"{p}t{k}"], name=f"{p}tanh{k}")])
        inits += consts
    for b in branches[::-1] if reverse else branches:
        nodes += b
    nodes.append(helper.make_node("Concat", [f"{p}t0", f"{p}t1"], ["y"], axis=1, name=f"{p}cat"))
    return make_model(nodes, [helper.make_tensor_value_info("x", F, [1, 4, 4, 4])], [helper.make_tensor_value_info("y", F, None)],
                      inits, opset=18)


@pytest.mark.parametrize("kind", ["transpose", "leaky", "gather", "conv"])
def test_branches_that_differ_in_a_setting_are_not_crossed(kind):
    x = np.random.default_rng(0).standard_normal((1, 4, 4, 4)).astype(np.float32)
    res = api.diff(_model(kind, False, "a_"), _model(kind, True, "b_"), inputs={"x": x}, selection=api.Selection(all=True))
    crossed = [(r.pair.a.name, r.pair.b.name) for r in res.results if r.pair.a.name[2:] != r.pair.b.name[2:] and r.pair.a.name != "y"]
    assert not crossed, crossed
    assert res.verdict()[0] == "pass" and res.first_failure is None, [(r.pair.a.name, r.pair.b.name, r.passed) for r in res.results]
