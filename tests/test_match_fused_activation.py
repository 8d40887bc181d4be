"""onnxruntime's FusedGemm / FusedConv with an 'activation' computes that activation's output (Relu(Gemm)): against
the other exporter's plain Gemm -> Relu (the same weights, a torch MLP exported by both exporters, one copy optimised
by onnxruntime) it was paired with the bare Gemm's output by the weights both read, and FAILed ("error starts at"
the first layer) on models that compute the same. A fused node with an activation is that activation's function,
never a bare Gemm's or Conv's. Oracle: the models, built here with the same weights."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api

F = TensorProto.FLOAT
RNG = np.random.default_rng(1)
SHAPES = [(32, 16), (32, 32), (32, 32), (4, 32)]
WEIGHTS = [(f"l{k + 1}.weight", RNG.standard_normal(s).astype(np.float32)) for k, s in enumerate(SHAPES)]
BIASES = [(f"l{k + 1}.bias", RNG.standard_normal(s[0]).astype(np.float32)) for k, s in enumerate(SHAPES)]
ACTS = ["Relu", "Tanh", "Relu"]


def _model(nodes, domains):
    inits = [numpy_helper.from_array(a, n) for n, a in WEIGHTS + BIASES]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", F, [2, 16])], [helper.make_tensor_value_info("y", F, [2, 4])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in domains])
    m.ir_version = 8
    return m


def _plain():
    nodes, t = [], "x"
    for k, act in enumerate(ACTS):
        nodes += [helper.make_node("Gemm", [t, f"l{k + 1}.weight", f"l{k + 1}.bias"], [f"/l{k + 1}/Gemm_output_0"], transB=1),
                  helper.make_node(act, [f"/l{k + 1}/Gemm_output_0"], [f"/{act}_{k}_output_0"])]
        t = f"/{act}_{k}_output_0"
    nodes.append(helper.make_node("Gemm", [t, "l4.weight", "l4.bias"], ["y"], transB=1))
    return _model(nodes, [("", 13)])


def _fused(tmp_path):
    """The plain model as onnxruntime's extended optimisation saves it (Gemm + Relu -> FusedGemm, with the shapes it
    knows), its tensors renamed as another exporter names them (the weights keep theirs)."""
    import onnxruntime as ort

    onnx.save(_plain(), tmp_path / "plain.onnx")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(str(tmp_path / "plain.onnx"), so, providers=["CPUExecutionProvider"])
    m = onnx.load(str(tmp_path / "opt.onnx"))
    assert any(n.op_type == "FusedGemm" for n in m.graph.node), [n.op_type for n in m.graph.node]
    keep = {"x", "y"} | {i.name for i in m.graph.initializer}
    new = lambda t: t if t in keep or not t else f"t{abs(hash(t)) % 10**6}"  # noqa: E731
    for n in m.graph.node:
        n.input[:] = [new(t) for t in n.input]
        n.output[:] = [new(t) for t in n.output]
    del m.graph.value_info[:]  # the shapes an exporter declares (dynamo's do), which structural alignment reads
    m.graph.value_info.extend(helper.make_tensor_value_info(n.output[0], F, [2, 32]) for n in m.graph.node if n.op_type == "FusedGemm")
    return m


def test_a_fused_activation_is_never_paired_with_a_bare_gemm(tmp_path):
    x = RNG.standard_normal((2, 16)).astype(np.float32)
    onnx.checker.check_model(_plain())
    res = api.diff(_plain(), _fused(tmp_path), inputs={"x": x}, selection=api.Selection(all=True))
    pairs = {r.pair.a.name: r.pair.b.name for r in res.results}
    assert not any(a.endswith("Gemm_output_0") for a in pairs), pairs  # a bare Gemm's output is no fused node's
    assert res.verdict()[0] == "pass" and res.first_failure is None, [(r.pair.a.name, r.pair.b.name, r.passed) for r in res.results]
