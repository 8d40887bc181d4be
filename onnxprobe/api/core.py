"""Load, probe, run: ``layers`` and dataset statistics, the foundation the other workflows build on."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import onnx

from onnxprobe.errors import ExecutionError
from onnxprobe.graph.expose import expose
from onnxprobe.graph.io import load_model
from onnxprobe.graph.select import Selection, select
from onnxprobe.graph.shapes import annotate
from onnxprobe.runtime import feeds as _feeds
from onnxprobe.runtime.session import create_session, resolve_device, run_bound
from onnxprobe.stats.tensor_stats import TensorStats
from onnxprobe.types import ProbePlan, ProbeResult, RunConfig, RunInfo, TensorRef



@dataclass
class Model:
    """A loaded model: the proto as read (never written back), and a copy annotated by shape inference."""

    proto: onnx.ModelProto
    inferred: onnx.ModelProto
    source: str
    warnings: list[str] = field(default_factory=list)


def load(path: str | os.PathLike) -> Model:
    """Read a model and annotate it with inferred shapes. ``proto`` and ``inferred`` are the same object:
    it was read for this Model alone, so annotating it in place spares a copy of every weight."""
    proto = load_model(path)
    warnings: list[str] = []
    annotate(proto, warnings)
    return Model(proto, proto, str(path), warnings)


def plan(model: Model, selection: Selection | None = None, *, stats: bool = True, raw: bool | set[str] = False) -> ProbePlan:
    refs = select(model.inferred, selection or Selection())
    warnings = list(model.warnings)
    rewritten, probes = expose(model.inferred, refs, stats=stats, raw=raw, warnings=warnings, nonfinite="deferred")
    return ProbePlan(rewritten, probes, model.source, warnings, base=model.inferred)


def feeds(
    model: Model,
    *,
    seed: int = 0,
    int_range: tuple[int, int] = (0, 100),
    shapes: dict[str, tuple[int, ...]] | None = None,
    files: dict[str, str] | None = None,
    arrays: dict[str, np.ndarray] | None = None,
    notes: list[str] | None = None,
) -> dict[str, np.ndarray]:
    return _feeds.make_feeds(model.proto, seed=seed, int_range=int_range, shapes=shapes, files=files, arrays=arrays, notes=notes)


@dataclass
class LayersResult(ProbeResult):
    notes: list[str] = field(default_factory=list)

    def rows(self) -> Iterator[tuple[TensorRef, TensorStats | None]]:
        for p in self.plan.probes:
            yield p.ref, self.stats.get(p.ref.name)


def run(plan: ProbePlan, feed: dict[str, np.ndarray], config: RunConfig | None = None, *, notes: list[str] | None = None) -> LayersResult:
    config = config or RunConfig()
    device = resolve_device(config.device)
    session = create_session(plan.model, device=device, opt_level=config.opt_level)
    host = []
    for p in plan.probes:
        host += [n for n in (p.stats_output, p.shape_output) if n]
    own_outputs = [o.name for o in plan.model.graph.output if not _is_probe_output(o.name, plan)]
    raw = [p.raw_output for p in plan.probes if p.raw_output and p.raw_output not in own_outputs]
    host_names = list(dict.fromkeys(host + own_outputs))
    out, seconds = run_bound(session, feed, host_names, [r for r in dict.fromkeys(raw) if r not in host_names], interruptible=True)
    stats, shapes, arrays = read_probes(plan.probes, out)
    if plan.base is not None:
        rerun_masked(plan.base, plan.probes, stats, feed, device, config.opt_level)
    info = RunInfo(device=device, providers=session.providers, opt_level=config.opt_level,
                   session_seconds=session.seconds, run_seconds=seconds)
    return LayersResult(plan=plan, info=info, stats=stats, shapes=shapes, arrays=arrays,
                        outputs={n: out[n] for n in own_outputs}, notes=list(notes or []) + session.notes)


def read_probes(probes: list, out: dict, host_stats: bool = False) -> tuple[dict, dict, dict]:
    """A run's outputs, read back per probed tensor: (statistics, runtime shapes, raw values).
    Statistics come from the in-graph rows, or from the raw values for probes marked stats_on_host (and
    for every raw probe with ``host_stats``)."""
    stats, shapes, arrays = {}, {}, {}
    for p in probes:
        name = p.ref.name
        if p.stats_output:
            stats[name] = TensorStats.from_rows(out[p.stats_output])
        if p.shape_output:
            shapes[name] = tuple(int(d) for d in out[p.shape_output])
        if p.raw_output:
            arrays[name] = out[p.raw_output]
            if p.stats_on_host or (host_stats and name not in stats):
                stats[name] = TensorStats.from_array(arrays[name]) if arrays[name].dtype.kind in "biuf" else None
    return stats, shapes, arrays


def rerun_masked(base: onnx.ModelProto, probes: list, stats: dict, feed: dict, device: str, opt_level: str) -> None:
    """Tensors whose fast in-graph statistics came out non-finite (a NaN or Inf inside) are summarised
    again with masks, in one more run over just them; ``stats`` is updated in place. Costs nothing when
    every tensor is finite, the usual case."""
    from onnxprobe.graph.expose import needs_masking

    bad = [p.ref for p in probes if p.stats_output and needs_masking(stats.get(p.ref.name))]
    if not bad:
        return
    rewritten, again = expose(base, bad, stats=True, shapes=False, nonfinite="masked")
    session = create_session(rewritten, device=device, opt_level=opt_level)
    out, _ = run_bound(session, feed, [p.stats_output for p in again], interruptible=True)
    for p in again:
        stats[p.ref.name] = TensorStats.from_rows(out[p.stats_output])


def _is_probe_output(name: str, plan: ProbePlan) -> bool:
    return any(name in (p.stats_output, p.shape_output) for p in plan.probes) or (
        any(name == p.raw_output for p in plan.probes if p.ref.scope)
    )


def layers(
    path: str | os.PathLike,
    selection: Selection | None = None,
    config: RunConfig | None = None,
    *,
    save: bool = False,
    save_to: str | os.PathLike | None = None,
    max_memory: int | None = None,
    progress=None,
    seed: int = 0,
    int_range: tuple[int, int] = (0, 100),
    shapes: dict[str, tuple[int, ...]] | None = None,
    files: dict[str, str] | None = None,
    arrays: dict[str, np.ndarray] | None = None,
) -> LayersResult:
    """Load, probe and run a model in one call: what ``onnxprobe layers`` does.

    ``save=True`` keeps the raw tensors in ``result.arrays``. ``save_to=FILE.npz`` streams them to disk
    instead, in as many runs as it takes to keep at most ``max_memory`` bytes of them alive at once
    (default: a quarter of the available memory); ``progress(done, total)`` is called per run.
    """
    model = load(path)
    notes: list[str] = []
    feed = feeds(model, seed=seed, int_range=int_range, shapes=shapes, files=files, arrays=arrays, notes=notes)
    p = plan(model, selection, raw=save)
    try:
        result = run(p, feed, config, notes=notes)
        if save_to is not None:
            save_tensors(model, result, feed, save_to, max_memory=max_memory, progress=progress)
        return result
    except ExecutionError as e:
        if any("set to 1" in n for n in notes):
            raise ExecutionError(f"{e} (dynamic dimensions were set to 1: give real sizes with --shape NAME=DIMS)") from e
        raise


def raw_chunks(model: Model, result, feed: dict[str, np.ndarray], names: list[str], *,
               max_memory: int | None = None) -> Iterator[tuple[int, int, dict[str, np.ndarray]]]:
    """The raw values of the probed tensors ``names`` of ``result``, a run's worth at a time: each run
    exposes at most ``max_memory`` bytes of them (default: a quarter of the available memory; sizes from
    ``result``'s shapes and counts). Yields (run index, number of runs, {tensor: value}); the caller
    drops the values before asking for the next run, or two runs' tensors are alive at once."""
    from onnxprobe.runtime.budget import default_budget, nbytes, plan_chunks

    by_name = {p.ref.name: p.ref for p in result.plan.probes}
    sizes = []
    for n in names:
        st = result.stats.get(n)
        count = None if n in result.shapes else (st.count if st is not None else 0)
        sizes.append((n, nbytes(result.shapes.get(n), by_name[n].dtype, count)))
    # onnxruntime's output buffers and their numpy copies both exist for a moment: half the budget each
    chunks = plan_chunks(sizes, (max_memory or default_budget()) // 2)
    for k, chunk in enumerate(chunks):
        rewritten, probes = expose(model.inferred, [by_name[n] for n in chunk], stats=False, shapes=False, raw=True)
        session = create_session(rewritten, device=result.info.device, opt_level=result.info.opt_level)
        values, _ = run_bound(session, feed, list(dict.fromkeys(pr.raw_output for pr in probes if pr.raw_output)))
        yield k, len(chunks), {pr.ref.name: values[pr.raw_output] for pr in probes if pr.raw_output}
        del values, session


def save_tensors(model: Model, result: LayersResult, feed: dict[str, np.ndarray], path: str | os.PathLike, *,
                 max_memory: int | None = None, progress=None) -> int:
    """Stream the raw values of ``result``'s probed tensors to ``path`` (.npz), within ``max_memory``
    per run (``raw_chunks``). Tensors that did not run (an If branch not taken) are left out. Returns
    the number of runs."""
    from onnxprobe.runtime.npz import NpzWriter

    not_run = {n for n, st in result.stats.items() if st is not None and st.count == 0}
    runs = 0
    with NpzWriter(path) as out:
        # the values are consumed in a function of their own and dropped before the next run: two runs'
        # tensors must never be alive at once (a loop variable would keep the last one)
        for k, total, values in raw_chunks(model, result, feed, [p.ref.name for p in result.plan.probes], max_memory=max_memory):
            out.add_all({n: v for n, v in values.items() if n not in not_run})
            runs = total
            del values
            if progress is not None:
                progress(k + 1, total)
    return runs


def _add_histograms(hists: dict, values: dict[str, np.ndarray]) -> None:
    from onnxprobe.stats.histogram import Histogram

    for name, value in values.items():
        if value.dtype.kind in "biuf":
            h = Histogram.from_array(value)
            hists[name] = hists[name].merge(h) if name in hists else h


@dataclass
class DatasetResult:
    """Statistics of every probed tensor over a whole dataset: exactly mergeable moments and histograms."""

    plan: ProbePlan
    info: RunInfo
    moments: dict  # tensor name -> stats.moments.Moments
    histograms: dict  # tensor name -> stats.histogram.Histogram
    shapes: dict[str, tuple[int, ...]]  # of the first batch
    batches: int
    notes: list[str] = field(default_factory=list)

    def rows(self) -> Iterator[tuple[TensorRef, TensorStats | None]]:
        for p in self.plan.probes:
            m = self.moments.get(p.ref.name)
            yield p.ref, m.stats() if m is not None else None


def layers_dataset(path: str | os.PathLike, inputs: str | os.PathLike, selection: Selection | None = None,
                   config: RunConfig | None = None, *, max_memory: int | None = None, progress=None) -> DatasetResult:
    """``layers --inputs-dir``: one pass per batch; moments from the in-graph statistics, histograms and
    percentiles from the tensors themselves, fetched within ``max_memory`` per run."""
    from onnxprobe.stats.moments import Moments

    model = load(path)
    total, batches = _feeds.dataset_samples(inputs, _feeds.input_specs(model.proto))
    p = plan(model, selection)
    moments: dict = {}
    hists: dict = {}
    shapes: dict = {}
    info = None
    notes: list[str] = []
    for k, (label, arrays) in enumerate(batches):
        feed = feeds(model, arrays=arrays, notes=notes)
        try:
            res = run(p, feed, config)
        except ExecutionError as e:
            raise ExecutionError(f"{label}: {e}") from e
        info = res.info
        shapes = shapes or dict(res.shapes)
        for name, st in res.stats.items():
            if st is not None:
                m = Moments.from_stats(st)
                moments[name] = moments[name].merge(m) if name in moments else m
        measured = [n for n in res.stats if res.stats[n] is not None]
        for _, _, values in raw_chunks(model, res, feed, measured, max_memory=max_memory):
            _add_histograms(hists, values)
            del values  # before the next run (see raw_chunks)
        if progress is not None:
            progress(k + 1, total)
    return DatasetResult(p, info, moments, hists, shapes, total, list(dict.fromkeys(notes)) + list(p.warnings))

