"""The notes on where a gradient stops name an op outside the default ONNX domain as the engine does and the
table of rules does, domain:op ('com.microsoft:GroupQueryAttention'), not by its bare type: a bare
'Attention' read as the ONNX op of opset 23, which has a rule."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxprobe.autodiff import registry
from onnxprobe.autodiff.blocked import blocked_tensors, through_nondifferentiable
from onnxprobe.compare.gradients import gradient_stops, shared_weights, stopped_at
from onnxprobe.types import grad_name

F = TensorProto.FLOAT
MS = "com.microsoft"


def _model(nodes, inits, outputs):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", F, [1, 2, 4])],
                          [helper.make_tensor_value_info(o, F, None) for o in outputs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    return m


def _gqa_model():
    """x -> Mul(w) -> com.microsoft:GroupQueryAttention (no rule) -> y."""
    w = numpy_helper.from_array(np.ones((4,), np.float32), "w")
    mul = helper.make_node("Mul", ["x", "w"], ["h"], name="the_mul")
    gqa = helper.make_node("GroupQueryAttention", ["h", "x", "x"], ["y"], name="the_gqa", domain=MS,
                           num_heads=2, kv_num_heads=2)
    return _model([mul, gqa], [w], ["y"])


def test_the_preconditions_no_rule_for_the_op_and_its_key_has_the_domain():
    assert registry.status("GroupQueryAttention", MS) == "not implemented"
    assert registry.key("GroupQueryAttention", MS) == "com.microsoft:GroupQueryAttention"


def test_blocked_names_the_domain():
    m = _gqa_model()
    reach = {"x", "w", "h", "y"}
    out, _ = blocked_tensors(lambda t: True, ["w"], list(m.graph.node), reach)
    assert out["w"].startswith("com.microsoft:GroupQueryAttention 'the_gqa'"), out


def test_through_nondifferentiable_names_the_domain():
    """com.microsoft:MurmurHash3 has no gradient by nature: the way from w to y passes it."""
    w = numpy_helper.from_array(np.ones((4,), np.float32), "w")
    nodes = [helper.make_node("Mul", ["x", "w"], ["h"], name="the_mul"),
             helper.make_node("MurmurHash3", ["h"], ["k"], name="the_hash", domain=MS),
             helper.make_node("Cast", ["k"], ["kf"], to=F),
             helper.make_node("Add", ["x", "kf"], ["y"], name="the_add")]
    assert registry.key("MurmurHash3", MS) in registry.NON_DIFFERENTIABLE
    out = through_nondifferentiable(nodes, ["w"], "y")
    assert out["w"] == "com.microsoft:MurmurHash3 'the_hash'", out


def test_gradient_stops_and_stopped_at_name_the_domain():
    m = _gqa_model()
    assert gradient_stops(m) == "com.microsoft:GroupQueryAttention x1"
    assert stopped_at(m, ["w"]) == {"w": ["com.microsoft:GroupQueryAttention the_gqa"]}


def test_shared_weights_names_the_readers_with_their_domain():
    """The note on two weights read by different numbers of nodes lists the readers: domain:op."""
    w = numpy_helper.from_array(np.ones((4,), np.float32), "w")
    one = _model([helper.make_node("Mul", ["x", "w"], ["y"])], [w], ["y"])
    two = _model([helper.make_node("Mul", ["x", "w"], ["h"]),
                  helper.make_node("BiasGelu", ["h", "w"], ["y"], domain=MS)], [w], ["y"])

    class Obs:
        def __init__(self):
            self.effective_op, self.kind, self.name = "Mul weight", "float", grad_name("w")

    class Pair:
        a, b = Obs(), Obs()

    why = shared_weights(one, two)(Pair())
    assert why is not None and "1 Mul, 1 com.microsoft:BiasGelu" in why[0], why
