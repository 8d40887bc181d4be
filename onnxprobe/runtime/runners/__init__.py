"""One runner class per backend behind one interface (``base.Runner``): ``OrtRunner`` (onnxruntime, CPU or
CUDA), ``ReferenceRunner`` (onnx.reference), ``OpenVinoRunner`` (OpenVINO, in a worker process),
``TensorRtRunner`` (TensorRT), ``NpzRunner`` (saved activations). ``make_runner`` picks one by name, so
the commands never switch on a backend themselves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from onnxprobe.errors import RUNTIME_OPTIONS, UsageError, setting_error, settings_error
from onnxprobe.text import as_word
from onnxprobe.types import RunConfig, Settings  # RunConfig: annotations that typing.get_type_hints resolves (api.ort_config)

if TYPE_CHECKING:  # onnx costs a second to import: the OpenVINO worker, a package module, never needs it
    import onnx

RUNTIMES = ("ort", "openvino", "tensorrt", "reference")
TAKES_OPTIONS = ("openvino", "tensorrt")  # runtimes with settings of their own (--runtime-option)
# onnxruntime's: tf32=0|1, its CUDA provider's TF32 (RunConfig.tf32); its other settings are flags
ORT_OPTIONS = ("tf32",)
# what the others are set with instead
SETTINGS = {"ort": "tf32 for CUDA; its other settings are --device and --opt-level, a RunConfig's device and opt_level",
            "reference": "onnx.reference has no settings: it runs the graph as written, on the CPU"}


def check_runtime(runtime: str, what: tuple[str, str] = ("runtime", "--runtime")) -> str:
    """``runtime`` if it is one of RUNTIMES; ``what``: the setting (API parameter, flag) the error names."""
    if runtime not in RUNTIMES:
        raise setting_error(UsageError, what, f"{as_word(runtime)}: choose one of {', '.join(RUNTIMES)}")
    return runtime


def check_device(runtime: str, device: str, what: tuple[str, str]) -> None:
    """Raise the error the runner for ``runtime`` would raise for ``device`` (an unknown name, CUDA not
    usable here), naming the setting ``what``: the reference side's device is checked before any runner
    is built (the runner's own message names --device)."""
    if runtime == "ort":
        from onnxprobe.runtime.ort import resolve_device
    elif runtime == "openvino":
        from onnxprobe.runtime.runners.openvino import resolve_device
    elif runtime == "tensorrt":
        from onnxprobe.runtime.runners.tensorrt import resolve_device
    else:  # onnx.reference: make_runner says it has no devices
        return
    resolve_device(device, what)


def check_usable(runtime: str, device: str | None = None, settings: Settings = Settings()) -> None:
    """Raise, before any work, what making the runner for ``runtime`` on ``device`` would raise for want of
    the runtime or device here: its extra not installed (MissingExtra, checked without importing it), a
    device it has no such name for, CUDA without a usable provider. ``settings``: the flags that chose the
    runtime and the device, which the errors name. A diff checks both sides' before it reads them; TensorRT
    is imported and its CUDA device set (``tensorrt.usable``), as a broken install or a missing GPU shows then."""
    if runtime == "openvino":
        from onnxprobe.runtime.runners.openvino import require_openvino

        require_openvino(settings.runtime)
    elif runtime == "tensorrt":  # imported, and the GPU set: a TensorRT or GPU that does not work is said here too
        from onnxprobe.runtime.runners.tensorrt import usable

        usable(device, settings)
        return
    if device is not None:
        check_device(runtime, device, settings.device)


def make_runner(runtime: str, model: onnx.ModelProto, config: RunConfig | None = None, label: str = "", *,
                options: dict[str, str] | None = None, max_memory: int | None = None, shapes: dict | None = None,
                settings: Settings = Settings(), **kw):
    """The runner for ``runtime`` (``ort`` | ``openvino`` | ``tensorrt`` | ``reference``) over ``model``.
    ``options``: the runtime's own settings (OpenVINO properties, TensorRT builder settings);
    ``max_memory``: the budget of the runtimes whose statistics are computed on the host; ``shapes``: the
    feeds' input shapes, when known (OpenVINO reads some models only with static inputs); ``kw``: the
    onnxruntime runner's (interruptible, threads); ``settings``: the flags that chose the runtime and device."""
    check_runtime(runtime)
    if config is not None and runtime != "ort" and config.opt_level != "off":
        raise setting_error(UsageError, ("opt_level", "--opt-level"), f"{config.opt_level} sets onnxruntime's graph "
                            f"optimisations: runtime {runtime} does not take one")
    if config is not None and runtime == "reference" and config.device == "cuda":
        raise setting_error(UsageError, settings.device, "cuda: onnx.reference runs on the CPU (runtime reference)")
    options = own_options(runtime, options)
    if runtime == "ort" and options:
        config = ort_config(config, options, settings.device)
        options = None
    if options and runtime not in TAKES_OPTIONS:
        raise setting_error(UsageError, RUNTIME_OPTIONS, f": {runtime} takes none ({SETTINGS[runtime]})")
    if runtime == "ort":
        from onnxprobe.runtime.runners.ort import OrtRunner

        return OrtRunner(model, config, label, **kw)
    if runtime == "reference":
        from onnxprobe.runtime.runners.reference import ReferenceRunner

        return ReferenceRunner(model, config, label)
    if runtime == "openvino":
        from onnxprobe.runtime.runners.openvino import OpenVinoRunner

        return OpenVinoRunner(model, config, label, options=options, max_memory=max_memory, shapes=shapes, settings=settings)
    from onnxprobe.runtime.runners.tensorrt import TensorRtRunner

    return TensorRtRunner(model, config, label, options=options, max_memory=max_memory, settings=settings)


def parse_runtime_options(items: list[str] | None) -> dict[str, str]:
    """``--runtime-option KEY=VALUE`` (repeatable) -> {KEY: VALUE}; ``RUNTIME:KEY=VALUE`` addresses one
    runtime when both sides of a diff take options (``openvino:INFERENCE_PRECISION_HINT=f16``)."""
    from onnxprobe.runtime.input_flags import flag_items

    out: dict[str, str] = {}
    for item in flag_items(items, RUNTIME_OPTIONS, "INFERENCE_PRECISION_HINT=f16"):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or not value.strip():
            raise setting_error(UsageError, RUNTIME_OPTIONS, f"{item!r}: expected KEY=VALUE, e.g. INFERENCE_PRECISION_HINT=f16")
        if key in out and out[key] != value.strip():  # the last one silently won
            raise setting_error(UsageError, RUNTIME_OPTIONS, f"{key}: given twice with different values ({out[key]!r} and "
                                f"{value.strip()!r}); give one")
        out[key] = value.strip()
    return out


def ort_config(config: RunConfig | None, options: dict[str, str] | None,
               device_setting: tuple[str, str] = ("device", "--device")) -> RunConfig:
    """``config`` with onnxruntime's own options (``ORT_OPTIONS``: tf32=0|1, its CUDA provider's) set: any
    other key, another value, or tf32 where the device is not CUDA is a UsageError (``grad``, ``layers``,
    each side of a ``diff``); ``device_setting``: the setting that chose the device, named in the refusal."""
    from dataclasses import replace

    from onnxprobe.runtime.ort import resolve_device
    from onnxprobe.types import RunConfig

    config = config or RunConfig()
    options = own_options("ort", options)  # ort:tf32=0 is tf32=0 here as in make_runner
    for k, v in (options or {}).items():
        if k not in ORT_OPTIONS:
            raise setting_error(UsageError, RUNTIME_OPTIONS, f"{k}: ort takes only tf32=0|1 ({SETTINGS['ort']})")
        if v not in ("0", "1"):
            raise setting_error(UsageError, RUNTIME_OPTIONS, f"tf32={v}: give 0 or 1")
    if not options:
        return config
    device = resolve_device(config.device, device_setting)
    if device != "cuda":  # it read "this side runs on cpu (--device cuda)": as if that were the user's flag
        raise settings_error(UsageError, lambda say: (
            f"{say(RUNTIME_OPTIONS)} tf32 sets onnxruntime's CUDA provider, and this run is not on CUDA: it "
            f"{where(say, device_setting, config.device)}: tf32 applies with {on_cuda(say, device_setting)}"))
    return replace(config, tf32=options["tf32"] == "1")


def where(say, device_setting: tuple[str, str], device: str) -> str:
    """Where an onnxruntime run is, by the setting that put it there: "runs on the CPU (--device cpu)"; the
    automatic choice says why ("--device auto: no usable CUDA here")."""
    why = ": no usable CUDA here" if device == "auto" else ""
    return f"runs on the CPU ({say(device_setting)} {device}{why})"


def on_cuda(say, device_setting: tuple[str, str]) -> str:
    """The setting that puts a run on CUDA, in the reader's words ("--device cuda", "RunConfig(device='cuda')")."""
    api = "RunConfig(device='cuda')" if device_setting[0] == "device" else f"{device_setting[0]}='cuda'"
    return say.either(api, f"{say(device_setting)} cuda")


def own_options(runtime: str, options: dict[str, str] | None) -> dict[str, str] | None:
    """``options`` as one runtime of a command reads them: with any ``RUNTIME:KEY`` among them (as diff takes
    them), each checked for a runtime that runs here and ``runtime``'s own kept (``options_for``); else as given."""
    if options and any(":" in k for k in options):
        check_options_used([runtime], options)
        return options_for(runtime, options)
    return options


def options_for(runtime: str, options: dict[str, str] | None) -> dict[str, str]:
    """The options that apply to ``runtime``: unprefixed ones (when it takes options) and its own
    ``RUNTIME:KEY`` ones. KEY and RUNTIME:KEY with two values are refused: the one given last won."""
    out: dict[str, str] = {}
    given: dict[str, str] = {}
    for k, v in (options or {}).items():
        prefix, sep, rest = k.partition(":")
        if sep and prefix in RUNTIMES:
            if prefix != runtime:
                continue
            key = rest
        elif runtime in TAKES_OPTIONS or (runtime == "ort" and k in ORT_OPTIONS):
            key = k
        else:
            continue
        if key in out and out[key] != v:
            raise setting_error(UsageError, RUNTIME_OPTIONS, f"{key}: given as {given[key]}={out[key]} and {k}={v}, two values "
                                f"for {runtime}; give one")
        out[key], given[key] = v, k
    return out


def check_options_type(options) -> None:
    """Options are KEY -> VALUE strings: an API caller's list of "KEY=VALUE" (which parse_runtime_options
    reads) or numbers are one UsageError, not a ValueError from dict() or a garbled runtime message."""
    if options is not None and not (isinstance(options, dict) and all(isinstance(k, str) and isinstance(v, str)
                                                                     for k, v in options.items())):
        raise UsageError(f"runtime_options: expected a dict of strings {{KEY: VALUE}} (api.parse_runtime_options "
                         f"reads ['KEY=VALUE', ...]), got {type(options).__name__} {str(options)[:40]!r}")


def check_options_used(runtimes: list[str], options: dict[str, str] | None) -> None:
    """Refuse options that no side would receive (a typo'd prefix, options for onnxruntime), and options
    of the wrong kind (``check_options_type``)."""
    check_options_type(options)
    for k in options or {}:
        prefix, sep, _ = k.partition(":")
        if sep and prefix not in RUNTIMES:  # none of OpenVINO's CPU properties nor TensorRT's settings has a colon in its name
            raise setting_error(UsageError, RUNTIME_OPTIONS, f"{k}: {prefix!r} is not a runtime (RUNTIME:KEY=VALUE names one of "
                                f"{', '.join(RUNTIMES)})")
        if sep:
            if prefix not in runtimes:
                ran = list(dict.fromkeys(runtimes))
                raise setting_error(UsageError, RUNTIME_OPTIONS, f"{k}: {prefix} does not run here ({' and '.join(ran)} "
                                    f"{'do' if len(ran) > 1 else 'does'})")
        elif not any(r in TAKES_OPTIONS or (r == "ort" and k in ORT_OPTIONS) for r in runtimes):
            raise setting_error(UsageError, RUNTIME_OPTIONS, f"{k}: {' and '.join(dict.fromkeys(runtimes))} take no runtime options "
                                f"(they are for {', '.join(TAKES_OPTIONS)})")
