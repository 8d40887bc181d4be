"""`grad --all --wrt INPUT`: --all means every tensor, so a graph input --wrt names is kept (it was read as
an intersection with the node outputs and weights --all selects, and dropped: '--wrt: the selection flags
leave none of the tensors it names', or the input silently missing next to a weight).

Oracle: y = sum((x * w - target)), so d/dx = w, d/dtarget = -1, d/dw = x (numpy)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api
from onnxprobe.autodiff.select import targets
from onnxprobe.graph.select import Selection

CPU = api.RunConfig(device="cpu", opt_level="off")
W = np.array([[0.5, -2.0, 3.0]], np.float32)


def _model(path):
    nodes = [helper.make_node("Mul", ["x", "w"], ["m"]), helper.make_node("Sub", ["m", "target"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 3]) for n in ("x", "target")],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
                          [numpy_helper.from_array(W, "w")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_all_keeps_the_inputs_wrt_names(tmp_path):
    m = onnx.shape_inference.infer_shapes(onnx.load(_model(tmp_path / "t.onnx")))
    assert [t.ref.name for t in targets(m, Selection(all=True), ("x",))] == ["x"]
    assert {t.ref.name for t in targets(m, Selection(all=True), ("target", "w"))} == {"target", "w"}
    # --op still selects among node outputs and weights: an input is not a Mul's output
    assert {t.ref.name for t in targets(m, Selection(ops=["Mul"]), ("target", "w"))} == {"w"}


def test_grad_all_wrt_input_values(tmp_path):
    path = _model(tmp_path / "t.onnx")
    x = np.array([[1.5, -0.25, 2.0]], np.float32)
    t = np.array([[0.1, 0.2, 0.3]], np.float32)
    res = api.grad(path, selection=Selection(all=True), config=CPU, spec=api.GradSpec(wrt=("x", "target", "w")),
                   inputs={"x": x, "target": t}, save=True)
    assert {r.name for r in res.rows} == {"x", "target", "w"}
    np.testing.assert_allclose(res.arrays["x"], np.broadcast_to(W.astype(np.float64), (1, 3)), rtol=1e-6)
    np.testing.assert_allclose(res.arrays["target"], -np.ones((1, 3)), rtol=1e-6)
    np.testing.assert_allclose(res.arrays["w"], x.astype(np.float64), rtol=1e-6)


def test_all_alone_has_the_float_inputs_gradients(tmp_path):
    """`grad --all` is every gradient: the float graph inputs' too (dL/dx), not only when --wrt names them;
    an integer input has none (oracle: numpy, d/dx = w, d/dtarget = -1)."""
    path = _model(tmp_path / "t.onnx")
    m = onnx.shape_inference.infer_shapes(onnx.load(path))
    assert {t.ref.name: t.kind for t in targets(m, Selection(all=True))} == {
        "w": "weight", "m": "activation", "y": "activation", "x": "input", "target": "input"}
    assert "x" not in {t.ref.name for t in targets(m, Selection())}  # the default: weights and activations
    x = np.array([[1.5, -0.25, 2.0]], np.float32)
    t = np.array([[0.1, 0.2, 0.3]], np.float32)
    res = api.grad(path, selection=Selection(all=True), config=CPU, inputs={"x": x, "target": t}, save=True)
    np.testing.assert_allclose(res.arrays["x"], np.broadcast_to(W.astype(np.float64), (1, 3)), rtol=1e-6)
    np.testing.assert_allclose(res.arrays["target"], -np.ones((1, 3)), rtol=1e-6)
    assert {r.name: r.target.kind for r in res.rows}["x"] == "input"


def test_all_leaves_integer_inputs_out(tmp_path):
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["e"]), helper.make_node("Mul", ["e", "x"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2]),
                                        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                          [numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "emb")])
    m = onnx.shape_inference.infer_shapes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    kinds = {t.ref.name: t.kind for t in targets(m, Selection(all=True))}
    assert kinds.get("x") == "input" and "ids" not in kinds
