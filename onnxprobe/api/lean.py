"""``api.layers``: a cache hit served lean, else ``core.layers``.

The second ``layers`` of the same model file with the same request (selection, seed, integer range, shapes,
device, opt level) reads neither the model's graph nor onnx: ``runtime.direct`` runs the probed copy the first
run left in the plan cache, over the file's own bytes, and the result is the one the first run gave (its notes
and warnings too). Anything unusual goes the normal way (``core.layers``), as every other command does: a
model given as a Model or ModelProto, another runtime or device than onnxruntime on the CPU (``auto`` where
onnxruntime lists no CUDA provider), values saved (``save``, ``save_to``), input files or arrays, a model over
2 GB, ``--no-cache``, a run whose statistics need the masked rerun (NaN or Inf), or any error. After a normal
run that qualifies, the index entry is written (``runtime.direct.entry``).
"""

from __future__ import annotations

import os
import stat

from onnxprobe.runtime import direct, plan_cache
from onnxprobe.types import InputSpec, Model, ProbePlan, ProbeResult, Progress, RunConfig, RunInfo, Selection

# what a front end does on its thread while a repeated request's session builds (its report's imports)
while_building = direct.while_building

__all__ = ["layers"]


def layers(model: Model | str | os.PathLike, selection: Selection | None = None, config: RunConfig | None = None,
           inputs: InputSpec | None = None, *, save: bool = False, save_to: str | os.PathLike | None = None,
           max_memory: int | None = None, progress: Progress | None = None, runtime: str = "ort",
           runtime_options: dict[str, str] | None = None, extras: bool = True) -> ProbeResult:
    """What ``onnxprobe layers`` does: the statistics of every selected tensor, computed in the graph
    (``core.layers``, which documents every argument). A repeated request on a model file is served from the
    plan cache without onnx (this module's docstring)."""
    ticket = None if type(extras) is not bool else _ticket(  # another value: the normal path says what is wrong
        model, selection, config, inputs, save, save_to, max_memory, runtime, runtime_options, extras)
    if ticket is not None:
        served = _served(ticket)
        if served is not None:
            return served
    from onnxprobe.api.core import layers as normal

    res = normal(model, selection, config, inputs, save=save, save_to=save_to, max_memory=max_memory,
                 progress=progress, runtime=runtime, runtime_options=runtime_options, extras=extras)
    if ticket is not None:
        _remember(ticket, res)
    return res


class _Ticket:
    """A request that may be served: the model file's path, the index key, the file's state when the request came
    (``runtime.direct.file_state``: a normal run during which it changed is not indexed) and the request's
    settings."""

    def __init__(self, path: str, key: str, state: tuple, opt_level: str, spec: InputSpec):
        self.path, self.key, self.state, self.opt_level, self.spec = path, key, state, opt_level, spec


def _ticket(model, selection, config, inputs, save, save_to, max_memory, runtime, runtime_options,
            extras: bool = True) -> _Ticket | None:
    """The request as it stands before any model is read, when one that ``runtime.direct`` can serve; None
    for anything else (what the module's docstring lists)."""
    if not isinstance(model, (str, os.PathLike)) or runtime != "ort" or runtime_options or save is not False \
            or save_to is not None or max_memory is not None:
        return None
    settings = servable(config, inputs, selection)
    if settings is None:
        return None
    config, inputs, selection = settings
    got = servable_file(model)
    if got is None:
        return None
    path, real, state = got
    # the model by its path, as given and resolved (a copy elsewhere is its own entry), never by its bytes: a
    # lookup that finds nothing reads none of the file; an entry found is checked against it (runtime.direct.run)
    request = {"command": "layers", "path": path, "real": real, **settings_request(config, inputs, selection, extras)}
    return _Ticket(path, direct.request_key(request), state, config.opt_level, inputs)


def settings_request(config: RunConfig, inputs: InputSpec, selection: Selection, extras: bool) -> dict:
    """The part of a direct mode's request that its settings make (``servable``'s, defaults filled in), as JSON: the
    same words in layers' key and diff's (``api.diff_ticket``)."""
    return {"device": config.device, "opt_level": config.opt_level, "io_binding": config.io_binding,
            "selection": [list(selection.ops), list(selection.names), selection.all, selection.range, selection.include_constants],
            "seed": inputs.seed, "int_range": list(inputs.int_range),
            "shapes": sorted([k, list(v)] for k, v in inputs.shapes.items()), "extras": extras}


def servable_file(model) -> tuple[str, str, tuple] | None:
    """A model given by a path that a direct mode may serve: (the path as given, resolved, and the file's state when
    the request came: ``runtime.direct.file_state``); None for anything else (a Model, a FIFO, a device, a folder,
    a file past ``runtime.direct.MAX_FILE``, a path that cannot be read: the normal path says what is wrong)."""
    if not isinstance(model, (str, os.PathLike)):
        return None
    path = os.fspath(model)
    if not isinstance(path, str):
        return None
    try:
        st = os.stat(path)
        real = os.path.realpath(path)
    except (OSError, ValueError, TypeError):
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > direct.MAX_FILE:
        return None
    return path, real, direct.file_state(st)


def servable(config, inputs, selection) -> tuple[RunConfig, InputSpec, Selection] | None:
    """The settings of a request a direct mode may serve (``layers``'s here, ``diff``'s in ``api.diff_direct``),
    defaults filled in: onnxruntime on the CPU (``auto`` where it lists no CUDA provider), inputs drawn from the
    seed, the cache on, the types themselves (a subclass or another value: the normal path says what is wrong);
    None for anything else."""
    config = RunConfig() if config is None else config
    inputs = InputSpec() if inputs is None else inputs
    selection = Selection() if selection is None else selection
    if type(config) is not RunConfig or type(inputs) is not InputSpec or type(selection) is not Selection:
        return None
    if config.tf32 is not None or inputs.files or inputs.arrays or inputs.arrays_complete or config.device not in ("auto", "cpu"):
        return None
    try:
        if not plan_cache.enabled(config.cache):
            return None
    except Exception:  # noqa: BLE001 - a cache setting that is wrong: the normal path says so
        return None
    from onnxprobe.runtime.ort_options import OPT_LEVELS, ort_module

    if config.opt_level not in OPT_LEVELS:
        return None
    if config.device == "auto" and "CUDAExecutionProvider" in ort_module().get_available_providers():
        return None  # auto may mean CUDA here: what runtime.ort.resolve_device says, with onnx
    return config, inputs, selection


def _served(ticket: _Ticket) -> ProbeResult | None:
    got = direct.run(ticket.key, ticket.path, ticket.state[0], ticket.opt_level)
    if got is None:
        return None
    plan = CachedPlan(None, got["probes"], ticket.path, list(got["warnings"]))
    plan.bind(ticket.path, got["skeleton"], ticket.state, got["file"])
    info = RunInfo(device="cpu", providers=got["providers"], opt_level=ticket.opt_level,
                   session_seconds=got["session_seconds"], run_seconds=got["run_seconds"], runtime="onnxruntime",
                   runtime_options=got["runtime_options"])
    return ProbeResult(plan, info, got["stats"], got["shapes"], {}, got["outputs"], notes=list(got["notes"]),
                       feed=got["feeds"])


def _remember(ticket: _Ticket, res: ProbeResult) -> None:
    """The index entry of a normal run that qualifies: onnxruntime on the CPU, no row summarised again (the
    masked rerun of NaN or Inf, which needs the graph), nothing the runtime could not return, no values kept, no float16 tensor (the CPU provider's notes about those depend on the values), every
    input drawn. The file must be as it was when the request came (size, modification time, inode): a model
    edited meanwhile gets no entry; ``runtime.direct.entry`` reads it a chunk at a time, never whole."""
    from onnxprobe.runtime.runners.base import fetched

    info, plan = res.info, res.plan
    # rows summarised again (NaN, Inf...: ``ProbeResult.reran``) need the graph: a lean run would be thrown away
    if res.reran or info.runtime != "onnxruntime" or info.device != "cpu" or info.precision or res.arrays or res.unobserved \
            or plan.base is None or plan.model is None:
        return
    if any(p.ref.dtype in ("float16", "bfloat16") or p.ref.kind not in ("node", "input")
           or (p.raw_output and not p.raw_for_stats) for p in plan.probes):
        return
    try:
        host, device, own = fetched(plan, plan.base)
        if device:
            return
        direct.entry(ticket.key, ticket.path, ticket.state, plan.model, plan.weights, list(plan.probes), host, own, res.feed,
                     ticket.spec.seed, ticket.spec.int_range, list(res.notes), list(plan.warnings),
                     dict(info.runtime_options or {}))
    except (OSError, ValueError):  # only a cache: a run that cannot be indexed is served the normal way
        return


class CachedPlan(ProbePlan):
    """The plan of a served result: its probes, source and warnings as the first run had them; the model
    (``base``) and its probed copy (``model``) are loaded, with onnx, only when something reads them (the
    report does not)."""

    _path: str | None = None
    _skeleton: bytes = b""
    _file: tuple = ((), {})  # the file's state when the request came, and the entry's record of its bytes

    def bind(self, path: str, skeleton: bytes, state: tuple = (), record: dict | None = None) -> None:
        self._path, self._skeleton, self._file = path, skeleton, (state, record or {})

    @property
    def base(self):
        if self.__dict__.get("_base") is None and self._path is not None:
            from onnxprobe.graph.model import load

            self._check()
            base = load(self._path).proto
            self._check()  # edited while it loaded
            self.__dict__["_base"] = base
        return self.__dict__.get("_base")

    def _check(self) -> None:
        """A ModelError where the file is no longer the one measured (a histogram, an overlay or the page of a
        served result read the model re-exported since, whose values contradicted the result's statistics)."""
        from onnxprobe.runtime.model_file import same_file

        if not same_file(self._path, *self._file):
            from onnxprobe.errors import ModelError
            from onnxprobe.text import clean

            raise ModelError(f"{clean(self._path)}: the model file changed since this run, which was served from the "
                             "plan cache and reads the model when first used: run it again")

    @base.setter
    def base(self, value) -> None:
        self.__dict__["_base"] = value

    @property
    def model(self):
        if self.__dict__.get("_model") is None and self._path is not None:
            self.__dict__["_model"] = direct.probed_model(self._skeleton, self.base)
        return self.__dict__.get("_model")

    @model.setter
    def model(self, value) -> None:
        self.__dict__["_model"] = value
