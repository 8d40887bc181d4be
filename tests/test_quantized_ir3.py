"""An IR-3 model quantized by onnxruntime.quantization: the quantizer adds its scales and zero points as
initializers without listing them as graph inputs (which IR 3 asks for), onnx's shape inference then gives
the QuantizeLinear outputs a shape and no element type, and onnxruntime refuses a model whose value_info
holds such an entry ("Invalid tensor data type 0"): `layers` and `diff` failed on a model onnxruntime runs."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api


class _Reader:
    def __init__(self, n=4):
        rng = np.random.default_rng(0)
        self.batches = [{"x": rng.random((1, 2, 6, 6), dtype=np.float32)} for _ in range(n)]
        self.it = iter(self.batches)

    def get_next(self):
        return next(self.it, None)

    def rewind(self):
        self.it = iter(self.batches)


def _ir3_float_and_quantized(tmp_path):
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((3, 2, 3, 3)).astype(np.float32), "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])
    wi = helper.make_tensor_value_info("w", TensorProto.FLOAT, [3, 2, 3, 3])  # IR 3: initializers are inputs too
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), helper.make_node("Relu", ["c"], ["y"], name="relu")]
    m = make_model(nodes, [x, wi], [y], [w], opset=11, ir=3)
    fp32, q = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(m, fp32)
    quantize_static(str(fp32), str(q), _Reader(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8)
    qm = onnx.load(str(q))
    assert qm.ir_version == 3
    listed = {i.name for i in qm.graph.input}
    assert any(t.name not in listed for t in qm.graph.initializer)  # the situation this is about
    ort.InferenceSession(str(q), providers=["CPUExecutionProvider"])  # onnxruntime runs the model as it is
    return fp32, q


def test_loading_never_declares_a_tensor_without_element_type(tmp_path):
    _, q = _ir3_float_and_quantized(tmp_path)
    proto = api.load(q).proto
    untyped = [vi.name for vi in proto.graph.value_info
               if vi.type.HasField("tensor_type") and not vi.type.tensor_type.elem_type]
    assert untyped == []
    ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])


def test_layers_and_diff_run_an_ir3_quantized_model(tmp_path):
    fp32, q = _ir3_float_and_quantized(tmp_path)
    x = np.random.default_rng(2).random((1, 2, 6, 6), dtype=np.float32)
    spec = api.InputSpec(arrays={"x": x})
    res = api.layers(q, api.Selection(all=True), inputs=spec)
    assert res.stats
    d = api.diff(q, fp32, inputs=spec)
    out = next(r for r in d.results if r.pair.b.name == "y").metrics
    # oracle: both models in plain onnxruntime, numpy float64
    a = ort.InferenceSession(str(q), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0].astype(np.float64)
    b = ort.InferenceSession(str(fp32), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0].astype(np.float64)
    assert np.isclose(out.max_abs, np.abs(a - b).max(), rtol=1e-6, atol=1e-7)
