"""com.microsoft's quantized ops (QOperator quantization): onnx's shape inference types nothing at or after
them, so their outputs (and everything downstream) read dtype "?"; graph.contrib_types gives inference
their outputs' types (that of their output zero point) to start from."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.graph.contrib_types import typed_outputs


def _qlinear_model(zp_type=np.uint8) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"), numpy_helper.from_array(np.array(3, np.uint8), "zp"),
             numpy_helper.from_array(np.array(0.1, np.float32), "s2"), numpy_helper.from_array(np.array(1, zp_type), "zp2")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], name="quant"),
             helper.make_node("QLinearSigmoid", ["q", "s", "zp", "s2", "zp2"], ["qs"], name="qsig", domain="com.microsoft"),
             helper.make_node("DequantizeLinear", ["qs", "s2", "zp2"], ["y"], name="dequant"),
             helper.make_node("Relu", ["y"], ["z"], name="relu")]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                   [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], inits)
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return m


def test_qlinear_outputs_take_their_zero_points_type():
    vi = {v.name: v.type.tensor_type.elem_type for v in typed_outputs(_qlinear_model().graph)}
    assert vi == {"qs": TensorProto.UINT8}
    assert typed_outputs(_qlinear_model(np.int8).graph)[0].type.tensor_type.elem_type == TensorProto.INT8


def test_layers_knows_the_dtypes_at_and_after_a_contrib_op(tmp_path):
    p = tmp_path / "q.onnx"
    onnx.save(_qlinear_model(), p)
    x = np.random.default_rng(0).normal(size=(1, 4, 8, 8)).astype(np.float32)
    res = api.layers(p, api.Selection(all=True), api.RunConfig(device="cpu", cache=False), api.InputSpec(arrays={"x": x}))
    dtypes = {pr.ref.name: pr.ref.dtype for pr in res.plan.probes}
    assert (dtypes["qs"], dtypes["y"], dtypes["z"]) == ("uint8", "float32", "float32"), dtypes
    # the statistics of the uint8 output agree with onnxruntime's own values
    qs = api.run(p, {"x": x}, api.RunConfig(device="cpu", cache=False), api.Selection(names=("qs",)), raw=True).arrays["qs"]
    assert qs.dtype == np.uint8
    st = res.stats["qs"]
    assert (st.min, st.max, st.count) == (float(qs.min()), float(qs.max()), qs.size)
    assert st.mean == np.float64(qs.astype(np.float64).mean())


def _ms_qdq_model(act=np.uint16, scale=np.float32) -> onnx.ModelProto:
    """QuantizeLinear/DequantizeLinear of the com.microsoft domain, which onnxruntime's quantizer writes for
    16-bit and 4-bit types (UseQDQContribOps): onnx infers no type for them either."""
    ft = helper.np_dtype_to_tensor_dtype(np.dtype(scale))
    inits = [numpy_helper.from_array(np.array(0.05, scale), "s"), numpy_helper.from_array(np.array(3, act), "zp")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], name="quant", domain="com.microsoft"),
             helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], name="dequant", domain="com.microsoft"),
             helper.make_node("Relu", ["y"], ["z"], name="relu")]
    m = make_model(nodes, [helper.make_tensor_value_info("x", ft, [1, 4, 8, 8])],
                   [helper.make_tensor_value_info("z", ft, None)], inits)
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return m


def test_contrib_quantize_and_dequantize_outputs_are_typed():
    vi = {v.name: v.type.tensor_type.elem_type for v in typed_outputs(_ms_qdq_model().graph)}
    assert vi == {"q": TensorProto.UINT16, "y": TensorProto.FLOAT}, vi
    vi = {v.name: v.type.tensor_type.elem_type for v in typed_outputs(_ms_qdq_model(np.int8, np.float16).graph)}
    assert vi == {"q": TensorProto.INT8, "y": TensorProto.FLOAT16}, vi


def test_layers_knows_the_dtypes_of_contrib_qdq_tensors(tmp_path):
    p = tmp_path / "q.onnx"
    onnx.save(_ms_qdq_model(), p)
    x = np.random.default_rng(0).normal(size=(1, 4, 8, 8)).astype(np.float32)
    res = api.layers(p, api.Selection(all=True), api.RunConfig(device="cpu", cache=False), api.InputSpec(arrays={"x": x}))
    dtypes = {pr.ref.name: pr.ref.dtype for pr in res.plan.probes}
    assert (dtypes["q"], dtypes["y"], dtypes["z"]) == ("uint16", "float32", "float32"), dtypes
