"""What the installed onnxruntime accepts, found by asking it once (the answer is cached).

``max_ir_version()`` is the newest model IR version onnxruntime reads, never above what the installed
onnx writes: files onnxprobe writes get at most this IR version, so any runtime of that version, C++
included, loads them. ``max_opset()`` is the newest ai.onnx opset it loads.
"""

from __future__ import annotations

import functools

import onnx

from onnxprobe.runtime.ort import IR_VERSION_RE, OPSET_RE, ort_module


def _tiny(ir: int, opset: int = 13) -> bytes:
    g = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["y"])], "ir_probe",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
    )
    m = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", opset)])
    m.ir_version = ir
    return m.SerializeToString()


@functools.lru_cache(maxsize=None)
def max_ir_version() -> int:
    ort = ort_module()
    ir = onnx.IR_VERSION
    while ir > 7:
        try:
            ort.InferenceSession(_tiny(ir), providers=["CPUExecutionProvider"])
            return ir
        except Exception as e:  # noqa: BLE001
            m = IR_VERSION_RE.search(str(e))
            ir = min(ir - 1, int(m.group(2))) if m else ir - 1
    return ir


@functools.lru_cache(maxsize=None)
def max_opset() -> int | None:
    """The newest ai.onnx opset onnxruntime loads, as it says refusing a newer one ("Current official support for
    domain ai.onnx is till opset 28"); None where it loads the newest tried, or refuses without saying so."""
    ort = ort_module()
    top = onnx.defs.onnx_opset_version()
    for opset in range(top + 1, top + 4):
        try:
            ort.InferenceSession(_tiny(max_ir_version(), opset), providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001
            m = OPSET_RE.search(str(e))
            return int(m.group(1)) if m else None
    return None
