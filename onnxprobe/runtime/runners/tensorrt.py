"""The TensorRT runner (``--runtime tensorrt``, ``pip install 'onnxprobe[tensorrt]'``): engines built from
the model by TensorRT's ONNX parser, tensors read as debug tensors (TensorRT >= 10) or marked outputs
(``--runtime-option mode=output``), statistics computed on the host one tensor at a time
(``tensorrt_engine``). UNTESTED ON HARDWARE (see tensorrt_engine).

Options (``--runtime-option KEY=VALUE``): ``mode=debug|output``, ``workspace=SIZE`` (the builder's
workspace pool, default 1G), ``tf32=0|1`` (TensorRT's default is on: float32 matrix products in TF32,
a 10-bit mantissa, on Ampere and newer GPUs; the default criterion of diff then is the one for reduced
precision). Other precisions come from the model's own types (TensorRT 11 networks are strongly typed;
there are no precision flags to set).

Observable: the tensors the parser names after the ONNX values, minus those TensorRT computes at build
time (constants, shapes) and those inside If/Loop bodies, which cannot be marked.
"""

from __future__ import annotations

import importlib.util
import tempfile
from collections import OrderedDict

import numpy as np
import onnx

from onnxprobe.errors import (RUNTIME_OPTIONS, DeviceUnavailable, ExecutionError, MissingExtra, UsageError, first_line,
                              setting_error)
from onnxprobe.graph.io import is_large, save_beside
from onnxprobe.graph.memo import ModelMemo
from onnxprobe.graph.weight_files import filled
from onnxprobe.runtime.budget import parse_size
from onnxprobe.runtime.feeds import fed
from onnxprobe.runtime.runners.host_stats import Collected, HostStatsRunner
from onnxprobe.runtime.runners.observability import body_tensors, compiled_unobservable
from onnxprobe.types import RunConfig, Settings

MODES = ("debug", "output")
OPTIONS = ("mode", "workspace", "tf32")
MAX_ENGINES = 2
MAX_SOURCES = 3  # models kept serialized: the runner's own and the derived graphs (cones) of one diff step


def require_tensorrt(setting: tuple[str, str] = Settings().runtime) -> None:
    """MissingExtra unless tensorrt and cuda-python can be imported; ``setting``: the one that asked for TensorRT
    (API parameter, flag)."""
    for module in ("tensorrt", "cuda"):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise MissingExtra(setting, "tensorrt", "tensorrt and cuda-python" if module == "cuda" else module, "tensorrt")


def usable(device: str | None, settings: Settings = Settings()):
    """(tensorrt, Cuda on the device): TensorRT imported and the CUDA device set, or one line saying why not
    (``check_usable`` calls it before any work, the runner as it is made): TensorRT not installed
    (MissingExtra), installed but its libraries do not load (ExecutionError), no GPU, driver or such device
    (DeviceUnavailable). ``settings``: the flags that chose the runtime and the device."""
    from onnxprobe.runtime.runners.tensorrt_engine import Cuda, modules

    require_tensorrt(settings.runtime)
    gpu = resolve_device(device, settings.device)
    try:  # installed, yet its libraries do not load (CUDA libraries of another version, a partial install)
        trt, cudart = modules()
    except (ImportError, OSError) as e:
        raise setting_error(ExecutionError, settings.runtime, f"tensorrt: TensorRT is installed but cannot be imported "
                            f"({type(e).__name__}: {first_line(e)}); reinstall it: pip install 'onnxprobe[tensorrt]' "
                            "(its CUDA libraries must suit the GPU's driver)") from None
    try:
        return trt, Cuda(cudart, gpu)
    except ExecutionError as e:  # no GPU, no driver, no such device
        given = device not in (None, "auto")
        raise setting_error(DeviceUnavailable, settings.device if given else settings.runtime,
                            f"{device if given else 'tensorrt'}: TensorRT cannot use CUDA device {gpu} here: "
                            f"{str(e).removeprefix('CUDA: ')} (TensorRT needs an NVIDIA GPU and its driver)") from None


def resolve_device(device: str, what: tuple[str, str] = ("device", "--device")) -> int:
    """The CUDA device index: auto, cuda, gpu -> 0; cuda:N, gpu:N -> N."""
    d = (device or "auto").strip().lower()
    if d in ("auto", "cuda", "gpu"):
        return 0
    head, sep, idx = d.partition(":")
    if head in ("cuda", "gpu") and sep and idx.isdigit():
        return int(idx)
    raise setting_error(UsageError, what, f"{device}: TensorRT runs on CUDA GPUs (auto, cuda, cuda:N)")


class TensorRtRunner(HostStatsRunner):
    kind = "tensorrt"
    title = "TensorRT"

    def __init__(self, model: onnx.ModelProto, config: RunConfig | None = None, label: str = "", *,
                 options: dict[str, str] | None = None, max_memory: int | None = None, settings: Settings = Settings()):
        require_tensorrt(settings.runtime)
        super().__init__(model, config, label, max_memory=max_memory)
        self.gpu = resolve_device(self.config.device, settings.device)
        self.device = f"cuda:{self.gpu}"
        opts = dict(options or {})
        self.options = opts
        unknown = [k for k in opts if k not in OPTIONS]
        if unknown:
            raise setting_error(UsageError, RUNTIME_OPTIONS, f"{unknown[0]}: TensorRT takes {', '.join(OPTIONS)}")
        self.mode = opts.get("mode")
        if self.mode is not None and self.mode not in MODES:
            raise setting_error(UsageError, RUNTIME_OPTIONS, f"mode={self.mode}: choose {' or '.join(MODES)}")
        self.workspace = parse_size(opts.get("workspace", "1G"), (*RUNTIME_OPTIONS, "workspace"))
        tf32 = opts.get("tf32")
        if tf32 is not None and tf32 not in ("0", "1"):
            raise setting_error(UsageError, RUNTIME_OPTIONS, f"tf32={tf32}: give 0 or 1")
        self.tf32 = None if tf32 is None else tf32 == "1"
        from onnxprobe.runtime.runners.tensorrt_engine import Logger

        self.trt, self.cuda = usable(self.config.device, settings)
        self.logger = Logger(self.trt)
        self._engines: OrderedDict = OrderedDict()
        self._names: dict = {}  # id(model) -> (model, readable names)
        # model -> (what the parser reads, its temporary folder or None)
        self._sources = ModelMemo(keep=MAX_SOURCES, dropped=lambda kept: kept[1] is not None and kept[1].cleanup())

    def describe(self) -> str:
        return f"{self.label} (TensorRT {self.trt.__version__}, {self.device}, {self.mode or 'debug'} tensors, {self.inference_precision()})"

    def inference_precision(self) -> str:
        """'tf32' when the builder lets float32 matrix products run in TF32 (its default), else 'f32'."""
        from onnxprobe.runtime.runners.tensorrt_engine import tf32_flag

        flag = tf32_flag(self.trt)
        if flag is None:
            return "f32"
        if self.tf32 is None:
            self.tf32 = bool(self.trt.Builder(self.logger).create_builder_config().get_flag(flag))
        return "tf32" if self.tf32 else "f32"

    def providers(self) -> list[str]:
        return [f"TensorRT {self.trt.__version__}"]

    def _source(self, model: onnx.ModelProto):
        """``model`` as TensorRT's parser reads it: its bytes, or for a model over 2 GB the path of a copy
        written to a temporary folder. Made once per model and kept on the runner (the readable check,
        each engine build and the debug fallback parse it again); the folder of one dropped from the
        last ``MAX_SOURCES`` is removed (the parser reads it only while parsing), the others go with the
        runner (TemporaryDirectory removes its folder when collected)."""
        def make():
            whole = filled(model)  # weights left in their files read in: the parser reads the proto's own bytes
            if not is_large(whole):
                return whole.SerializeToString(), None
            folder = tempfile.TemporaryDirectory(prefix="onnxprobe-trt-")
            return save_beside(whole, folder.name), folder

        return self._sources.get(model, None, make)[0]

    def _mode(self, network) -> str:
        if self.mode is None:
            self.mode = "debug" if hasattr(network, "mark_debug") else "output"
        return self.mode

    def _readable(self, model: onnx.ModelProto) -> set[str]:
        have = self._names.get(id(model))
        if have is not None and have[0] is model:
            return have[1]
        from onnxprobe.runtime.runners.tensorrt_engine import all_tensors, build_time_tensors, parse

        _b, network, _p = parse(self.trt, self.logger, self._source(model))
        self._mode(network)
        names = set(all_tensors(network)) - build_time_tensors(self.trt, network) - set(body_tensors(model))
        self._names[id(model)] = (model, names)
        return names

    def unobservable(self, names: list[str]) -> dict[str, str]:
        return self.unobservable_in(self.model, names)

    def unobservable_in(self, model: onnx.ModelProto, names: list[str]) -> dict[str, str]:
        return compiled_unobservable(model, names, self._readable(model), "TensorRT")

    def collect(self, model: onnx.ModelProto, names: list[str], feeds: dict, *, stats: list[str], raw: list[str],
                key=None) -> Collected:
        from onnxprobe.runtime.runners.tensorrt_engine import build, run

        feeds = fed(model, feeds)  # its undeclared names left out, its unread inputs zeros where not fed
        shapes = {k: tuple(np.shape(v)) for k, v in feeds.items()}
        readable = self._readable(model)
        names = [n for n in names if n in readable]
        mode = self.mode or "output"
        ek = (id(model), tuple(names), tuple(sorted(shapes.items())), mode)
        build_s = 0.0
        if ek in self._engines:
            self._engines.move_to_end(ek)
            engine = self._engines[ek][1]
        else:
            engine, build_s = build(self.trt, self.logger, self._source(model), names, shapes, mode, self.workspace, self.tf32)
            self._engines[ek] = (model, engine)
            while len(self._engines) > MAX_ENGINES:
                self._engines.popitem(last=False)
        got = run(self.trt, self.cuda, engine, feeds, names, set(stats), set(raw), mode)
        lost = [n for n in names if n not in got["shapes"]]
        if lost and mode == "debug":  # NVIDIA/TensorRT #4456: a listener that is never called
            self.note(f"TensorRT returned no debug tensor for {len(lost)} marked tensors (NVIDIA/TensorRT #4456); "
                      "they were read again as marked outputs, which changes the engine's fusions")
            engine2, b2 = build(self.trt, self.logger, self._source(model), lost, shapes, "output", self.workspace, self.tf32)
            again = run(self.trt, self.cuda, engine2, feeds, lost, set(stats), set(raw), "output")
            for k in ("stats", "shapes", "values"):
                got[k].update(again[k])
            build_s += b2
        if mode == "output":
            if any(n not in {o.name for o in model.graph.output} for n in names):
                self.note("TensorRT: the probed tensors are marked as engine outputs, which breaks fusions (NVIDIA/TensorRT #2232)")
        missing = [n for n in names if n not in got["shapes"]]
        if missing:
            raise ExecutionError(f"TensorRT returned no value for {missing[0]!r}")
        return Collected(got["stats"], got["shapes"], got["values"], got["seconds"], build_s)
