"""TensorRT engines for onnxprobe: parse ONNX, make chosen tensors readable, build, run, read back.

UNTESTED ON HARDWARE: written against the TensorRT 10/11 Python API (builder, OnnxParser, enqueueV3,
IDebugListener) and cuda-python's runtime bindings, with no GPU to run it on; ``bench/gpu_check.sh``
runs its tests on the next machine that has one.

Two ways to read an intermediate tensor:

- ``debug`` (TensorRT >= 10, the default): ``INetworkDefinition.mark_debug``; the engine's inputs and
  outputs stay those of the model, and TensorRT hands each marked tensor to an ``IDebugListener``
  during the run (a device pointer valid only inside the callback). TensorRT documents that a debug
  tensor is not fused away; the fusions around it are otherwise TensorRT's own.
- ``output``: ``mark_output``, as Polygraphy's ``--trt-outputs mark all`` does. It breaks TensorRT's
  layer fusions (NVIDIA/TensorRT #2232, #3592, #2571), so the values are those of another engine.

Either way each tensor is copied to the host and summarised (``TensorStats.from_array``) one at a time;
only the raw values asked for are kept.
"""

from __future__ import annotations

import ctypes
import time

import numpy as np

from onnxprobe.errors import ExecutionError
from onnxprobe.runtime.runners.readback import host_statistics


def modules():
    """(tensorrt, cudart): the TensorRT bindings and cuda-python's runtime API (new and old layouts)."""
    import tensorrt as trt

    try:
        from cuda.bindings import runtime as cudart
    except ImportError:  # cuda-python < 12.6
        from cuda import cudart
    return trt, cudart


class Cuda:
    """The few CUDA runtime calls a run needs; every error becomes an ExecutionError."""

    def __init__(self, cudart, device: int):
        self.rt = cudart
        self.check(cudart.cudaSetDevice(device))

    def check(self, ret):
        err = ret[0] if isinstance(ret, tuple) else ret
        if int(err) != 0:
            _, text = self.rt.cudaGetErrorString(err)
            raise ExecutionError(f"CUDA: {text.decode() if isinstance(text, bytes) else text}")
        return ret[1] if isinstance(ret, tuple) and len(ret) > 1 else None

    def alloc(self, nbytes: int) -> int:
        return int(self.check(self.rt.cudaMalloc(max(nbytes, 1))))

    def free(self, ptr: int) -> None:
        self.rt.cudaFree(ptr)

    def to_device(self, ptr: int, a: np.ndarray, stream) -> None:
        self.check(self.rt.cudaMemcpyAsync(ptr, a.ctypes.data, a.nbytes, self.rt.cudaMemcpyKind.cudaMemcpyHostToDevice, stream))

    def to_host(self, a: np.ndarray, ptr: int, stream) -> None:
        self.check(self.rt.cudaMemcpyAsync(a.ctypes.data, ptr, a.nbytes, self.rt.cudaMemcpyKind.cudaMemcpyDeviceToHost, stream))

    def sync(self, stream) -> None:
        self.check(self.rt.cudaStreamSynchronize(stream))


class Logger:
    """A TensorRT logger that keeps the errors (for one-line messages) and prints nothing."""

    def __new__(cls, trt):
        class _L(trt.ILogger):
            def __init__(self):
                trt.ILogger.__init__(self)
                self.errors: list[str] = []

            def log(self, severity, msg):
                if severity in (trt.ILogger.Severity.ERROR, trt.ILogger.Severity.INTERNAL_ERROR):
                    self.errors.append(str(msg))

        return _L()


def parse(trt, logger, source: bytes | str):
    """(builder, network, parser) for an ONNX model given as bytes or a path (external data beside it)."""
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # explicit batch (TensorRT 10), strongly typed (TensorRT 11)
    parser = trt.OnnxParser(network, logger)
    ok = parser.parse_from_file(source) if isinstance(source, str) else parser.parse(source)
    if not ok:
        errs = [parser.get_error(i) for i in range(parser.num_errors)]
        first = errs[0] if errs else None
        what = f"{first.desc()} (node {first.node_name()!r}, {first.node_operator()})" if first is not None else (
            logger.errors[-1] if logger.errors else "unknown parser error")
        raise ExecutionError(f"TensorRT cannot read the model: {what}")
    return builder, network, parser


def all_tensors(network) -> dict:
    """Name -> ITensor for the network's inputs and every layer output (Polygraphy's get_all_tensors)."""
    out = {network.get_input(i).name: network.get_input(i) for i in range(network.num_inputs)}
    for li in range(network.num_layers):
        layer = network.get_layer(li)
        for j in range(layer.num_outputs):
            t = layer.get_output(j)
            if t is not None:
                out[t.name] = t
    return out


def build_time_tensors(trt, network) -> set[str]:
    """Outputs of CONSTANT and SHAPE layers and shape tensors: TensorRT evaluates them while building
    and they cannot be marked (Polygraphy skips them too)."""
    out = set()
    for li in range(network.num_layers):
        layer = network.get_layer(li)
        for j in range(layer.num_outputs):
            t = layer.get_output(j)
            if t is not None and (layer.type in (trt.LayerType.CONSTANT, trt.LayerType.SHAPE) or getattr(t, "is_shape_tensor", False)):
                out.add(t.name)
    return out


def tf32_flag(trt):
    """TensorRT's TF32 builder flag (on by default: FP32 matrix products in TF32 on Ampere and newer)."""
    return getattr(getattr(trt, "BuilderFlag", None), "TF32", None)  # None: a build of TensorRT without it


def build(trt, logger, source, names: list[str], shapes: dict, mode: str, workspace: int, tf32: bool | None = None):
    """A deserialized engine of the model with ``names`` readable (``mode``: debug | output)."""
    builder, network, _parser = parse(trt, logger, source)
    tensors = all_tensors(network)
    for n in names:
        t = tensors[n]
        if t.is_network_output:
            continue
        ok = network.mark_debug(t) if mode == "debug" else (network.mark_output(t) or True)
        if ok is False:
            raise ExecutionError(f"TensorRT refused to mark {n!r} as a debug tensor")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace)
    flag = tf32_flag(trt)
    if flag is not None and tf32 is True:
        config.set_flag(flag)
    elif flag is not None and tf32 is False:
        config.clear_flag(flag)
    dynamic = [network.get_input(i) for i in range(network.num_inputs) if any(d < 0 for d in network.get_input(i).shape)]
    if dynamic:  # one profile: exactly the shapes of these feeds
        profile = builder.create_optimization_profile()
        for t in dynamic:
            s = tuple(shapes[t.name])
            profile.set_shape(t.name, s, s, s)
        config.add_optimization_profile(profile)
    t0 = time.perf_counter()
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise ExecutionError(f"TensorRT could not build an engine: {logger.errors[-1] if logger.errors else 'unknown error'}")
    engine = trt.Runtime(logger).deserialize_cuda_engine(plan)
    if engine is None:
        raise ExecutionError(f"TensorRT could not load its engine: {logger.errors[-1] if logger.errors else 'unknown error'}")
    return engine, time.perf_counter() - t0


def _take(got: dict, name: str, a: np.ndarray, stats: set[str], raw: set[str]) -> None:
    """Record one tensor read back: its shape, its statistics if asked, the array itself only if asked."""
    got["shapes"][name] = a.shape
    if name in stats:
        got["stats"][name] = host_statistics(a)
    if name in raw:
        got["values"][name] = a


def _listener(trt, cuda: Cuda, stats: set[str], raw: set[str], got: dict):
    class _Listener(trt.IDebugListener):
        def __init__(self):
            trt.IDebugListener.__init__(self)
            self.errors: list[str] = []

        def process_debug_tensor(self, addr, location, type, shape, name, stream):  # noqa: A002 - TensorRT's names
            try:
                a = np.empty(tuple(shape), dtype=trt.nptype(type))
                if location == trt.TensorLocation.HOST:
                    ctypes.memmove(a.ctypes.data, addr, a.nbytes)
                else:
                    cuda.to_host(a, addr, stream)
                    cuda.sync(stream)
                _take(got, name, a, stats, raw)
            except Exception as e:  # noqa: BLE001 - TensorRT swallows exceptions raised here
                self.errors.append(f"{name}: {type(e).__name__}: {e}")

    return _Listener()


def run(trt, cuda: Cuda, engine, feeds: dict, names: list[str], stats: set[str], raw: set[str], mode: str) -> dict:
    """One run; returns {"stats", "shapes", "values", "seconds"} for ``names`` (debug tensors through the
    listener, engine outputs copied back one at a time)."""
    got: dict = {"stats": {}, "shapes": {}, "values": {}}
    ctx = engine.create_execution_context()
    stream = cuda.check(cuda.rt.cudaStreamCreate())
    buffers: list[int] = []
    try:
        io = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = [n for n in io if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        for n in inputs:
            a = np.ascontiguousarray(feeds[n], dtype=trt.nptype(engine.get_tensor_dtype(n)))
            ctx.set_input_shape(n, a.shape)
            ptr = cuda.alloc(a.nbytes)
            buffers.append(ptr)
            cuda.to_device(ptr, a, stream)
            ctx.set_tensor_address(n, ptr)
        outs = {}
        for n in io:
            if n in inputs:
                continue
            shape = tuple(ctx.get_tensor_shape(n))
            if any(d < 0 for d in shape):
                raise ExecutionError(f"TensorRT: output {n!r} has a data-dependent shape, which onnxprobe does not read yet")
            dtype = np.dtype(trt.nptype(engine.get_tensor_dtype(n)))
            ptr = cuda.alloc(int(np.prod(shape)) * dtype.itemsize)
            buffers.append(ptr)
            ctx.set_tensor_address(n, ptr)
            outs[n] = (shape, dtype, ptr)
        listener = None
        if mode == "debug":
            listener = _listener(trt, cuda, stats, raw, got)
            ctx.set_debug_listener(listener)
            for n in names:
                if n not in outs and engine.is_debug_tensor(n):
                    ctx.set_tensor_debug_state(n, True)
        t0 = time.perf_counter()
        if not ctx.execute_async_v3(stream):
            raise ExecutionError("TensorRT: the engine failed to run (execute_async_v3 returned False)")
        cuda.sync(stream)
        got["seconds"] = time.perf_counter() - t0
        if listener is not None and listener.errors:
            raise ExecutionError(f"TensorRT debug tensor {listener.errors[0]}")
        for n, (shape, dtype, ptr) in outs.items():  # one at a time: summarised, then kept only when asked for
            if n not in names:
                continue
            a = np.empty(shape, dtype)
            cuda.to_host(a, ptr, stream)
            cuda.sync(stream)
            _take(got, n, a, stats, raw)
        return got
    finally:
        for ptr in buffers:
            cuda.free(ptr)
        cuda.rt.cudaStreamDestroy(stream)
