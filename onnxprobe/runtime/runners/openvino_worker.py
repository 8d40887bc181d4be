"""The OpenVINO worker process: ``python -m onnxprobe.runtime.runners.openvino_worker``.

OpenVINO runs in a process of its own because some models crash it (measured: a Loop whose body slices
past its data kills the process with SIGSEGV, where onnxruntime raises an error). The parent
(``runners.openvino.OpenVinoRunner``) sends pickled requests on stdin and reads pickled replies on the
process's original stdout; whatever OpenVINO itself prints goes to stderr (a file the parent reads back
when the worker dies).

Requests (dicts, key ``op``):

- ``load``: read an ONNX model (``source``: bytes or a path) under ``key``; reply: its tensor names and the
  names of its inputs (OpenVINO drops an input no node reads: it takes no feed for it);
- ``run``: add ``outputs`` to model ``key`` (``Model.add_outputs`` by ONNX tensor name, before any
  reshape: reshaping first constant-folds some names away), reshape a dynamic model to the feed shapes
  (kept dynamic when that fails), compile for ``device`` with ``config``, infer once; reply: the
  statistics (``stats``: computed here, on the runtime's output buffers, so that only one row per
  tensor crosses back), shapes and the raw values asked for (``raw``), plus the compiled precision;
- ``device``: the devices OpenVINO sees and the precision ``config`` gives on ``device``;
- ``drop``: forget model ``key``.

Errors come back as ``{"error": one line}``: the last non-empty line of OpenVINO's message, which is
where it says what went wrong (the first is a C++ source location).
"""

from __future__ import annotations

import os
import pickle
import sys
import time
from collections import OrderedDict

import numpy as np

# the executed layers whose precision says how the model computes (int8 kernels of a QDQ model; f16)
COMPUTE_LAYERS = {"Convolution", "GroupConvolution", "Deconvolution", "FullyConnected", "MatMul", "GEMM"}
FLOAT_PRECISIONS = ["bf16", "f16", "f32"]  # coarsest first
VIRTUAL_DEVICES = {"AUTO", "HETERO", "MULTI", "BATCH"}  # they choose among the devices; not in available_devices
MAX_COMPILED = 3  # compiled models kept for reuse (the same outputs on the same shapes)


def last_line(e: BaseException) -> str:
    """The line of an OpenVINO message that says what went wrong: the frontend's summary ("-- No
    conversion rule found for operations: ...", "-- Conversion is failed for: ..."), else the last line
    (the first is a C++ source location), leaving out the pointer to the extensibility docs."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    if "Summary:" in lines:
        summary = [ln.lstrip("- ") for ln in lines[lines.index("Summary:") + 1:] if ln.startswith("--")]
        if summary:
            return "; ".join(summary)[:500]
    lines = [ln for ln in lines if not ln.startswith("To facilitate the conversion")]
    return (lines[-1] if lines else type(e).__name__)[:500]


def type_name(t) -> str:
    """'f32', 'f16', 'bf16' for an ov.Type (its str() is "<Type: 'float32'>")."""
    return t.get_type_name() if hasattr(t, "get_type_name") else str(t)


def precision_name(t) -> str | None:
    """An INFERENCE_PRECISION_HINT as read back: 'f32', 'f16', 'bf16', or None where none is set (the
    'dynamic' type: EXECUTION_MODE_HINT=ACCURACY, INFERENCE_PRECISION_HINT=undefined), the model then
    computing in its own types."""
    name = type_name(t)
    return None if name in ("dynamic", "undefined", "?", "") else name


def tensor_names(model) -> list[str]:
    """Every ONNX tensor name the converted model carries (aliases included: a tensor may hold several)."""
    return sorted({n for op in model.get_ops() for o in op.outputs() for n in o.get_names()})


def without_telemetry() -> None:
    """``import openvino`` sends a usage event to Google Analytics (openvino_telemetry) from a process it
    forks. onnxprobe sends nothing anywhere, and that fork would also inherit this worker's pipes: it
    keeps the reply pipe open after a crash (the parent would wait forever) and deadlocks closing stdin.
    Without the openvino_telemetry module OpenVINO uses its own no-op stub (tools/ovc/telemetry_stub)."""
    if "openvino" not in sys.modules:
        sys.modules["openvino_telemetry"] = None  # import openvino_telemetry now raises ImportError


class Worker:
    def __init__(self):
        without_telemetry()
        import openvino as ov

        self.ov = ov
        self.core = ov.Core()
        self.models: dict = {}
        self.compiled: OrderedDict = OrderedDict()

    def load(self, key, source, outputs: list[str] = ()) -> dict:
        """Read model ``source`` as ``key``. ``outputs``: the ONNX graph's output names, in order: one OpenVINO lost
        (read from bytes, a Dropout's output named after the Dropout that follows it: Result 'd2' for output 'd1')
        is given back to its Result, where no other tensor carries it, so that it is read as the output it is."""
        self.models[key] = m = self.core.read_model(source)
        for k in [k for k in self.compiled if k[0] == key]:
            del self.compiled[k]
        if len(outputs) == len(m.outputs):
            known = set(tensor_names(m))
            for name, port in zip(outputs, m.outputs):
                if name and name not in known:
                    port.get_tensor().add_names({name})
        return {"names": tensor_names(m), "inputs": sorted({n for p in m.inputs for n in p.get_names()})}

    def drop(self, key) -> dict:
        self.models.pop(key, None)
        for k in [k for k in self.compiled if k[0] == key]:
            del self.compiled[k]
        return {}

    def device(self, device: str, config: dict) -> dict:
        out = {"devices": list(self.core.available_devices)}
        base = device.split(":")[0].split(".")[0]
        if base in out["devices"] or device in out["devices"] or base in VIRTUAL_DEVICES:
            try:
                out["precision"] = precision_name(self.core.get_property(device, "INFERENCE_PRECISION_HINT"))
            except Exception:  # noqa: BLE001 - a device without the property (NPU; AUTO, HETERO: compiled below)
                out["precision"] = None
            if config or out["precision"] is None:
                refused, compiled = self._refused(device, config)
                # a refusal is the options' when the device takes the model without them (AUTO:GPU without
                # a GPU refuses whatever the options); else the model's compile reports it
                if config and refused and self._refused(device, {})[0] is None:
                    out["option_error"] = refused
                if refused is None:  # the precision these options give (a hint the device lacks is not it; None: the
                    out["precision"] = compiled  # model's own types, as EXECUTION_MODE_HINT=ACCURACY gives)
        return out

    def _refused(self, device: str, config: dict) -> tuple[str | None, str | None]:
        """(why ``device`` refuses ``config`` (an unknown property, a wrong value) or None, the precision
        it compiles in with it or None): one tiny model compiled with it (milliseconds). Known before the
        user's model is read, so the error names the options, not the model (which is only compiled
        later, where any error could be the model's), and the default criterion knows the precision."""
        import openvino.opset13 as ops

        p = ops.parameter([1], self.ov.Type.f32, name="x")
        try:
            cm = self.core.compile_model(self.ov.Model([ops.relu(p)], [p], "onnxprobe-options"), device, config)
        except Exception as e:  # noqa: BLE001 - OpenVINO raises RuntimeError for every refusal
            return last_line(e), None
        return None, compiled_precision(cm)

    def compiled_model(self, key, outputs: list[str], shapes: dict, device: str, config: dict):
        ck = (key, tuple(outputs), tuple(sorted(shapes.items())), device, tuple(sorted(config.items())))
        if ck in self.compiled:
            self.compiled.move_to_end(ck)
            return self.compiled[ck], 0.0
        t0 = time.perf_counter()
        m = self.models[key].clone()
        have = {n for o in m.outputs for n in o.get_names()}
        todo = [n for n in outputs if n not in have]
        if todo:
            m.add_outputs(todo)
        if m.is_dynamic():
            try:
                m.reshape({p.get_any_name(): list(shapes[p.get_any_name()]) for p in m.inputs if p.get_any_name() in shapes})
            except Exception:  # noqa: BLE001 - the CPU plugin compiles dynamic models too
                pass
        cm = self.core.compile_model(m, device, config)
        self.compiled[ck] = cm
        while len(self.compiled) > MAX_COMPILED:
            self.compiled.popitem(last=False)
        return cm, time.perf_counter() - t0

    def run(self, key, outputs: list[str], feeds: dict, device: str, config: dict, stats: list[str], raw: list[str]) -> dict:
        from onnxprobe.stats.tensor_stats import TensorStats

        cm, compile_s = self.compiled_model(key, outputs, {k: tuple(np.shape(v)) for k, v in feeds.items()}, device, config)
        unfed = [p.get_any_name() for p in cm.inputs if not set(p.get_names()) & set(feeds)]
        if unfed:  # OpenVINO would run on the request's uninitialised input buffer
            raise RuntimeError(f"no value for OpenVINO's input {', '.join(repr(n) for n in unfed)}: it is none of the model's "
                               "input names (OpenVINO renamed it)")
        req = cm.create_infer_request()
        t0 = time.perf_counter()
        res = req.infer({k: _ov_input(v) for k, v in feeds.items()})
        seconds = time.perf_counter() - t0
        by_name = {}
        for port in cm.outputs:
            for n in port.get_names():
                by_name[n] = port
        out = {"stats": {}, "shapes": {}, "values": {}, "missing": [], "int64": 0, "float64": 0, "float16": 0, "seconds": seconds,
               "compile_seconds": compile_s}
        want_stats, want_raw = set(stats), set(raw)
        for n in outputs:
            port = by_name.get(n)
            if port is None:
                out["missing"].append(n)
                continue
            v = _widened(res[port], port, req.get_tensor(port).get_shape())
            out["shapes"][n] = tuple(int(d) for d in np.shape(v))
            out["int64"] += v.dtype == np.int64
            out["float64"] += v.dtype == np.float64
            out["float16"] += v.dtype == np.float16  # bf16 outputs are widened to float32 above
            if n in want_stats:
                a = np.asarray(v)
                out["stats"][n] = TensorStats.from_array(a) if a.dtype.kind in "biuf" else None
            if n in want_raw:
                out["values"][n] = np.asarray(v)
        del res
        out.update(precision_info(cm))
        return out


def _ov_input(v):
    """A feed for OpenVINO: an own, writable copy (read-only arrays fail); a bfloat16 array (ml_dtypes' type,
    which OpenVINO does not read) as a bf16 tensor of its bits."""
    a = np.array(v)
    if a.dtype.name != "bfloat16":
        return a
    import openvino as ov

    return ov.Tensor(a.view(np.uint16), list(a.shape), ov.Type.bf16)


# OpenVINO's element types that it hands back as their bits (uint8 bytes; the 4-bit ones packed two to a byte,
# the first element in the lowest bits, in a flat array), as onnxruntime's element type of the same encoding
NARROW_OV_TYPES = {"f8e4m3": "tensor(float8e4m3fn)", "f8e5m2": "tensor(float8e5m2)", "f8e8m0": "tensor(float8e8m0)",
                   "f4e2m1": "tensor(float4e2m1)", "i4": "tensor(int4)", "u4": "tensor(uint4)"}


def _widened(v, port, shape=None) -> np.ndarray:
    """An output as numpy. OpenVINO hands a bf16 tensor back typed float16 over its bf16 bits (1.5 reads
    1.9375): those bits widened to float32, exactly. A float8, float4 or 4-bit integer tensor comes back as
    its bits (``NARROW_OV_TYPES``): the numbers they encode, as float32 (exactly, as onnxruntime's are read),
    in the tensor's ``shape`` (the output tensor's, which a packed buffer does not have)."""
    import openvino as ov

    t = port.get_element_type()
    if t == ov.Type.bf16:
        from onnxprobe.runtime.arrays import widened_bfloat16

        return widened_bfloat16(v)
    narrow = NARROW_OV_TYPES.get(type_name(t))
    if narrow is None:
        return v
    from onnxprobe.runtime.arrays import widened_narrow

    dims = tuple(int(d) for d in (shape if shape is not None else port.get_shape()))
    count = int(np.prod(dims, dtype=np.int64))
    return widened_narrow(np.asarray(v).view(np.uint8).reshape(-1), narrow, count).reshape(dims)


def precision_info(cm) -> dict:
    """The precision the compiled model really runs in: the INFERENCE_PRECISION_HINT property as compiled
    (not as asked: a CPU without f16 arithmetic compiles f32 whatever the hint), and how many executed
    layers run in each integer type (runtimePrecision of the runtime graph: int8 kernels of a QDQ model)."""
    info: dict = {"precision": None, "layer_precisions": {}, "devices": []}
    try:  # the devices that really run it (AUTO:CPU, HETERO:CPU: the CPU plugin)
        info["devices"] = [str(d) for d in cm.get_property("EXECUTION_DEVICES")]
    except Exception:  # noqa: BLE001 - informative only
        pass
    try:
        counts: dict = {}
        for op in cm.get_runtime_model().get_ops():
            rt = op.get_rt_info()
            if "runtimePrecision" in rt and rt["layerType"].astype(str) in COMPUTE_LAYERS:
                p = rt["runtimePrecision"].astype(str)
                counts[p] = counts.get(p, 0) + 1
        info["layer_precisions"] = counts
    except Exception:  # noqa: BLE001 - the runtime model is informative only
        pass
    info["precision"] = compiled_precision(cm, info["layer_precisions"])
    return info


def compiled_precision(cm, layer_precisions: dict | None = None) -> str | None:
    """The floating-point precision a compiled model computes in. A device's compiled model has the
    INFERENCE_PRECISION_HINT property; AUTO, MULTI and HETERO's raise on it (measured), so theirs is that
    of the devices they chose (EXECUTION_DEVICES, each one's compiled properties in DEVICE_PROPERTIES),
    else the one its compute layers ran in. Several devices: the coarsest (it decides the tolerance)."""
    try:
        return precision_name(cm.get_property("INFERENCE_PRECISION_HINT"))
    except Exception:  # noqa: BLE001 - AUTO, HETERO, MULTI, devices without the property
        pass
    found = []
    try:
        props = cm.get_property("DEVICE_PROPERTIES")
        for d in cm.get_property("EXECUTION_DEVICES"):
            p = props.get(d) or props.get(d.split(".")[0]) or {}
            if "INFERENCE_PRECISION_HINT" in p and precision_name(p["INFERENCE_PRECISION_HINT"]):
                found.append(precision_name(p["INFERENCE_PRECISION_HINT"]))
    except Exception:  # noqa: BLE001 - a plugin without these properties
        pass
    found = found or [p for p in (layer_precisions or {}) if p in FLOAT_PRECISIONS]
    return min(found, key=FLOAT_PRECISIONS.index) if found else None


def serve(stdin, stdout) -> None:
    try:
        w = Worker()
        pickle.dump({"ready": True}, stdout, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:  # noqa: BLE001 - the parent turns this into a one-line error
        pickle.dump({"error": f"cannot start OpenVINO: {type(e).__name__}: {last_line(e)}"}, stdout)
        stdout.flush()
        return
    stdout.flush()
    while True:
        try:
            req = pickle.load(stdin)
        except EOFError:
            return
        op = req.pop("op")
        try:
            reply = getattr(w, op)(**req)
        except Exception as e:  # noqa: BLE001 - every OpenVINO error becomes a reply
            reply = {"error": last_line(e)}
        pickle.dump(reply, stdout, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.flush()
        del reply


def watch_parent(interval: float = 0.5) -> None:
    """End this process as soon as the parent is gone: a parent killed with SIGKILL (out of memory, kill -9)
    cannot end it, and a worker in the middle of a long run would compute on until its reply found the pipe
    closed. A thread polls the parent's pid (OpenVINO releases the GIL while it compiles and runs); not
    PR_SET_PDEATHSIG, which fires when the parent's thread that started the worker ends."""
    import threading

    parent = int(os.environ.get("ONNXPROBE_OV_PARENT") or os.getppid())

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(1)

    threading.Thread(target=watch, name="onnxprobe-parent-watch", daemon=True).start()


def main() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it ends this process itself
    watch_parent()
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything OpenVINO prints must not reach the channel
    sys.stdout = sys.stderr
    serve(sys.stdin.buffer, channel)


if __name__ == "__main__":
    main()
