"""What the installed onnxruntime accepts, found by asking it once (the answer is cached).

``max_ir_version()`` is the newest model IR version onnxruntime reads, never above what the installed
onnx writes: files onnxprobe writes get at most this IR version, so any runtime of that version, C++
included, loads them.
"""

from __future__ import annotations

import functools

import onnx

from onnxprobe.runtime.ort import IR_VERSION_RE, ort_module


def _tiny(ir: int) -> bytes:
    g = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["y"])], "ir_probe",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
    )
    m = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 13)])
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
