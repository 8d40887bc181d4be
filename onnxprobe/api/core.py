"""Load, probe, run: ``layers`` and dataset statistics, the foundation the other workflows build on."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Hashable, Iterator

import numpy as np

from onnxprobe.api.datasets import BatchWorker, Source, first_shapes, model_path, run_batches, source
from onnxprobe.api.inputs import (
    ModelLike, Progress, as_progress, as_config, as_inputs, as_max_memory, as_model, as_names, as_probe_result, as_raw, as_ray, as_selection, check_switches,
    checked_feed, load, of_model, proto_of,
)
from onnxprobe.errors import ExecutionError, ModelError, UsageError, settings_error
from onnxprobe.graph.expose import expose
from onnxprobe.graph.model import Model
from onnxprobe.graph.select import Selection
from onnxprobe.graph.select import select as select_refs
from onnxprobe.graph.skeleton import model_digest
from onnxprobe.runtime import feeds as _feeds
from onnxprobe.runtime.feeds import Feeds
from onnxprobe.runtime.runners import check_options_type, make_runner
from onnxprobe.runtime.ray_pool import Executor, RayOptions
from onnxprobe.runtime.runners.base import GraphRunner
from onnxprobe.stats.tensor_stats import TensorStats
from onnxprobe.text import clip, controls, some
from onnxprobe.types import FeedsFrom, InputSpec, ProbePlan, ProbeResult, RunConfig, RunInfo, TensorRef

LayersResult = ProbeResult  # what ``layers`` and ``run`` return: statistics per probed tensor

__all__ = ["Model", "load", "select", "plan", "feeds", "runner", "run", "layers", "save_tensors", "raw_chunks", "merge_stats",
           "DatasetResult", "layers_dataset", "LayersResult", "LayersWorker", "LayersWorkerFactory"]


def select(model: ModelLike, selection: Selection | None = None, **kw: object) -> list[TensorRef]:
    """The tensors ``selection`` picks in ``model`` (a Model, a path or a ModelProto), in topological
    order (``graph.select.select``, whose keywords ``kw`` are: ``strict``, ``sites``)."""
    unknown = sorted(set(kw) - {"strict", "sites"})
    if unknown:  # ops=, names=...: the criteria are a Selection's
        raise UsageError(f"select: no argument {unknown[0]!r}; the criteria go in a Selection: "
                         f"api.select(model, api.Selection({unknown[0]}=...))")
    if "strict" in kw:  # strict="no" is truthy: it would refuse what matches nothing
        check_switches("select", strict=kw["strict"])
    return select_refs(proto_of(model), as_selection(selection) or Selection(), **kw)


def plan(model: ModelLike, selection: Selection | None = None, *, stats: bool = True, raw: bool | set[str] = False) -> ProbePlan:
    """A rewritten copy of the model that exposes the selected tensors (their in-graph statistics, shapes
    and, with ``raw``, values) as outputs; ``model`` (a Model, a path or a ModelProto) is untouched.
    ``raw``: True (every selected tensor's values) or tensor names (one string is one name)."""
    check_switches("plan", stats=stats)
    model = as_model(model)
    refs = [r for r in select_refs(model.proto, as_selection(selection) or Selection()) if r.kind == "node"]
    raw = _raw_of(raw, [r.name for r in refs], "the selected node outputs")
    warnings = list(model.warnings)
    rewritten, probes = expose(model.proto, refs, stats=stats, raw=raw,
                               warnings=warnings, nonfinite="deferred")
    return ProbePlan(rewritten, probes, model.source, warnings, base=model.proto)


def feeds(model: ModelLike, inputs: InputSpec | None = None) -> Feeds:
    """The feed dict ``inputs`` describes for ``model`` (``.values``), with the dimensions it had to guess
    (``.defaulted``) and notes for people (``.notes``). ``inputs``: an InputSpec or a dict of arrays."""
    return _feeds.make_feeds(proto_of(model), as_inputs(inputs))


def runner(model: ModelLike, config: RunConfig | None = None, *, runtime: str = "ort", **kw: object) -> GraphRunner:
    """The runner of ``runtime`` (``ort`` | ``openvino`` | ``tensorrt`` | ``reference``) over ``model``, on
    ``config``'s device (the device within that runtime); ``options=`` the runtime's own settings."""
    model = as_model(model)
    return make_runner(runtime, model.proto, as_config(config), model.source, **kw)


def run(plan: ProbePlan | Model, feed: dict[str, np.ndarray] | Feeds, config: RunConfig | None = None,
        selection: Selection | None = None, *, raw: bool | set[str] = False, runtime: str = "ort",
        runtime_options: dict[str, str] | None = None, max_memory: int | None = None) -> ProbeResult:
    """Run once and read back the statistics of every probed tensor: of a plan (``plan(...)``), or of a
    model and a selection (graph inputs and weights a selection names get their statistics on the host).
    ``runtime``: ``ort`` (default), ``openvino``, ``tensorrt`` or ``reference``, with ``runtime_options``;
    OpenVINO and TensorRT compute statistics on their output buffers, within ``max_memory`` per run.
    ``feed`` must give every input of the model, with its dtype and fixed dimensions. ``raw``: the values
    to keep in ``result.arrays``: True (all) or tensor names (one string is one name) among those probed."""
    config, max_memory = as_config(config), as_max_memory(max_memory)
    if isinstance(plan, ProbePlan):
        if runtime != "ort":
            raise UsageError("a probed plan is ONNX rewritten for onnxruntime: pass the Model to run it on another runtime")
        if selection is not None:  # it was ignored: the rows came back for the plan's own tensors
            raise UsageError("selection: a plan's tensors are chosen when it is made (api.plan(model, selection)); "
                             "pass the Model to run another selection")
        base = plan.base if plan.base is not None else plan.model
        kept = [p.ref.name for p in plan.probes if p.raw_output]
        raw = _raw_of(raw, kept, "the tensors whose values the plan keeps (api.plan(..., raw=...))")
        if raw is True and not kept:  # nothing would come back, without a word
            raise UsageError("raw=True: the plan keeps no values (make it with api.plan(..., raw=True) or tensor names)")
        values = checked_feed(base, feed)
        r = make_runner("ort", base, config, plan.source, interruptible=True)
        res = r.run_plan(plan, values, raw=raw or set(kept))
        if raw:  # the plan's outputs are fixed: every value it keeps came back, and the result holds those asked for
            res.arrays = {n: v for n, v in res.arrays.items() if raw is True or n in raw}
    else:
        model = as_model(plan, "plan")
        refs = select_refs(model.proto, as_selection(selection) or Selection())
        raw = _raw_of(raw, [r.name for r in refs], "the selected tensors")
        values = checked_feed(model.proto, feed)
        res = _runner_for(model, config, runtime, runtime_options, max_memory, feed=values).probe(refs, values, raw=raw)
        res.plan.warnings[:0] = list(model.warnings)
    res.feed = values
    if isinstance(feed, Feeds):
        res.notes[:0] = feed.notes
    return res


def _raw_of(raw, names: list[str], among: str) -> bool | set[str]:
    """``raw`` (``as_raw``), whose names must be among ``names``: a value not probed would be missing
    from the result without a word."""
    raw = as_raw(raw)
    missing = sorted(raw - set(names)) if isinstance(raw, set) else []
    if missing:
        raise UsageError(f"raw: {clip(controls(repr(missing[0])), 60)} is not among {among}")
    return raw


def _runner_for(model: Model, config: RunConfig | None, runtime: str, options: dict[str, str] | None,
                max_memory: int | None, interruptible: bool = True, feed: dict | None = None,
                threads: int | None = None, shapes: dict | None = None) -> GraphRunner:
    """The runner of ``runtime``; ``feed``: a run's feeds, whose shapes (or ``shapes``) OpenVINO reads some
    models with; ``threads``: onnxruntime's intra-op threads (a Ray actor's one), default its own."""
    check_options_type(options)
    if runtime == "ort":
        return runner(model, config, interruptible=interruptible, options=options, **({"threads": threads} if threads else {}))
    if feed:
        shapes = {k: tuple(np.shape(v)) for k, v in feed.items()}
    return runner(model, config, runtime=runtime, options=options, max_memory=max_memory, shapes=shapes)


RUNTIME_OF_KIND = {"onnxruntime": "ort", "onnx.reference": "reference", "openvino": "openvino", "tensorrt": "tensorrt"}


def _runner_of(model: Model, result: ProbeResult, config: RunConfig | None) -> GraphRunner:
    """A runner like the one that made ``result``: the same runtime, device and runtime options."""
    info = result.info
    runtime = RUNTIME_OF_KIND.get(info.runtime, "ort")
    config = config or RunConfig(device=info.device, opt_level=info.opt_level or RunConfig.opt_level)
    if runtime == "ort":
        return runner(model, config)
    return runner(model, config, runtime=runtime, options=dict(info.runtime_options) or None)


def layers(model: Model | str | os.PathLike, selection: Selection | None = None, config: RunConfig | None = None,
           inputs: InputSpec | None = None, *, save: bool = False, save_to: str | os.PathLike | None = None,
           max_memory: int | None = None, progress: Progress | None = None, runtime: str = "ort",
           runtime_options: dict[str, str] | None = None, extras: bool = True) -> ProbeResult:
    """What ``onnxprobe layers`` does: the statistics of every selected tensor, computed in the graph.

    ``save=True`` keeps the raw tensors in ``result.arrays``. ``save_to=FILE.npz`` streams them to disk
    instead, in as many runs as it takes to keep at most ``max_memory`` bytes of them alive at once
    (default: a quarter of the available memory); ``progress(done, total)`` is called per run.
    ``runtime`` / ``runtime_options``: the runtime that runs the model (see ``run``); the tensors it
    cannot observe are in ``result.unobserved`` with the reason. ``model``: a Model, a path or a
    ModelProto; ``inputs``: an InputSpec or a dict of arrays by input name.

    ``extras=False`` computes only what the layers table shows: tensors summarised block by block in the
    graph (float tensors of a known size, most of a model's) leave out Σ|x| and the count of zeros, so their
    statistics have ``abs_mean`` and ``zero_fraction`` None (JSON null); the other forms (statistics on the
    host, the fast pieces of other tensors, rows reran with masks for NaN/Inf) may still compute them.
    Default True: every tensor has them.
    """
    check_switches("layers", save=save, extras=extras)
    # a path read for onnxruntime leaves its big external weights in their files (graph.weight_files): onnxruntime
    # maps them, and the proto never holds them
    model, selection, config = as_model(model, lazy=runtime == "ort"), as_selection(selection), as_config(config)
    max_memory, progress = as_max_memory(max_memory), as_progress(progress)
    fs = feeds(model, inputs)
    try:
        r = _runner_for(model, config, runtime, runtime_options, max_memory, feed=fs.values)
        sel = selection or Selection()
        refs = select_refs(model.proto, sel)
        result = r.probe(refs, fs.values, raw=save, extras=extras)
        if refs and not result.plan.probes:  # every value selected is no tensor (a sequence, an optional...)
            _nothing_probed(sel, result.plan.warnings)
        result.feed = fs.values
        result.plan.warnings[:0] = list(model.warnings)
        result.notes[:0] = fs.notes
        if save_to is not None:
            save_tensors(model, result, fs.values, save_to, max_memory=max_memory, progress=progress, using=r)
        return result
    except ExecutionError as e:
        raise fs.explained(e) from e


def _nothing_probed(selection: Selection, why: list[str]) -> None:
    """The selection named values, none of them a tensor onnxprobe can probe: said, where the table was empty and
    the exit code 0 (QA: a model whose only output is a sequence). The model's doing for the default selection
    and --all (ModelError), the selection's for one that names them (UsageError)."""
    kind = ModelError if selection.is_default or selection.all else UsageError
    shown = some(why, form=str, sep="; ")
    raise kind(f"nothing to probe: {shown or 'no value selected is a tensor'}")


def raw_chunks(model: ModelLike, result: ProbeResult, feed: dict[str, np.ndarray], names: list[str], *,
               max_memory: int | None = None, config: RunConfig | None = None,
               using: GraphRunner | None = None, key: Hashable | None = None) -> Iterator[tuple[int, int, dict[str, np.ndarray]]]:
    """The raw values of the probed tensors ``names`` of ``result``, a run's worth at a time: each run
    exposes at most ``max_memory`` bytes of them (default: a quarter of the available memory; sizes from
    ``result``'s shapes and counts). Yields (run index, number of runs, {tensor: value}); the caller
    drops the values before asking for the next run, or two runs' tensors are alive at once. ``using``:
    the runner that made ``result`` (default: onnxruntime on ``config``). ``key``: keep each run's probed copy
    and session in ``using`` for the next call with the same key and tensors (a dataset's batches), rather
    than rewriting the model and building a session again for every batch."""
    from onnxprobe.runtime.budget import raw_plan

    model, max_memory = as_model(model), as_max_memory(max_memory)
    result, feed = as_probe_result(result), checked_feed(model.proto, feed)
    by_name = {p.ref.key: p.ref for p in result.plan.probes}
    names = as_names(names, "names")
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise UsageError(f"names: {clip(controls(repr(unknown[0])), 60)} is not a tensor this result probed")
    chunks = raw_plan([by_name[n] for n in names], result, max_memory)
    r = using or _runner_of(model, result, config)
    for k, chunk in enumerate(chunks):
        run_key = None if key is None else (key, tuple(ref.key for ref in chunk))
        res = r.probe(chunk, feed, stats=False, shapes=False, raw=True, outputs=False, key=run_key)
        yield k, len(chunks), res.arrays
        del res


def save_tensors(model: ModelLike, result: ProbeResult, feed: dict[str, np.ndarray], path: str | os.PathLike, *,
                 max_memory: int | None = None, progress: Progress | None = None, using: GraphRunner | None = None) -> int:
    """Stream the raw values of ``result``'s probed tensors to ``path`` (.npz, safe entry names with the
    true names stored alongside), within ``max_memory`` per run (``raw_chunks``). Tensors that did not
    run (an If branch not taken, a Loop of no iterations) are left out; a main-graph tensor that ran empty
    is kept (an empty array of its shape). Returns the number of runs."""
    from onnxprobe.match.observe import observe
    from onnxprobe.runtime.npz import NpzWriter, graph_fingerprint

    model, max_memory, progress = as_model(model), as_max_memory(max_memory), as_progress(progress)
    result = as_probe_result(result)
    of_model(model, (p.ref.name for p in result.plan.probes), "result")
    feed = checked_feed(model.proto, feed)  # before the file is started
    scoped = {p.ref.key for p in result.plan.probes if p.ref.scope}  # inside a body: may not have run
    not_run = {n for n, st in result.stats.items() if st is not None and st.count == 0 and n in scoped}
    runs = 0
    info = result.info  # what computed the values: diff --vs-npz judges another runtime's or precision's as such
    made_by = (info.runtime, info.device, info.precision)
    obs = observe(model.proto)  # a quantized model's: a diff of its float model --vs-npz judges them as quantized
    with NpzWriter(path, source=graph_fingerprint(model.proto), made_by=made_by,  # diff --vs-npz: the model's own
                   quantized=obs.quantized or obs.weights_quantized) as out:
        # the values are consumed in a function of their own and dropped before the next run: two runs'
        # tensors must never be alive at once (a loop variable would keep the last one)
        for k, total, values in raw_chunks(model, result, feed, [p.ref.key for p in result.plan.probes if p.ref.name not in result.unobserved],
                                             max_memory=max_memory, using=using):
            out.add_all({n: v for n, v in values.items() if n not in not_run})
            runs = total
            del values
            if progress is not None:
                progress(k + 1, total)
    return runs


@dataclass
class DatasetResult:
    """Statistics of every probed tensor over a whole dataset: exactly mergeable moments and histograms."""

    plan: ProbePlan
    info: RunInfo
    moments: dict  # tensor name -> stats.moments.Moments
    histograms: dict  # tensor name -> stats.histogram.Histogram
    shapes: dict[str, tuple[int | None, ...]]  # over the batches: None where they differ
    batches: int
    notes: list[str] = field(default_factory=list)
    model_id: str = ""  # graph.skeleton.model_digest of the model: which model the statistics describe
    selection: str = ""  # the selection, in words
    executor: Executor = field(default_factory=Executor)  # what ran the batches (here, or Ray actors)
    unobserved: dict[str, str] = field(default_factory=dict)  # probed tensors the runtime cannot return -> why

    def __repr__(self) -> str:
        return (f"DatasetResult({os.path.basename(str(self.plan.source))} on {self.info.runtime} {self.info.device}: "
                f"{len(self.moments)} tensors over {self.batches} batches)")

    def rows(self) -> Iterator[tuple[TensorRef, TensorStats | None]]:
        for p in self.plan.probes:
            m = self.moments.get(p.ref.key)
            yield p.ref, m.stats() if m is not None else None


@dataclass
class LayersPartial:
    """One batch's share of a dataset's statistics (what a worker sends back)."""

    index: int
    moments: dict
    histograms: dict
    shapes: dict
    probes: list
    warnings: list[str]
    info: RunInfo
    notes: list[str]
    unobserved: dict = field(default_factory=dict)  # tensors the runtime cannot return -> why


@dataclass
class LayersWorkerFactory:
    """What a worker needs to build its LayersWorker (picklable: a path, not the model)."""

    model: Model | str  # a path on Ray (each actor loads it)
    selection: Selection | None
    config: RunConfig | None
    max_memory: int | None = None
    threads: int | None = None
    runtime: str = "ort"
    runtime_options: dict[str, str] | None = None
    runner: GraphRunner | None = None  # in this process: the runner made (and checked) before the first batch
    shapes: dict | None = None  # the dataset's first sample's feed shapes: the plan every worker makes

    def __call__(self) -> "LayersWorker":
        return LayersWorker(as_model(self.model), self.selection, self.config, self.max_memory, self.threads,
                            self.runtime, self.runtime_options, self.runner, self.shapes)


class LayersWorker(BatchWorker):
    """One batch -> its moments (from the in-graph statistics) and histograms (from the tensors,
    fetched within ``max_memory`` per run); one runner, its probed copy kept for every batch."""

    def __init__(self, model: Model, selection: Selection | None, config: RunConfig | None, max_memory: int | None = None,
                 threads: int | None = None, runtime: str = "ort", runtime_options: dict[str, str] | None = None,
                 runner: GraphRunner | None = None, shapes: dict | None = None):
        self.model, self.config, self.max_memory, self.threads = model, config, max_memory, threads
        self.shapes = shapes
        self.runtime, self.runtime_options = runtime, runtime_options
        self.specs = _feeds.model_inputs(model.proto)
        self.refs = select_refs(model.proto, selection or Selection())
        self.runner = runner  # else made on the first batch (OpenVINO wants its input shapes)

    def _runner(self, feed: dict) -> GraphRunner:
        if self.runner is None:
            self.runner = _runner_for(self.model, self.config, self.runtime, self.runtime_options, self.max_memory,
                                      interruptible=False, feed=feed, threads=self.threads)
        return self.runner

    def process(self, index: int, label: str, arrays: dict[str, np.ndarray]) -> LayersPartial:
        fs = self.feeds(self.model, arrays)
        r = self._runner(fs.values)
        if self.shapes:  # the plan of the dataset's first sample, here as on every Ray actor: the same numbers
            r.pin_shapes("dataset", self.shapes)
        res = r.probe(self.refs, fs.values, key="dataset")
        from onnxprobe.stats.moments import Moments  # a dataset's alone: one run's `layers` does without (4 ms)

        moments = {n: Moments.from_stats(st) for n, st in res.stats.items() if st is not None}
        # only tensors that ran hold values: one in an If branch not taken has statistics of no element, as
        # in layers_histograms
        ran = [n for n, st in res.stats.items() if st is not None and st.count]
        hists: dict = {}
        for _, _, values in raw_chunks(self.model, res, fs.values, ran, max_memory=self.max_memory, using=r,
                                       key="dataset values"):
            _add_histograms(hists, values)
            # a float16 tensor's values come back as float16 holds them, where its in-graph statistics may be of
            # the float32 values onnxruntime's CPU provider computed it in (runners.ort.check_statistics): its
            # moments from the same values as its histogram, or the report contradicts itself (and merge-stats
            # refuses it as damaged)
            # and an int64 / uint64 tensor's in-graph extremes are rounded to float64 (2^63 - 1 reads
            # 9.223372036854775e+18) where the host path, and so merge-stats of such batches, keeps the exact
            # ints: its moments from its values too, exact whichever way the batch was summarised
            moments.update({n: Moments.from_stats(TensorStats.from_array(v)) for n, v in values.items()
                            if v.dtype == np.float16 or (v.dtype.kind in "iu" and v.dtype.itemsize == 8)})
            del values  # before the next run (see raw_chunks)
        # the runtime's notes (float16 rounding, OpenVINO's bf16...) and what it cannot return, as in layers
        return LayersPartial(index, moments, hists, dict(res.shapes), res.plan.probes, res.plan.warnings, res.info,
                             list(fs.notes) + [n for n in res.notes if n not in fs.notes], dict(res.unobserved))


def layers_dataset(model: Model | str | os.PathLike, inputs: str | os.PathLike | None = None,
                   selection: Selection | None = None, config: RunConfig | None = None, *, max_memory: int | None = None,
                   progress: Progress | None = None, inputs_from: FeedsFrom | None = None, ray: RayOptions | None = None,
                   runtime: str = "ort", runtime_options: dict[str, str] | None = None) -> DatasetResult:
    """``layers --inputs-dir`` (or ``--inputs-from FILE.py:FUNC``): one pass per batch; moments from the
    in-graph statistics, histograms and percentiles from the tensors themselves, fetched within
    ``max_memory`` per run. ``ray``: the batches shared out to Ray actors (``api.datasets``); the
    statistics are the same, exactly. ``runtime`` / ``runtime_options``: as in ``layers``, for every batch."""
    model, selection, config = as_model(model), as_selection(selection), as_config(config)
    max_memory, ray, progress = as_max_memory(max_memory), as_ray(ray), as_progress(progress)
    src = source(model, inputs, inputs_from)
    path = model_path(model) if ray else None
    first = _checked_runner(model, config, runtime, runtime_options, max_memory, src)
    factory = LayersWorkerFactory(path or model, selection, config, max_memory, threads=1 if ray else None,
                                  runtime=runtime, runtime_options=runtime_options, runner=None if ray else first,
                                  shapes=first_shapes(model, src))
    del first  # on Ray, each actor makes its own
    acc: dict = {"moments": {}, "hists": {}, "notes": [], "first": None, "count": 0, "shapes": {}}
    from onnxprobe.stats.pooled import merged_shape  # (a dataset's alone, as Moments)

    def merge(index: int, label: str, part: LayersPartial) -> None:
        for name, shape in part.shapes.items():  # a dimension the batches disagree on reads None ('?'), a rank: no shape
            shape = None if shape is None else tuple(shape)
            acc["shapes"][name] = merged_shape(acc["shapes"][name], shape) if name in acc["shapes"] else shape
        for name, m in part.moments.items():
            acc["moments"][name] = acc["moments"][name].merge(m) if name in acc["moments"] else m
        for name, h in part.histograms.items():
            acc["hists"][name] = acc["hists"][name].merge(h) if name in acc["hists"] else h
        acc["notes"] += [n for n in part.notes if n not in acc["notes"]]
        if acc["first"] is None or part.index < acc["first"].index:
            acc["first"] = part
        acc["count"] += 1

    executor = run_batches(factory, src, merge, ray=ray, progress=progress, cache=config is None or config.cache)
    first: LayersPartial = acc["first"]
    plan_ = ProbePlan(model.proto, list(first.probes), model.source, list(first.warnings), base=model.proto)
    notes = src.notes + acc["notes"] + list(model.warnings) + plan_.warnings + executor.notes()
    return DatasetResult(plan_, first.info, acc["moments"], acc["hists"], acc["shapes"], acc["count"],
                         list(dict.fromkeys(notes)), model_digest(model.proto), (selection or Selection()).describe(canonical=True),
                         executor, dict(first.unobserved))


def _checked_runner(model: Model, config: RunConfig | None, runtime: str, options: dict[str, str] | None,
                    max_memory: int | None, src: Source) -> GraphRunner:
    """The runner of a dataset's batches, made before the first one (with its input shapes, which OpenVINO
    reads some models with) and asked its precision, as ``diff`` asks it for its default tolerance: a
    device or runtime option the runtime refuses is one error before any batch, not one per batch."""
    shapes = first_shapes(model, src) if runtime == "openvino" else None
    r = _runner_for(model, config, runtime, options, max_memory, interruptible=False, shapes=shapes)
    r.inference_precision()
    return r


def _add_histograms(hists: dict, values: dict[str, np.ndarray]) -> None:
    from onnxprobe.stats.histogram import Histogram  # (a dataset's alone, as Moments)

    for name, value in values.items():
        if value.dtype.kind in "biuf":
            h = Histogram.from_array(value)
            hists[name] = hists[name].merge(h) if name in hists else h


def _diff_result() -> type:
    """DiffResult, where compare.result is loaded: a result of it exists only then (merge-stats does not import it)."""
    return getattr(sys.modules.get("onnxprobe.compare.result"), "DiffResult", type(None))


def _report_of(r, k: int):
    """A dataset result of ``layers_dataset`` or ``diff_dataset`` as the report its ``--json`` writes
    (``api.report``, read back as merge-stats reads a file); anything else as given (a path or a dict,
    checked by the merge)."""
    if isinstance(r, DatasetResult) or (isinstance(r, _diff_result()) and r.samples is not None):
        from onnxprobe.api.reports import report

        return report(r)
    if isinstance(r, (ProbeResult, _diff_result())):
        raise UsageError(f"merge_stats: report {k} is the {type(r).__name__} of one input; merge the results of "
                         "api.layers_dataset or api.diff_dataset (or their reports, as files or api.report's dicts)")
    return r


def merge_stats(reports: list) -> dict:
    """Merge dataset reports (paths, dicts already read, or the results of ``layers_dataset`` and
    ``diff_dataset``) into one, exactly and in any order: those of
    ``layers --inputs-dir`` (counts and extremes combine, sums are exact (Shewchuk partials),
    histograms add) or those of ``diff --inputs-dir`` (every pair's sums pooled, the metrics and the
    verdict recomputed). Reports of different models, selections or kinds are refused."""
    from onnxprobe.graph.external import protect_models
    from onnxprobe.stats.merge import check_report, described_models, merge_reports, read_json_report, shard_name
    from onnxprobe.compare.merge_diff import check_diff_report, is_diff_report, merge_diff_reports
    from onnxprobe.stats.shard_fields import check_diff_fields, check_layers_fields

    if isinstance(reports, (str, os.PathLike, dict, DatasetResult, _diff_result())):  # one report, not its characters
        reports = [reports]
    if not isinstance(reports, (list, tuple)):
        raise UsageError(f"merge_stats: expected report paths (or dicts, or dataset results), got {type(reports).__name__}")
    ds = []
    for k, r in enumerate(reports):
        r = _report_of(r, k)
        if not isinstance(r, (dict, str, os.PathLike)):  # said as the API names it, not as a "report file" of the CLI
            raise UsageError(f"reports[{k}]: expected a report path, a dict or a dataset result, got {type(r).__name__} "
                             f"{clip(controls(repr(r)), 40)}")
        d = dict(r) if isinstance(r, dict) else read_json_report(r)
        if not isinstance(r, dict):  # --json never overwrites the models the shards describe, nor their weights
            protect_models(described_models(d, d["_path"]), "a model the reports describe")
        d.setdefault("_path", f"report {k}")
        d["_path"] = shard_name(d["_path"], k + 1)
        # what it is, first: a JSON file that is no report is said to be one, not a shard given twice
        if isinstance(d.get("gradients"), list) and "tensors" not in d and "pairs" not in d:
            raise settings_error(UsageError, lambda say: f"{d['_path']}: a grad report; " + say.either(
                "merge_stats merges the dataset reports of layers and diff (a dataset's gradients come from one "
                "api.grad_dataset run, summed or averaged there)", "merge-stats merges the dataset reports of layers and "
                "diff (a dataset's gradients come from one `grad --inputs-dir` run, summed or averaged there)"))
        check_diff_report(d, d["_path"]) if is_diff_report(d) else check_report(d, d["_path"])
        ds.append(d)
    # a shard given twice (or beside a merge that holds it) is refused by each kind's merge, on the
    # samples' digests: after the kind and identity checks, which say more
    kinds = {is_diff_report(d) for d in ds}
    if len(kinds) > 1:
        raise settings_error(UsageError, lambda say: say.either("merge_stats", "merge-stats") + ": these are reports of "
                             "different commands (layers and diff); merge each kind apart")
    for d in ds:  # what the merge and its table read beyond the statistics, once the kind is known
        check_diff_fields(d, d["_path"]) if is_diff_report(d) else check_layers_fields(d, d["_path"])
    return merge_diff_reports(ds) if kinds == {True} else merge_reports(ds)  # each checked as it was read
