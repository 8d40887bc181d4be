"""`grad` moves a body's float Constants (two values or more) to the main graph (autodiff.hoist): the Constant
node left the body, so every node after it had another index and display name than in `layers` ('Scan_5' for
'Scan_6'), `--range 7:7` was "outside the model" and `--range Scan_6:Sin_7` refused the name layers shows (and
the one grad printed too). A placeholder stands in its place now. Oracle: layers' own numbering, and the node
list of the model as onnx's walk gives it; the gradient of W against float64 finite differences."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from onnxprobe import api
from onnxprobe.autodiff.hoist import hoist_constants


def _scan_model() -> onnx.ModelProto:
    body = h.make_graph([
        h.make_node("Constant", [], ["c"], value=nh.from_array(np.array([0.5, 1.0, 1.5, 2.0], np.float32), "c")),
        h.make_node("MatMul", ["h_in", "W"], ["hw"]), h.make_node("Add", ["hw", "x_t"], ["pre"]),
        h.make_node("Tanh", ["pre"], ["h_out"]), h.make_node("Mul", ["h_out", "c"], ["y_t"])], "body",
        [h.make_tensor_value_info("h_in", T.FLOAT, [4]), h.make_tensor_value_info("x_t", T.FLOAT, [4])],
        [h.make_tensor_value_info("h_out", T.FLOAT, [4]), h.make_tensor_value_info("y_t", T.FLOAT, [4])])
    w = np.random.default_rng(0).normal(scale=0.5, size=(4, 4)).astype(np.float32)
    g = h.make_graph([h.make_node("Scan", ["h0", "x"], ["hT", "ys"], body=body, num_scan_inputs=1),
                      h.make_node("Sin", ["ys"], ["out"])], "g",
                     [h.make_tensor_value_info("h0", T.FLOAT, [4]), h.make_tensor_value_info("x", T.FLOAT, [3, 4])],
                     [h.make_tensor_value_info("out", T.FLOAT, [3, 4])], [nh.from_array(w, "W")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _feeds():
    rng = np.random.default_rng(1)
    return {"h0": rng.normal(size=4).astype(np.float32), "x": rng.normal(size=(3, 4)).astype(np.float32)}


def test_hoisting_keeps_every_node_in_its_place():
    m = _scan_model()
    hoisted = hoist_constants(m)
    body = hoisted.graph.node[0].attribute[0].g
    assert [n.op_type for n in body.node] == [n.op_type for n in m.graph.node[0].attribute[0].g.node]
    assert "c" in {i.name for i in hoisted.graph.initializer} and "c" not in {o for n in body.node for o in n.output}


def test_grad_rows_and_range_number_nodes_as_layers(tmp_path):
    p = tmp_path / "scan.onnx"
    onnx.save(_scan_model(), p)
    cfg = api.RunConfig(device="cpu", cache=False)
    lay = api.layers(p, api.Selection(all=True), cfg, api.InputSpec(arrays=_feeds()))
    where = {pr.ref.name: (pr.ref.index, pr.ref.node) for pr in lay.plan.probes}
    assert where["out"] == (6, "Sin_6") and where["ys"] == (5, "Scan_5")  # layers: the body's 5 nodes, then these
    inputs = api.InputSpec(arrays=_feeds())
    res = api.grad(p, api.Selection(all=True), cfg, inputs=inputs, save=True)
    rows = {r.target.ref.name: (r.target.ref.index, r.target.ref.node) for r in res.rows}
    assert rows["out"] == where["out"] and rows["ys"] == where["ys"], rows
    by_name = api.grad(p, api.Selection(range="Scan_5:Sin_6"), cfg, inputs=inputs)
    by_index = api.grad(p, api.Selection(range="6:6"), cfg, inputs=inputs)
    assert {r.target.ref.name for r in by_index.rows} == {"out"}
    assert {"out", "ys", "W"} <= {r.target.ref.name for r in by_name.rows}
    # the gradient of W still right: float64 finite differences of sum(sin(scan))
    f = _feeds()
    w0 = nh.to_array(_scan_model().graph.initializer[0]).astype(np.float64)
    c = np.array([0.5, 1.0, 1.5, 2.0])

    def loss(w):
        hh, tot = f["h0"].astype(np.float64), 0.0
        for xt in f["x"].astype(np.float64):
            hh = np.tanh(hh @ w + xt)
            tot += np.sin(hh * c).sum()
        return tot

    fd = np.zeros_like(w0)
    for k in np.ndindex(w0.shape):
        e = np.zeros_like(w0)
        e[k] = 1e-6
        fd[k] = (loss(w0 + e) - loss(w0 - e)) / 2e-6
    np.testing.assert_allclose(res.arrays["W"], fd, rtol=1e-4, atol=1e-5)
