"""``diff``: compare a model with a reference, layer by layer; ``diff_grad``: compare their gradients."""

from __future__ import annotations

import math
import os
from pathlib import Path
from collections.abc import Mapping
from dataclasses import replace
from typing import NamedTuple

import numpy as np
import onnx

from onnxprobe.api.inputs import (
    Progress, as_progress, as_config, as_inputs, as_max_memory, as_model, as_selection, check_map, check_switches, expect,
)
from onnxprobe.api.inputs import TorchLike
from onnxprobe.api.profile import check_profile
from onnxprobe.compare.result import DiffResult
from onnxprobe.compare.diff import diff as _diff
from onnxprobe.compare.sensitivity import fp32_sensitivity as _sensitivity
from onnxprobe.compare.sides import Side, load_notes, model_side, npz_side, own_tensors, who_of
from onnxprobe.errors import RUNTIME_OPTIONS, ExecutionError, OnnxProbeError, UsageError, said, setting_error, settings_error
from onnxprobe.graph.model import Model
from onnxprobe.graph.select import Selection, check_selects
from onnxprobe.runtime import feeds as _feeds
from onnxprobe.runtime.feeds import SEED
from onnxprobe.runtime.arrays import by_position, read_arrays
from onnxprobe.runtime.npz import graph_fingerprint, npz_origin
from onnxprobe.report.format import num as fmt_num
from onnxprobe.runtime.ort import check_opt_level, resolve_device
from onnxprobe.runtime.runners import (check_options_used, check_runtime, check_usable, make_runner, options_for,
                                       on_cuda, ort_config, where)
from onnxprobe.stats.metrics import Tolerance
from onnxprobe.text import clean, controls, quote, some
from onnxprobe.types import InputSpec, RunConfig, Settings

VS_NPZ, FP32_SENSITIVITY = ("vs_npz", "--vs-npz"), ("fp32_sensitivity", "--fp32-sensitivity")  # as the API and the command line name them
VS_SETTINGS = Settings(("vs_runtime", "--vs-runtime"), ("vs_device", "--vs-device"))  # what sets the reference side's runner


def _side(label: str, model: Model, config: RunConfig, runtime: str = "ort", options: dict | None = None,
          threads: int | None = None, constants: bool = False, cuda_only: tuple = (), who: tuple[str, str] | None = None,
          **kw) -> Side:
    """``who``: the side's name for its errors (``who_of``). ``cuda_only``: onnxruntime settings that go to its
    CUDA sides alone (``_cuda_only``): a side of
    another device takes neither the option nor ``RunConfig.tf32``."""
    if threads and runtime == "ort":
        kw["threads"] = threads
    mine = options_for(runtime, options)
    if runtime == "ort" and cuda_only and resolve_device(config.device) != "cuda":
        mine = {k: v for k, v in mine.items() if k not in cuda_only}
        config = replace(config, tf32=None)
    return model_side(label, model, lambda proto: make_runner(runtime, proto, config, label, options=mine, **kw), constants,
                      who)


def _cuda_only(sides: list[tuple[str, str]], options: dict | None, tf32: bool | None = None) -> tuple:
    """tf32 (``--runtime-option tf32``, ``RunConfig.tf32``) sets onnxruntime's CUDA provider: in a diff of a
    CUDA side against a CPU one (--device cuda --vs-device cpu --runtime-option tf32=0), it is the CUDA
    side's; with no onnxruntime side on CUDA it goes to them all, and the first refuses the option (or notes
    the setting) for what it is. ``sides``: (runtime, device) of each side."""
    wanted = "tf32" in options_for("ort", options) or tf32 is not None
    if wanted and any(r == "ort" and resolve_device(d) == "cuda" for r, d in sides):
        return ("tf32",)
    return ()


def _refuse_tf32_nowhere(runtime: str, device: str, b_side: tuple[str, str], options: dict | None) -> None:
    """tf32 given to a diff whose B side has a device of its own (--vs-device, --vs-runtime) and where no
    onnxruntime side runs on CUDA: refused naming where each side runs and the flag that puts one on CUDA
    (side A's runner refused it as "this side runs on cpu (--device cuda)", which read as the user's flag)."""
    if "tf32" not in options_for("ort", options) or _cuda_only([(runtime, device), b_side], options):
        return
    sides = [("A", runtime, device, ("device", "--device")), ("B", *b_side, ("vs_device", "--vs-device"))]
    ort_sides = [s for s in sides if s[1] == "ort"]

    def say_it(say) -> str:
        runs = ", ".join(f"{label} {where(say, setting, dev)}" if rt == "ort" else f"{label} runs {rt}"
                         for label, rt, dev, setting in sides)
        how = " or ".join(f"{on_cuda(say, setting)} (side {label})" for label, _, _, setting in ort_sides)
        return (f"{say(RUNTIME_OPTIONS)} tf32 sets onnxruntime's CUDA provider, and no side of this diff runs onnxruntime "
                f"on CUDA: {runs}; tf32 applies with {how}")
    raise settings_error(UsageError, say_it)


def check_reference(b=None, *, vs_device: str | None = None, vs_opt_level: str | None = None, vs_reference: bool = False,
                    vs_npz=None, vs_torch=None, runtime: str = "ort", vs_runtime: str | None = None,
                    runtime_options: dict[str, str] | None = None, dataset: bool = False) -> str | None:
    """Check that exactly one reference is given and that the runtimes and their options make sense;
    returns ``vs_runtime`` (``reference`` for ``vs_reference``). ``dataset``: for a dataset diff, whose
    references are fewer (no saved activations, no PyTorch module)."""
    check_runtime(runtime)
    if vs_reference:
        if vs_runtime not in (None, "reference"):
            raise settings_error(UsageError, lambda say: say.either(
                f"vs_reference=True is vs_runtime='reference': give one of them, not vs_runtime={vs_runtime!r}",
                f"--vs-reference is --vs-runtime reference: give one of them, not --vs-runtime {vs_runtime}"))
        vs_runtime = "reference"
    if vs_runtime is not None:
        check_runtime(vs_runtime, ("vs_runtime", "--vs-runtime"))
        if vs_runtime == "reference" and vs_device is not None:
            raise settings_error(UsageError, lambda say: "give exactly one reference: " + say.either(
                "vs_device or vs_reference", "--vs-device or --vs-reference") + " (onnx.reference has no devices)")
    modes = [b is not None, vs_device is not None and vs_runtime is None, vs_opt_level is not None, vs_runtime is not None,
             vs_npz is not None, vs_torch is not None]
    if dataset and not any(modes):
        raise settings_error(UsageError, lambda say: say.either(
            "a dataset diff compares with one reference: b (a second model), vs_device, vs_opt_level, vs_runtime or "
            "vs_reference (saved activations and vs_torch are of one input)",
            "a dataset diff compares with one reference: a second model B, --vs-device, --vs-opt-level, "
            "--vs-runtime or --vs-reference (saved activations and --vs-torch are of one input)"))
    if sum(modes) != 1:
        raise settings_error(UsageError, lambda say: say.either(
            "give exactly one reference: b (a second model), vs_device, vs_opt_level, vs_runtime (vs_reference), "
            "vs_npz or vs_torch",
            "give exactly one reference: a second model B, --vs-device, --vs-opt-level, --vs-runtime "
            "(--vs-reference), --vs-npz or --vs-torch"))
    if vs_opt_level is not None:  # named as given (the side's own --opt-level is checked as that)
        check_opt_level(vs_opt_level, ("vs_opt_level", "--vs-opt-level"))
        if runtime != "ort" and vs_opt_level != "off":  # B runs on A's runtime: make_runner would name --opt-level
            raise setting_error(UsageError, ("vs_opt_level", "--vs-opt-level"), f"{vs_opt_level} sets onnxruntime's graph "
                                f"optimisations: runtime {runtime} does not take one")
    if vs_torch is not None and runtime != "ort":  # its options are onnxruntime's (tf32), read by ort_config
        raise settings_error(UsageError, lambda say: say.either("vs_torch runs the export on onnxruntime: drop runtime",
                                                                "--vs-torch runs the export on onnxruntime: drop --runtime"))
    if vs_torch is None:
        check_options_used([runtime] + ([vs_runtime or runtime] if vs_npz is None else []), runtime_options)
    return vs_runtime


def _lazy(runtime: str, vs_runtime: str | None) -> bool:
    """Whether the models given as paths are read leaving their big external weights in their files
    (``graph.weight_files``): where onnxruntime alone runs them, which maps those files itself."""
    return runtime == "ort" and vs_runtime in (None, "ort")


def make_sides(a: Model | str | os.PathLike, b: Model | str | os.PathLike | None = None, *, vs_device: str | None = None,
               vs_opt_level: str | None = None, vs_runtime: str | None = None, vs_npz=None, config: RunConfig | None = None,
               runtime: str = "ort", runtime_options: dict[str, str] | None = None, max_memory: int | None = None,
               shapes: dict | None = None, threads: int | None = None, constants: bool = False) -> tuple[Model, Side, Side]:
    """(model A, side A, side B) of a diff against one reference (``diff`` explains them; checked by
    ``check_reference``); ``shapes``: the feeds' input shapes (OpenVINO reads some models only with static
    inputs); ``threads``: onnxruntime's intra-op threads per side (a worker among others)."""
    config = config or RunConfig()
    lazy = _lazy(runtime, vs_runtime)
    a_model = as_model(a, lazy=lazy)
    label = a_model.source
    # each side's runtime and device, before either side is read (observing a big model takes seconds)
    check_usable(runtime, config.device)
    if vs_runtime is not None:
        check_usable(vs_runtime, vs_device if vs_runtime != "reference" else None, VS_SETTINGS)
    elif vs_device is not None:
        check_usable(runtime, vs_device, Settings(device=VS_SETTINGS.device))
    b_side = (vs_runtime or runtime, vs_device or ("auto" if vs_runtime else config.device))
    if b is None and (vs_runtime is not None or vs_device is not None):
        _refuse_tf32_nowhere(runtime, config.device, b_side, runtime_options)
    opts = dict(options=runtime_options, max_memory=max_memory, shapes=shapes, threads=threads, constants=constants,
                cuda_only=_cuda_only([(runtime, config.device), b_side], runtime_options, config.tf32))
    side_a = _side(label, a_model, config, runtime, who=who_of("A", a_model), **opts)
    if b is not None:
        b_model = as_model(b, "b", lazy=lazy)
        side_b = _side(b_model.source, b_model, config, runtime, who=who_of("B", b_model), **opts)
    elif vs_runtime is not None:
        # --opt-level is A's onnxruntime setting, as --device is: B on another runtime takes none; errors about
        # B's runtime and device name the flags that set them
        b_config = replace(config, device=vs_device or "auto",
                           opt_level=config.opt_level if vs_runtime == runtime else "off")
        side_b = _side(label, a_model, b_config, vs_runtime, **opts,
                       who=who_of("B", a_model, ("vs_runtime", "--vs-runtime", vs_runtime)),
                       settings=VS_SETTINGS)
    elif vs_device is not None:
        side_b = _side(label, a_model, replace(config, device=vs_device), runtime, **opts,
                       who=who_of("B", a_model, ("vs_device", "--vs-device", vs_device)),
                       settings=Settings(device=VS_SETTINGS.device))
    elif vs_opt_level is not None:
        side_b = _side(label, a_model, replace(config, opt_level=vs_opt_level), runtime, **opts,
                       who=who_of("B", a_model, ("vs_opt_level", "--vs-opt-level", vs_opt_level)))
    else:
        # an ONNX test data set folder: its expected outputs (output_N.pb) are the reference
        saved = vs_npz if isinstance(vs_npz, Activations) else activations(vs_npz, a_model.proto)
        # the model's inputs saved beside the activations are what A runs on (``diff``), not tensors to compare
        feeds = {i.name for i in _feeds.model_inputs(a_model.proto)}
        arrays = {k: v for k, v in saved.arrays.items() if k not in feeds}
        side_b = npz_side(saved.label, arrays, a_model, made_by=saved.made_by, quantized=saved.quantized,
                          from_file=saved.from_file)
        # layers --save of this very model: its tensors by their own names, exact (not a float model's); an
        # archive without the mark (older, or rewritten) is A's own where it holds a quantized integer tensor of A's
        obs = side_a.observation
        quantized = set(obs.hidden) | {n for o in obs.observables if o.kind != "float" for n in (o.name, o.probe)}
        if (saved.source is not None and saved.source == graph_fingerprint(a_model.proto)) or any(
                k in quantized and np.asarray(v).dtype.kind in "iu" for k, v in arrays.items()):
            side_a = own_tensors(side_a, list(arrays))
            side_b = replace(side_b, own_snapshot=True)
    return a_model, side_a, side_b


class Activations(NamedTuple):
    """Saved activations, read once: ``label`` (the file, or "activations" for a dict), the arrays, and
    whether they came from a file."""
    label: str
    arrays: dict[str, np.ndarray]
    from_file: bool = True
    source: str | None = None  # the graph_fingerprint of the model ``layers --save`` wrote them from
    made_by: tuple | None = None  # and the runtime, device and float precision that computed them (``npz_origin``)
    quantized: bool = False  # and that model is quantized


def activations(vs_npz, model: onnx.ModelProto | None = None) -> Activations:
    """The reference arrays of ``vs_npz``: a dict of tensor name -> array (each checked here, by name), or
    an ``.npz`` file or an ONNX test data set folder (read once: ``diff`` passes them on)."""
    if not isinstance(vs_npz, (Mapping, str, os.PathLike)):
        raise UsageError(f"vs_npz: expected a .npz file, a test data set folder or a dict of arrays, got "
                         f"{type(vs_npz).__name__} {controls(repr(vs_npz))[:40]}")
    if not isinstance(vs_npz, Mapping):
        arrays = read_arrays(vs_npz, "output", VS_NPZ)
        folder = Path(vs_npz)
        if folder.is_dir() and any(folder.glob("input_*.pb")):
            # the inputs the folder's outputs were computed from: A runs on them (``saved_inputs``), as on
            # those an .npz holds beside its activations
            inputs = read_arrays(folder, "input")
            if model is not None:  # a tensor named after no model input would leave A on random data
                specs = _feeds.model_inputs(model)
                inputs = by_position(inputs, [i.name for i in specs], "input")
                unknown = next((k for k in inputs if k not in {i.name for i in specs}), None)
                if unknown is not None:
                    raise settings_error(UsageError, lambda say: f"unknown input name {quote(unknown)} (from {say(VS_NPZ)} "
                                         f"{clean(folder)}); the model's inputs are: "
                                         f"{', '.join(i.describe() for i in specs) or 'none'}")
            arrays = {**inputs, **arrays}
        if model is not None:  # unnamed .pb tensors: the model's inputs and outputs of their positions
            arrays = by_position(arrays, [i.name for i in _feeds.model_inputs(model)], "input")
            arrays = by_position(arrays, [o.name for o in model.graph.output], "output")
        origin = npz_origin(folder) if not folder.is_dir() else None
        return Activations(str(vs_npz), arrays, source=origin and origin.source, made_by=origin and origin.made_by,
                           quantized=bool(origin and origin.quantized))
    arrays = {}
    for k, v in vs_npz.items():  # numbers, not lists or objects: a wrong value is refused here, by name
        a = np.asarray(v) if isinstance(k, str) and isinstance(v, (np.ndarray, np.generic, int, float)) else None
        if a is None or a.dtype.kind not in "biuf":
            raise UsageError(f"vs_npz: expected tensor name -> numpy array, got {controls(repr(k))[:40]} -> {type(v).__name__}")
        arrays[k] = a
    return Activations("activations", arrays, from_file=False)


def _other_than_saved(model: Model, spec: InputSpec, names: list[str], saved: dict) -> list[str]:
    """Those of inputs ``names`` whose value ``spec`` gives is not the one saved with the activations (the README's
    `--vs-npz test_data_set_0/ --inputs test_data_set_0/` names one file twice); all where the values cannot be
    read (the run says why). The given values are read once."""
    if not names:
        return names
    try:
        given = _feeds.given_values(_feeds.model_inputs(model.proto), spec)
    except OnnxProbeError:
        return names

    def same(a, b) -> bool:
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")

    return [k for k in names if k not in given or not same(given[k][0], saved[k])]


def saved_inputs(model: Model, inputs: InputSpec | None, saved: Activations) -> tuple[InputSpec | None, list[str]]:
    """``inputs`` with the model's inputs that ``saved`` (activations) holds, where the user gave none for
    them: the activations were computed from those, and random data would compare other computations
    (every pair failing). Returns (inputs, notes)."""
    names = [i.name for i in _feeds.model_inputs(model.proto)]
    spec = _feeds.named_files(inputs or InputSpec(), names)
    # arrays of unnamed input_N.pb files (--inputs test_data_set_0/) by the inputs they stand for: unnamed, the saved
    # value was added beside them, and the same file given twice read "given both by name and by position"
    spec = replace(spec, arrays=by_position(spec.arrays, names, "input"))
    given = set(spec.files) | set(spec.arrays)
    use = {i.name: np.asarray(saved.arrays[i.name]) for i in _feeds.model_inputs(model.proto)
           if i.name in saved.arrays and i.name not in given}
    where = os.path.basename(saved.label) if saved.from_file else "the activations given"
    # inputs neither given nor saved are random: a snapshot saved from other inputs (``layers --save``
    # keeps none; another --seed) then fails everywhere, and nothing else says why
    random = [i.name for i in _feeds.model_inputs(model.proto) if i.name not in given and i.name not in use]
    notes = [said(lambda say: f"A runs on seeded random data ({say(SEED)} {spec.seed}) for {', '.join(map(quote, random))}: "
                              f"{where} holds no value for {'them' if len(random) > 1 else 'it'} (give the "
                              + say.either("seed or the input arrays", "--seed or --input") +
                              " the activations were computed from)")] if random else []
    # inputs given that the file holds too: A runs on those given, and the activations were computed from the saved
    # ones (every pair may fail for it: said, not silently)
    over = sorted(i.name for i in _feeds.model_inputs(model.proto) if i.name in saved.arrays and i.name in given)
    over = _other_than_saved(model, spec, over, saved.arrays)
    notes += [f"A runs on the input{'s' if len(over) > 1 else ''} given for {', '.join(map(quote, over))}, not on "
              f"{'those' if len(over) > 1 else 'the one'} saved in {where}, from which its activations were computed"] if over else []
    if not use:
        return inputs, notes
    # a saved input the model refuses (another dtype or shape) is said to come from the file, not from --inputs
    label = {"arrays_from": f"{where}, saved with the activations"} if not spec.arrays else {}
    return replace(spec, arrays={**spec.arrays, **use}, **label), [
        f"A runs on the input(s) {f'saved in {where}' if saved.from_file else 'given'} with the activations: "
        f"{', '.join(sorted(use))}"] + notes


def diff(
    a: Model | str | os.PathLike,
    b: Model | str | os.PathLike | None = None,
    *,
    vs_device: str | None = None,
    vs_opt_level: str | None = None,
    vs_reference: bool = False,
    vs_npz: str | os.PathLike | dict | None = None,
    vs_torch: TorchLike | None = None,
    runtime: str = "ort",
    vs_runtime: str | None = None,
    runtime_options: dict[str, str] | None = None,
    selection: Selection | None = None,
    config: RunConfig | None = None,
    inputs: InputSpec | None = None,
    tolerance: Tolerance | None = None,
    per_tensor: dict | None = None,
    user_map: dict[str, str] | None = None,
    introduced: bool = True,
    max_memory: int | None = None,
    progress: Progress | None = None,
    fp32_sensitivity: int = 0,
    fuse: bool = True,
    profile: bool = False,
    extras: bool = True,
    _ticket=None,
    _early=None,
) -> DiffResult:
    """``api.diff``'s normal path (``api.diff_lean.diff`` is ``api.diff``, and documents every argument).
    ``_ticket``: the request as the plan cache keys it, where its direct mode may serve it (``api.diff_ticket``);
    ``_early``: its entry as ``api.diff_lean`` prepared it, if any (``api.diff_direct.served``)."""
    check_map(user_map)
    check_switches("diff", vs_reference=vs_reference, introduced=introduced, fuse=fuse, profile=profile, extras=extras)
    if not isinstance(fp32_sensitivity, int) or isinstance(fp32_sensitivity, bool):
        raise UsageError(f"fp32_sensitivity: expected a number of layers (an int), got {type(fp32_sensitivity).__name__}")
    if fp32_sensitivity < 0:
        raise setting_error(UsageError, FP32_SENSITIVITY,
                            f"{fp32_sensitivity}: the number of layers to rerun in fp32 (0: none)")
    selection, config, inputs, tolerance, per_tensor = checked_arguments(selection, config, inputs, tolerance, per_tensor)
    max_memory, progress = as_max_memory(max_memory), as_progress(progress)
    vs_runtime = check_reference(b, vs_device=vs_device, vs_opt_level=vs_opt_level, vs_reference=vs_reference,
                                 vs_npz=vs_npz, vs_torch=vs_torch, runtime=runtime, vs_runtime=vs_runtime,
                                 runtime_options=runtime_options)
    if profile:  # before any run: what --profile cannot time (the sides' runtimes, no one run of both)
        off = next((f for f, v in ((("vs_torch", "--vs-torch"), vs_torch is not None), (VS_NPZ, vs_npz is not None),
                                   (("vs_device", "--vs-device"), vs_device), (("vs_opt_level", "--vs-opt-level"), vs_opt_level),
                                   (("fuse=False", "--separate-runs"), not fuse)) if v), None)
        check_profile(runtime, vs_runtime=vs_runtime, vs_reference=vs_reference, one_run_off=off)
    if vs_torch is not None:
        config = ort_config(config, runtime_options)  # tf32=0|1 on CUDA, as diff --grad --vs-torch takes it
        if fp32_sensitivity:
            raise settings_error(UsageError, lambda say: f"{say(FP32_SENSITIVITY)} reruns a QDQ model A against a float model B: "
                                 f"not with {say.either('vs_torch', '--vs-torch')}")
        from onnxprobe.api.torch import diff_torch  # its grad planning and autodiff only for --vs-torch

        return diff_torch(a, vs_torch, selection=selection, config=config, inputs=inputs, tolerance=tolerance,
                          per_tensor=per_tensor, user_map=user_map, introduced=introduced, max_memory=max_memory,
                          progress=progress)
    from onnxprobe.api import diff_direct  # a repeated request: served from the plan cache without reading the models

    # (served lets the prepared entry go either way, before the normal path builds its own sessions)
    if _early is not None and (res := diff_direct.served(_ticket, lambda fed: make_sides(
            a, b, config=config, constants=bool(selection and selection.include_constants),
            shapes={k: tuple(np.shape(v)) for k, v in fed.items()})[1:], _early, tolerance)) is not None:
        if progress is not None:  # its one run done, as the normal path says of its own
            progress(1, 1)
        return res
    a_model = as_model(a, lazy=_lazy(runtime, vs_runtime))
    saved_notes: list[str] = []
    if vs_npz is not None:
        vs_npz = activations(vs_npz, a_model.proto)  # read once, for A's inputs and for side B
        inputs, saved_notes = saved_inputs(a_model, inputs, vs_npz)
    fs = _feeds.make_feeds(a_model.proto, inputs)
    try:  # building the sides reads the models (OpenVINO with the feeds' shapes: guessed ones may be the cause)
        a_model, side_a, side_b = make_sides(a_model, b, vs_device=vs_device, vs_opt_level=vs_opt_level, vs_runtime=vs_runtime,
                                             vs_npz=vs_npz, config=config, runtime=runtime, runtime_options=runtime_options,
                                             max_memory=max_memory, constants=bool(selection and selection.include_constants),
                                             shapes={k: tuple(getattr(v, "shape", ())) for k, v in fs.values.items()})
        saved_notes[:0] = _same_run_note(side_a, side_b, vs_runtime, vs_device, vs_opt_level,
                                         device_given=config is not None and config.device != "auto")
        check_selects(side_a.model.proto, side_b.model.proto, selection or Selection())
        res = _diff(side_a, side_b, fs.values, selection or Selection(), tolerance, per_tensor, user_map,
                    introduced, max_memory=max_memory, progress=progress, fuse=fuse, profile=profile, extras=extras)
    except ExecutionError as e:
        raise fs.explained(e) from e
    # what reading A and B as onnxruntime runs them changed (a domain imported twice, a weight listed twice), by side
    res.notes[:0] = list(dict.fromkeys(saved_notes + fs.notes_but_zeros + load_notes(a_model, side_b.model if b is not None else None)))
    if vs_opt_level is not None:
        res.notes += _unprobed_outputs(side_a, side_b, res, fs.values)
    res.feed = fs.values
    if fp32_sensitivity:
        res.sensitivity = _sensitivity(res, fs.values, fp32_sensitivity)
        if not res.sensitivity:
            res.notes.append("--fp32-sensitivity: no QDQ layer of A could be kept in fp32 (it needs a QDQ model A and a model B)")
    if _ticket is not None:
        diff_direct.remember(_ticket, res)
    return res


def _same_run_note(side_a: Side, side_b: Side, vs_runtime, vs_device, vs_opt_level, device_given: bool = False) -> list[str]:
    """The note for a reference that is A itself run the same way (--vs-runtime, --vs-device or --vs-opt-level
    naming A's own): the same runtime on the same device (as resolved: auto is the CPU here) with the same
    opt level, options and precision, by the two runners' facts."""
    if vs_runtime is not None:
        flag, value, what = "--vs-runtime", vs_runtime, "runtime, on A's device with A's settings"
    elif vs_device is not None:
        flag, value, what = "--vs-device", vs_device, "device"
    elif vs_opt_level is not None:
        flag, value, what = "--vs-opt-level", vs_opt_level, "opt-level"
    else:
        return []
    how = [{k: v for k, v in s.runner.facts().items() if k not in ("model", "providers")} for s in (side_a, side_b)]
    if how[0] != how[1]:
        return []
    # the device A runs on named already (--device cpu --vs-device cpu): no hint to name it
    hint = {"--vs-device": "" if device_given else " (give --device for A)", "--vs-opt-level": " (give --opt-level for A)"}.get(flag, "")
    return [f"{flag} {value} is A's own {what}: B is the same model run the same way, so the comparison shows only "
            f"differences between two runs{hint}"]


def _unprobed_outputs(side_a: Side, side_b: Side, res, feeds: dict) -> list[str]:
    """--vs-opt-level: the note when the model outputs of the two sides run as they are (no tensor exposed)
    differ otherwise than in the probed runs. Exposing a tensor keeps onnxruntime from fusing across it
    (SkipLayerNormalization, FusedMatMul, Conv+Add): BERT's outputs at opt-level all differ by 7e-7 from
    off, yet with every tensor exposed both runs computed the same kernels and every pair read exact."""
    if not (side_a.runner.takes_feeds and side_b.runner.takes_feeds and side_a.runner.runs_graphs):
        return []
    if "onnxruntime" not in (side_a.runner.kind, side_b.runner.kind):  # --vs-opt-level off on another runtime: one
        return []  # way of running it twice, no fusions of two levels (OpenVINO in bf16 moves with what is probed)
    outs = [o.name for o in side_a.model.proto.graph.output]
    probed = {r.pair.a.name: r.metrics for r in res.results if r.pair.a.name in outs and r.pair.b.name == r.pair.a.name}
    if not probed:
        return []
    try:
        va, _ = side_a.runner.execute(side_a.runner.model, feeds, list(probed))
        vb, _ = side_b.runner.execute(side_b.runner.model, feeds, list(probed))
    except ExecutionError:
        return []
    shown = []
    for name, m in probed.items():
        a, b = np.asarray(va[name]), np.asarray(vb[name])
        if m is None or a.shape != b.shape or a.dtype.kind not in "fc" or not a.size:
            continue
        with np.errstate(invalid="ignore", over="ignore"):
            d = float(np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if np.isfinite(a).any() else math.nan
        if math.isfinite(d) and (d == 0) != bool(m.exact) or (d and abs(d - m.max_abs) > 0.5 * max(d, m.max_abs)):
            shown.append(f"{quote(name)}: max|a-b| {fmt_num(d)} as they run, {'exact' if m.exact else fmt_num(m.max_abs)} probed")
    if not shown:
        return []
    return ["exposing tensors keeps onnxruntime from fusing across them, so the probed runs are not the two opt levels as "
            f"they run: the model outputs unprobed, {some(shown, form=str, sep='; ')}"
            + " (the pairs locate differences between the levels' unfused kernels; a diff of the outputs alone, "
            "--name on them, keeps more fusions)"]


def checked_arguments(selection, config, inputs, tolerance, per_tensor) -> tuple:
    """The arguments a notebook passes, checked at the door (``api.inputs``; model B where it is loaded,
    ``as_model(b, "b")``): a criterion that is not a Tolerance is one UsageError naming it; a dict of
    arrays is the inputs."""
    tolerance = expect(tolerance, Tolerance, "tolerance", "an api.Tolerance, e.g. api.Tolerance('sqnr', min_sqnr=30),")
    if per_tensor is not None:
        if not isinstance(per_tensor, Mapping):
            raise UsageError(f"per_tensor: expected a dict of tensor name -> api.Tolerance, got {type(per_tensor).__name__}")
        for name, t in per_tensor.items():
            expect(t, Tolerance, f"per_tensor[{name!r}]", "an api.Tolerance, e.g. api.Tolerance('max_abs', atol=0.5),")
    return as_selection(selection), as_config(config), as_inputs(inputs), tolerance, per_tensor
