"""``diff --inputs-dir`` / ``--inputs-from``: compare two models over a dataset, the metrics pooled over
every sample (``compare.dataset``), in this process or on Ray actors (``api.datasets``)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from onnxprobe.api.datasets import BatchWorker, first_shapes, model_path, run_batches, source
from onnxprobe.api.diff import check_reference, checked_arguments, make_sides
from onnxprobe.api.inputs import Progress, as_progress, as_dataset, as_max_memory, as_ray, check_map, check_switches
from onnxprobe.compare.dataset import DiffPartial, Pool, measure_sample
from onnxprobe.compare.diff import prepare
from onnxprobe.compare.result import DiffResult
from onnxprobe.compare.sides import load_notes
from onnxprobe.compare.measure import DiffPlan
from onnxprobe.graph.model import Model, as_model
from onnxprobe.graph.select import Selection, check_selects
from onnxprobe.graph.skeleton import model_digest
from onnxprobe.runtime import feeds as _feeds
from onnxprobe.runtime.ray_pool import RayOptions
from onnxprobe.stats.metrics import Tolerance
from onnxprobe.types import FeedsFrom, RunConfig


@dataclass
class DiffWorkerFactory:
    """What a worker needs to rebuild the comparison (picklable: paths and settings; the tolerance is the
    driver's, resolved, so every worker measures the same way)."""

    a: Model | str
    b: Model | str | None
    vs_device: str | None
    vs_opt_level: str | None
    vs_runtime: str | None  # "reference" for --vs-reference
    config: RunConfig | None
    selection: Selection | None
    tolerance: Tolerance
    per_tensor: dict | None
    user_map: dict | None
    introduced: bool
    max_memory: int | None
    fuse: bool
    threads: int | None = None
    runtime: str = "ort"
    runtime_options: dict[str, str] | None = None
    shapes: dict | None = None  # the first sample's feed shapes, for OpenVINO (it reads some models only with them)

    def plan(self) -> tuple[Model, DiffPlan]:
        a_model, side_a, side_b = make_sides(self.a, self.b, vs_device=self.vs_device, vs_opt_level=self.vs_opt_level,
                                             vs_runtime=self.vs_runtime, config=self.config, runtime=self.runtime,
                                             runtime_options=self.runtime_options, max_memory=self.max_memory,
                                             threads=self.threads, shapes=self.shapes,
                                             constants=bool(self.selection and self.selection.include_constants))
        check_selects(side_a.model.proto, side_b.model.proto, self.selection or Selection())
        plan = prepare(side_a, side_b, self.selection or Selection(), self.tolerance, self.per_tensor, self.user_map,
                       self.introduced, self.max_memory, fuse=self.fuse, input_shapes=self.shapes)
        plan.input_shapes = self.shapes  # every worker builds the one-run graph for the dataset's first sample
        return a_model, plan

    def __call__(self) -> "DiffWorker":
        return DiffWorker(*self.plan())


class DiffWorker(BatchWorker):
    """One sample -> its sums per pair (``compare.dataset.measure_sample``), one session for all samples."""

    def __init__(self, a_model: Model, plan: DiffPlan):
        self.a_model, self.plan = a_model, plan
        self.specs = _feeds.model_inputs(a_model.proto)

    def process(self, index: int, label: str, arrays: dict[str, np.ndarray]) -> DiffPartial:
        fs = self.feeds(self.a_model, arrays)
        return measure_sample(self.plan, fs.values, index, label, fs.notes_but_zeros)


class _Here:
    """The local factory: the worker over the plan the driver already made."""

    def __init__(self, worker: DiffWorker):
        self.worker = worker

    def __call__(self) -> DiffWorker:
        return self.worker


def diff_dataset(
    a: Model | str | os.PathLike,
    b: Model | str | os.PathLike | None = None,
    inputs: str | os.PathLike | None = None,
    *,
    inputs_from: FeedsFrom | None = None,
    vs_device: str | None = None,
    vs_opt_level: str | None = None,
    vs_reference: bool = False,
    runtime: str = "ort",
    vs_runtime: str | None = None,
    runtime_options: dict[str, str] | None = None,
    selection: Selection | None = None,
    config: RunConfig | None = None,
    tolerance: Tolerance | None = None,
    per_tensor: dict | None = None,
    user_map: dict[str, str] | None = None,
    introduced: bool = True,
    max_memory: int | None = None,
    progress: Progress | None = None,
    fuse: bool = True,
    ray: RayOptions | None = None,
) -> DiffResult:
    """Compare model A with a reference (a model B, or A on another device, opt level or runtime, or
    onnx.reference) over a dataset: ``inputs`` (a folder of .npz batches, or one .npz with a leading
    sample axis) or ``inputs_from`` (``FILE.py:FUNC``, a generator of feed dicts). Every metric is pooled
    over all samples (SQNR = 10 log10(Σb² / Σ(a-b)²) over the whole dataset, cosine from the pooled sums,
    maxima with the sample they came from), with each pair's per-sample SQNR spread; the verdict is the
    pooled metrics'. ``result.samples``, ``result.labels``; each result's ``pooled`` holds its mergeable
    sums. ``ray``: the samples shared out to Ray actors; the numbers are the same (the pooled sums are
    exact). ``runtime`` / ``vs_runtime`` / ``runtime_options``: as in ``diff``, for every sample."""
    vs_runtime = check_reference(b, vs_device=vs_device, vs_opt_level=vs_opt_level, vs_reference=vs_reference,
                                 runtime=runtime, vs_runtime=vs_runtime, runtime_options=runtime_options, dataset=True)
    check_map(user_map)
    check_switches("diff_dataset", vs_reference=vs_reference, introduced=introduced, fuse=fuse)
    selection, config, _, tolerance, per_tensor = checked_arguments(selection, config, None, tolerance, per_tensor)
    config, max_memory, progress = config or RunConfig(), as_max_memory(max_memory), as_progress(progress)
    ray = as_ray(ray)
    as_dataset(inputs, inputs_from)  # before the plan is made
    a_model = as_model(a)
    # the first sample's input shapes: what OpenVINO reads some models with, and what every worker builds its
    # one-run graph for (so a sample is measured alike on any Ray actor and here)
    src = source(a_model, inputs, inputs_from)
    shapes = first_shapes(a_model, src)
    settings = dict(runtime=runtime, runtime_options=runtime_options, shapes=shapes)
    here = DiffWorkerFactory(a_model, as_model(b) if b is not None else None, vs_device, vs_opt_level, vs_runtime,
                             config, selection, tolerance, per_tensor, user_map, introduced, max_memory, fuse, **settings)
    a_model, plan = here.plan()
    if ray is not None:
        factory = DiffWorkerFactory(model_path(a_model), model_path(b) if b is not None else None, vs_device,
                                    vs_opt_level, vs_runtime, config, selection, plan.tolerance, per_tensor, user_map,
                                    introduced, max_memory, fuse, threads=1, **settings)
    else:
        factory = _Here(DiffWorker(a_model, plan))
    pool = Pool(plan)
    executor = run_batches(factory, src, lambda i, label, part: pool.add(part), ray=ray, progress=progress, cache=config.cache)
    res = pool.result()
    res.executor = executor
    res.notes[:0] = src.notes + load_notes(a_model, res.b.model if b is not None else None)  # B's too, by side
    res.notes += executor.notes()
    res.model_id = "+".join(model_digest(s.model.proto) for s in (res.a, res.b))
    res.selection = (selection or Selection()).describe(canonical=True)
    return res
