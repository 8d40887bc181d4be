"""Unmatched entries that say what is known about them, and pairs that are not made.

- One op applied in another order (Sigmoid(Relu(m)) against Relu(Sigmoid(m))): the Sigmoids align by op,
  order and shape, yet are other functions of the data; they stay unmatched with that reason.
- A tensor that holds the values of a compared one (an Identity an exporter added, a Cast to its own type
  that onnxruntime's optimiser removes) says so, where it read "folded into its consumer", which it is not.
- A tensor the other model holds as a constant of that name (constant folding) says that.
- A runtime's reason is said once ("not observable in B: not observable: ..." before).
The constructions are the oracle."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model, sample_path
from onnxprobe import api

X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])
W = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32), "W")
C = numpy_helper.from_array(np.random.default_rng(1).standard_normal(8).astype(np.float32), "C")
CPU = api.RunConfig(device="cpu", cache=False)


def _chain(ops: list[str], prefix: str) -> onnx.ModelProto:
    nodes, prev = [helper.make_node("MatMul", ["x", "W"], [prefix + "m"])], prefix + "m"
    for i, op in enumerate(ops):
        nodes.append(helper.make_node(op, [prev], [f"{prefix}t{i}"]))
        prev = f"{prefix}t{i}"
    nodes.append(helper.make_node("Add", [prev, "C"], ["y"]))
    return make_model(nodes, [X], [Y], [W, C])


def _diff(tmp_path, a, b, **kw):
    onnx.save(a, str(tmp_path / "a.onnx"))
    onnx.save(b, str(tmp_path / "b.onnx"))
    return api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True), config=CPU, **kw)


def test_one_op_in_another_order_is_not_paired(tmp_path):
    res = _diff(tmp_path, _chain(["Relu", "Sigmoid"], "a_"), _chain(["Sigmoid", "Relu"], "b_"))
    got = {r.pair.a.name: r.pair.b.name for r in res.results}
    assert got == {"a_m": "b_m", "y": "y"}  # the same MatMul, and the outputs by name
    un = {u.obs.name: u.cause for u in res.matching.unmatched_a + res.matching.unmatched_b}
    assert un["a_t1"] == un["b_t0"] == "different-function"


def test_the_same_ops_in_the_same_order_still_pair(tmp_path):
    res = _diff(tmp_path, _chain(["Relu", "Tanh", "Sigmoid"], "a_"), _chain(["Relu", "Tanh", "Sigmoid"], "b_"))
    assert {r.pair.a.name: r.pair.b.name for r in res.results} == {
        "a_m": "b_m", "a_t0": "b_t0", "a_t1": "b_t1", "a_t2": "b_t2", "y": "y"}


def test_copies_of_a_compared_tensor_say_so(tmp_path):
    b = make_model([helper.make_node("MatMul", ["x", "W"], ["mm"]), helper.make_node("Identity", ["mm"], ["mm_id"]),
                    helper.make_node("Cast", ["mm_id"], ["mm_c"], to=TensorProto.FLOAT),
                    helper.make_node("Softmax", ["mm_c"], ["y"])], [X], [Y], [W])
    a = make_model([helper.make_node("MatMul", ["x", "W"], ["mm"]), helper.make_node("Softmax", ["mm"], ["y"])], [X], [Y], [W])
    for first, second in ((a, b), (b, a)):
        res = _diff(tmp_path, first, second)
        un = res.matching.unmatched_b if first is a else res.matching.unmatched_a
        assert {u.obs.name: u.cause for u in un} == {"mm_id": "copy", "mm_c": "copy"}
        assert all("'mm'" in u.reason and "folded" not in u.reason for u in un)


def test_a_cast_to_another_type_is_no_copy(tmp_path):
    b = make_model([helper.make_node("MatMul", ["x", "W"], ["mm"]), helper.make_node("Cast", ["mm"], ["h"], to=TensorProto.FLOAT16),
                    helper.make_node("Cast", ["h"], ["mm_c"], to=TensorProto.FLOAT), helper.make_node("Softmax", ["mm_c"], ["y"])],
                   [X], [Y], [W])
    a = make_model([helper.make_node("MatMul", ["x", "W"], ["mm"]), helper.make_node("Softmax", ["mm"], ["y"])], [X], [Y], [W])
    res = _diff(tmp_path, a, b)
    assert not any(u.cause == "copy" for u in res.matching.unmatched_b)


def test_a_tensor_folded_into_a_constant_of_the_other_model_says_so(tmp_path):
    """B computes r = ReduceSum(Cast(Shape(x))) at run time; A holds r as an initializer (constant folding)."""
    b = make_model([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Cast", ["s"], ["t"], to=TensorProto.FLOAT),
                    helper.make_node("ReduceSum", ["t"], ["r"], keepdims=0), helper.make_node("Mul", ["x", "r"], ["y"])],
                   [X], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [])
    a = make_model([helper.make_node("Mul", ["x", "r"], ["y"])], [X], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                   [numpy_helper.from_array(np.array(6.0, np.float32), "r")])
    res = _diff(tmp_path, a, b)
    un = {u.obs.name: u for u in res.matching.unmatched_b}
    assert un["r"].cause == "folded" and "constant in A" in un["r"].reason
    assert res.verdict()[0] == "pass"


def test_a_runtime_reason_is_said_once():
    pytest.importorskip("openvino", reason="needs the openvino extra (If branches it cannot expose)")
    res = api.diff(str(sample_path("control_flow")), vs_runtime="openvino", selection=api.Selection(all=True), config=CPU)
    hidden = [u for u in res.matching.unmatched_a if u.cause == "not-observable"]
    assert hidden
    for u in hidden:
        assert u.reason.count("not observable") == 1 and "in B" in u.reason, u.reason


def _conv_bn(folded: bool) -> onnx.ModelProto:
    """x -> Conv 'c' -> [BatchNormalization 'bn'] -> Relu -> y; folded: the BN folded into the Conv's weights
    and bias, its output named 'c' as the unfolded Conv's is (an exporter's constant folding on or off)."""
    r = np.random.default_rng(0)
    w = r.standard_normal((4, 3, 3, 3)).astype(np.float32)
    g, be, mu = r.random(4).astype(np.float32) + 0.5, r.standard_normal(4).astype(np.float32), r.standard_normal(4).astype(np.float32)
    var = r.random(4).astype(np.float32) + 0.5
    s = g / np.sqrt(var + 1e-5)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])
    if folded:
        inits = [numpy_helper.from_array((w * s[:, None, None, None]).astype(np.float32), "W"),
                 numpy_helper.from_array((be - mu * s).astype(np.float32), "B")]
        return make_model([helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv"), helper.make_node("Relu", ["c"], ["y"], name="relu")],
                          [x], [y], inits)
    inits = [numpy_helper.from_array(v, k) for k, v in (("W", w), ("g", g), ("be", be), ("mu", mu), ("var", var))]
    return make_model([helper.make_node("Conv", ["x", "W"], ["c"], name="conv"),
                       helper.make_node("BatchNormalization", ["c", "g", "be", "mu", "var"], ["bn"], name="bn"),
                       helper.make_node("Relu", ["bn"], ["y"], name="relu")], [x], [y], inits)


def test_a_folded_conv_is_not_paired_with_its_unfolded_namesake(tmp_path):
    """Both Convs write 'c' (and are nodes named 'conv'), yet the folded one computes the BN's function: it
    pairs with 'bn'; the unfolded 'c' is unmatched as folded (it was compared as 'c' and failed, -5 dB)."""
    for first, second in ((True, False), (False, True)):
        res = _diff(tmp_path, _conv_bn(first), _conv_bn(second))
        got = {r.pair.a.name: r.pair.b.name for r in res.results}
        assert got == ({"c": "bn", "y": "y"} if first else {"bn": "c", "y": "y"}), got
        assert all(r.metrics.sqnr_db > 100 for r in res.results)  # the same function, float32 apart
        (u,) = res.matching.unmatched_b if first else res.matching.unmatched_a
        assert u.obs.name == "c" and u.cause == "folded"


def test_saved_activations_are_b_and_an_output_is_counted_once():
    """--vs-npz (QA): a saved 'logits' of another shape made "2 of the outputs could not be compared: A's
    'logits' (...), B's 'logits' (...)" of a model with one output; and a tensor missing from the .npz read
    "conv1_out (in B, not in the .npz)", though B is the .npz. The oracle: the model's own outputs, and the
    arrays the test saves."""
    model = onnx.load(str(sample_path("cnn")))
    outputs = [o.name for o in model.graph.output]
    image = np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32)
    saved = {"image": image, "conv2_out": np.zeros((1, 16, 8, 8), np.float32)}
    saved.update({o: np.zeros((1, 5), np.float32) for o in outputs})  # the model's are 1x10
    res = api.diff(str(sample_path("cnn")), vs_npz=saved, config=CPU)
    verdict, why = res.verdict()
    assert verdict == "error" and why.startswith(f"{len(outputs)} of the outputs could not be compared: ")
    assert why.count(repr(outputs[0])) == 1
    missing = {u.obs.name: u for u in res.matching.unmatched_a}["conv1_out"]
    assert missing.cause == "not-observable" and missing.reason == "not in the activations given"  # a dict, no .npz


def _gather(idx: int, out: str) -> onnx.ModelProto:
    return make_model([helper.make_node("Shape", ["x"], ["s"], name="sh"),
                       helper.make_node("Gather", ["s", "i"], [out], name=f"g_{out}")],
                      [X], [helper.make_tensor_value_info(out, TensorProto.INT64, [])],
                      [numpy_helper.from_array(np.array(idx, np.int64), "i")])


def test_an_integer_candidate_of_another_function_is_said_of_the_right_tensor(tmp_path):
    """Gather(Shape(x), 0) as y against Gather(Shape(x), 1) as z: A's y read "structural candidate z in B
    reads 0 as operand 2 where z reads 1", the operand's subject turned into the candidate."""
    onnx.save(_gather(0, "y"), tmp_path / "a.onnx")
    onnx.save(_gather(1, "z"), tmp_path / "b.onnx")
    res = api.diff(tmp_path / "a.onnx", tmp_path / "b.onnx", config=CPU)
    (ua,), (ub,) = res.matching.unmatched_a, res.matching.unmatched_b
    assert ua.obs.name == "y" and "z in B: it reads 0 as operand 2 where z reads 1" in ua.reason, ua.reason
    assert ub.obs.name == "z" and "y in A: it reads 1 as operand 2 where y reads 0" in ub.reason, ub.reason
