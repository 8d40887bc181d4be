"""A tensor of an If branch whose If has no counterpart If in the other model (silero-vad's 16k model against its
export that computes the same layers inside an If on the sample rate) was "no counterpart in A", as if A lacked the
layer; it says why it is not compared: tensors pair within one scope. The other model's tensors outside such
branches say their counterpart may lie inside one. Oracle: the models' structure, built here."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from conftest import make_model
from onnxprobe import api

F = TensorProto.FLOAT


def _plain():
    return make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Neg", ["r"], ["y"], name="neg")],
                      [helper.make_tensor_value_info("x", F, [2, 3])], [helper.make_tensor_value_info("y", F, [2, 3])])


def _in_an_if():
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["r_in"], name="relu_in"),
                              helper.make_node("Neg", ["r_in"], ["t_out"], name="neg_in")], "then", [],
                             [helper.make_tensor_value_info("t_out", F, [2, 3])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e_out"], name="neg_else")], "else", [],
                              [helper.make_tensor_value_info("e_out", F, [2, 3])])
    nodes = [helper.make_node("Constant", [], ["c"], name="c", value=helper.make_tensor("c", TensorProto.BOOL, [], [True])),
             helper.make_node("If", ["c"], ["y"], name="gate", then_branch=then, else_branch=other)]
    return make_model(nodes, [helper.make_tensor_value_info("x", F, [2, 3])], [helper.make_tensor_value_info("y", F, [2, 3])])


def test_a_branch_whose_if_is_unpaired_says_why_its_tensors_are_not_compared():
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    res = api.diff(_plain(), _in_an_if(), inputs={"x": x}, selection=api.Selection(all=True))
    assert res.verdict()[0] == "pass"
    lone_b = {u.obs.name: u.reason for u in res.matching.unmatched_b}
    assert "r_in" in lone_b and "whose If has no counterpart If in A" in lone_b["r_in"], lone_b
    lone_a = {u.obs.name: u.reason for u in res.matching.unmatched_a}
    assert "r" in lone_a and "outside its If branches that pair with nothing" in lone_a["r"], lone_a
