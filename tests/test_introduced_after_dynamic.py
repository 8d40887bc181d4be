"""The error a float op introduces after a dynamically quantized layer (IntegerLayer -> Cast -> Mul, whose float
result B's cones start from, as from any float tensor of B): B's Relu, bias Add or HardSwish fed A's value of the
layer's output. The cones stopped only at B's float pairs, so they went back through B's integer layer to the
input, and every float op after one was given the layer's own error (PP-OCR's orientation model: each HardSwish
after a quantized Conv at 15-50 dB, where it introduces none); the bias Add after the rescale was labelled
'dynamic' and not measured at all."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api

quantization = pytest.importorskip("onnxruntime.quantization")


def _float_model(path, gemm: bool) -> tuple[str, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    w, bias = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    f = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)  # noqa: E731
    if gemm:
        nodes = [helper.make_node("Gemm", ["x", "W", "B"], ["ad"], name="gemm")]
    else:
        nodes = [helper.make_node("MatMul", ["x", "W"], ["mm"], name="mm"), helper.make_node("Add", ["mm", "B"], ["ad"], name="ad")]
    nodes.append(helper.make_node("Relu", ["ad"], ["y"], name="relu"))
    g = helper.make_graph(nodes, "g", [f("x", [4, 16])], [f("y", [4, 32])],
                          initializer=[numpy_helper.from_array(w, "W"), numpy_helper.from_array(bias, "B")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return str(path), w, bias


def _run(path: str, names: list[str], x: np.ndarray) -> list[np.ndarray]:
    m = onnx.load(path)
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names if n not in have)
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(names, {"x": x})


def _sqnr_db(a: np.ndarray, c: np.ndarray) -> float:
    a, c = a.astype(np.float64).ravel(), c.astype(np.float64).ravel()
    return 20 * math.log10(np.linalg.norm(c) / np.linalg.norm(a - c))


@pytest.mark.parametrize("gemm", [False, True], ids=["matmul-then-bias-add", "gemm"])
def test_a_float_op_after_a_dynamic_layer_introduces_only_its_own_error(tmp_path, gemm):
    a, w, bias = _float_model(tmp_path / "f.onnx", gemm)
    b = str(tmp_path / "q.onnx")
    quantization.quantize_dynamic(a, b, weight_type=quantization.QuantType.QInt8)
    assert any(n.op_type == "MatMulInteger" for n in onnx.load(b).graph.node)
    x = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
    res = api.diff(a, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu"),
                   inputs=api.InputSpec(arrays={"x": x}))
    by = {r.pair.a.name: r for r in res.results}
    # the Relu, fed A's value, is A's Relu: exact (it was given the quantized layer's ~42 dB)
    assert by["y"].introduced is not None and by["y"].introduced.exact, by["y"].introduced
    (ad_a,) = _run(a, ["ad"], x)
    if gemm:
        # B's 'ad' (its bias Add after the integer MatMul) fed from the input: the quantized Gemm's own error
        (ad_b,) = _run(b, ["ad"], x)
        got = by["ad"].introduced
        assert got is not None and got.sqnr_db == pytest.approx(_sqnr_db(ad_b, ad_a), abs=0.01)
    else:
        # B's bias Add fed A's MatMul output is A's Add: exact, and measured as a float op's
        assert by["ad"].pair.b.kind == "float" and by["ad"].pair.b.op_type == "Add"
        assert by["ad"].introduced is not None and by["ad"].introduced.exact, by["ad"].introduced
        assert by["mm"].pair.b.kind == "dynamic"
