"""An independent path to the numbers `--runtime openvino` reports: OpenVINO called directly (read_model,
add_outputs, compile, infer, in this process) and onnxruntime with the same tensors added as graph
outputs by onnx.helper (not by onnxprobe's expose), with SQNR and statistics in numpy float64."""

from __future__ import annotations

import math
import sys

import numpy as np
import onnx

# as onnxprobe's worker does: no usage event sent by a process forked from the test run
if "openvino" not in sys.modules:
    sys.modules.setdefault("openvino_telemetry", None)


def openvino_values(path, names: list[str], feeds: dict, config: dict | None = None) -> dict[str, np.ndarray]:
    import openvino as ov

    core = ov.Core()
    proto = onnx.load(str(path))
    try:
        m = core.read_model(str(path))
    except RuntimeError:  # dynamic dimensions OpenVINO cannot read (silero's If branches): as the feeds say
        for vi in proto.graph.input:
            if vi.name in feeds:
                vi.type.tensor_type.ClearField("shape")
                for d in np.shape(feeds[vi.name]):
                    vi.type.tensor_type.shape.dim.add().dim_value = int(d)
        m = core.read_model(proto.SerializeToString())
    known = {n for op in m.get_ops() for o in op.outputs() for n in o.get_names()}
    unused = [n for n in names if n not in known]
    if unused:  # outputs nothing reads: OpenVINO drops their nodes unless they are graph outputs
        proto.graph.output.extend(onnx.ValueInfoProto(name=n) for n in unused)
        m = core.read_model(proto.SerializeToString())
    have = {n for o in m.outputs for n in o.get_names()}
    todo = [n for n in names if n not in have]
    if todo:
        m.add_outputs(todo)
    if m.is_dynamic():
        m.reshape({p.get_any_name(): list(np.shape(feeds[p.get_any_name()])) for p in m.inputs})
    cm = core.compile_model(m, "CPU", config or {})
    res = cm.create_infer_request().infer({k: np.array(v) for k, v in feeds.items()})
    return {n: np.array(res[cm.output(n)]) for n in names}


def ort_values(path, names: list[str], feeds: dict) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    m = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    types = {vi.name: vi for vi in m.graph.value_info}
    have = {o.name for o in m.graph.output}
    for n in names:
        if n not in have:
            m.graph.output.append(types[n] if n in types else onnx.ValueInfoProto(name=n))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip(names, s.run(names, feeds)))


def sqnr(a: np.ndarray, b: np.ndarray) -> float:
    """10 log10(sum b^2 / sum (a - b)^2) in float64; inf when a == b."""
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    noise = float(np.sum((a - b) ** 2))
    if noise == 0:
        return math.inf
    return 10 * math.log10(max(float(np.sum(b ** 2)), 1e-300) / noise)


def check_sqnr_agrees(res, path, feeds: dict, within_db: float = 0.5) -> int:
    """Every measured pair of an ``api.diff(..., vs_runtime="openvino")`` result against the direct
    computation; returns how many pairs were checked."""
    pairs = [r for r in res.results if r.metrics is not None]
    names = [r.pair.a.probe for r in pairs]
    ov_v = openvino_values(path, names, feeds)
    ort_v = ort_values(path, names, feeds)
    for r in pairs:
        n = r.pair.a.probe
        want = sqnr(ort_v[n], ov_v[n])
        got = r.metrics.sqnr_db
        if math.isinf(want) or math.isinf(got):
            assert math.isinf(want) and math.isinf(got), (n, got, want)
        else:
            assert abs(got - want) <= within_db, (n, got, want)
    return len(pairs)


def compute_outputs(model: onnx.ModelProto) -> list[str]:
    """The outputs of the main graph's Conv, MatMul and Gemm nodes (what the issue's 80 % is of)."""
    return [n.output[0] for n in model.graph.node if n.op_type in ("Conv", "MatMul", "Gemm")]
