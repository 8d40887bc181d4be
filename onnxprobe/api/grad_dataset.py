"""``grad --inputs-dir``: the gradients of a loss over a whole dataset, the sum of the samples' losses
(``reduce="sum"``) or their mean (``"mean"``), in this process or on Ray actors (``api.datasets``).

The gradient of a summed loss with respect to a weight is the sum of the samples' gradients: each
sample's weight gradients come back raw and are added in float64. An activation's (or an input's)
gradient is a tensor per sample: its statistics over the dataset are its samples' statistics merged
(``stats.moments``, exactly), the same as those of the whole dataset's gradient. The mean divides both
by the number of samples. A sample is one run: a file of the folder, a row of a stacked ``.npz``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np

from onnxprobe.api.datasets import (BatchWorker, failed_batches, first_arrays, first_label, model_path, relabel, run_batches,
                                    source)
from onnxprobe.api.grad import GradResult, GradRow, body_left_out, constant_output_note, grad_probes, stats_norm, value_norm
from onnxprobe.api.grad_level import grad_config
from onnxprobe.api.grad_plan import EXTRA_FIELD, EXTRA_FLAG, GRAD_OPT_LEVEL, EmptyBatch, GradPlan, GradSpec, as_spec, grad_plan
from onnxprobe.api.inputs import Progress, as_progress, as_config, as_max_memory, as_ray, as_selection
from onnxprobe.autodiff.select import weight_value
from onnxprobe.errors import OnnxProbeError, UsageError, setting_error, settings_error
from onnxprobe.graph.model import Model, as_model
from onnxprobe.graph.select import Selection
from onnxprobe.runtime import feeds as _feeds
from onnxprobe.runtime import plan_cache
from onnxprobe.runtime.budget import probe_within
from onnxprobe.runtime.dataset import load_batch
from onnxprobe.runtime.ray_pool import RayOptions
from onnxprobe.runtime.runners import check_usable
from onnxprobe.runtime.runners.ort import OrtRunner
from onnxprobe.stats.moments import Moments, exact_sum
from onnxprobe.stats.tensor_stats import TensorStats
from onnxprobe.text import as_word, some
from onnxprobe.types import FeedsFrom, RunConfig, RunInfo

REDUCE = ("sum", "mean")


@dataclass
class GradPartial:
    """One sample's share: its loss, its weight gradients (float64), the statistics of its activation and
    input gradients and of those tensors themselves (for |grad| / |tensor|)."""

    index: int
    loss: float
    weights: dict[str, np.ndarray]
    grads: dict[str, Moments]  # forward tensor name -> its gradient's moments
    values: dict[str, Moments]  # forward tensor name -> its own moments (activations, inputs)
    info: RunInfo
    notes: list[str] = field(default_factory=list)
    shapes: dict[str, tuple] = field(default_factory=dict)  # forward tensor name -> its gradient's shape in the run
    empty: bool = False  # an empty batch, skipped: no loss to differentiate


@dataclass
class GradWorkerFactory:
    model: Model | str  # a path on Ray
    selection: Selection | None
    config: RunConfig
    spec: GradSpec
    threads: int | None = None
    max_memory: int | None = None

    def __call__(self) -> "GradWorker":
        return GradWorker(as_model(self.model), self.selection, self.config, self.spec, self.threads, self.max_memory)


class GradWorker(BatchWorker):
    """One sample -> a GradPartial; one backward graph (and session) per distinct input shape."""

    def __init__(self, model: Model, selection: Selection | None, config: RunConfig, spec: GradSpec,
                 threads: int | None = None, max_memory: int | None = None):
        self.model, self.selection, self.config, self.spec, self.threads = model, selection, config, spec, threads
        self.max_memory = max_memory  # the weight gradients of a batch come back at most this many bytes at once
        self.specs = _feeds.model_inputs(model.proto)
        self.plans: dict = {}

    def plan(self, feed: dict[str, np.ndarray]) -> tuple[GradPlan, list, list, OrtRunner]:
        key = tuple(sorted((k, tuple(np.shape(v))) for k, v in feed.items()))
        if key not in self.plans:
            gp = grad_plan(self.model, self.spec, self.selection, feed=feed, cache=self.config.cache)
            refs, acts, scored = grad_probes(gp)
            kw = {"threads": self.threads} if self.threads else {}
            runner = OrtRunner(scored, self.config, self.model.source, **kw)
            runner.diagnose_with = self.model.proto
            self.plans[key] = (gp, refs, acts, runner)
        return self.plans[key]

    def process(self, index: int, label: str, arrays: dict[str, np.ndarray]) -> GradPartial:
        fs = self.feeds(self.model, arrays)
        try:
            gp, refs, acts, runner = self.plan(fs.values)
        except EmptyBatch:  # adds 0 to a summed loss; a mean over its samples would read NaN: skipped (a note)
            return GradPartial(index, 0.0, {}, {}, {}, None, list(fs.notes), empty=True)
        weights = {ref.name for t, ref in zip(gp.targets, refs) if t.kind == "weight"}
        res = probe_within(runner, refs + acts, {**fs.values, **gp.extra_feed}, weights, self.max_memory, key="grad")
        part = GradPartial(index, float(np.asarray(res.outputs[gp.loss.loss], np.float64).reshape(-1)[0]), {}, {}, {},
                           res.info, list(fs.notes))
        for t, ref in zip(gp.targets, refs):
            name = t.ref.name
            if ref.name in res.shapes:
                part.shapes[name] = tuple(res.shapes[ref.name])
            if t.kind == "weight":
                if ref.name in res.arrays:
                    part.weights[name] = np.asarray(res.arrays[ref.name], np.float64)
                continue
            st = res.stats.get(ref.name)
            if st is not None:
                part.grads[name] = Moments.from_stats(st)
            value = res.stats.get(name) if t.kind == "activation" else (
                TensorStats.from_array(fs.values[name]) if name in fs.values else None)
            if value is not None:
                part.values[name] = Moments.from_stats(value)
        return part


def _first_plan(model: Model, src, here: "GradWorker") -> GradPlan:
    """The plan, made for the shapes of the first sample that makes one. A pipeline's first sample, which cannot
    be read again: its failure is the run's, naming it. A folder's batches are tried in order: the run then fails
    the bad ones before it with the others, each named (a bad first batch was said alone, ahead of the second);
    none that makes one: all of them, so named."""
    def planned(arrays) -> GradPlan:
        feed = here.feeds(model, arrays).values
        try:
            return here.plan(feed)[0]
        except EmptyBatch:  # skipped by the run; the gradients to take are those of any batch size
            return here.plan({k: np.zeros([d or 1 for d in np.shape(v)], v.dtype) for k, v in feed.items()})[0]

    if src.batches is None:
        first = first_arrays(src, here.specs)
        if first is None:
            raise UsageError("the dataset has no samples")
        try:
            return planned(first)
        except OnnxProbeError as e:
            raise relabel(e, first_label(src)) from e
    if not src.batches:
        raise UsageError("the dataset has no samples")
    failures = []
    for b in src.batches:
        try:
            return planned(load_batch(b, here.specs))
        except OnnxProbeError as e:
            failures.append((b.index, b.label, relabel(e, b.label)))
    raise failed_batches(failures, len(src.batches))


def grad_dataset(model: Model | str | os.PathLike, inputs: str | os.PathLike | None = None, selection: Selection | None = None,
                 config: RunConfig | None = None, spec: GradSpec | None = None, *, reduce: str = "sum",
                 progress: Progress | None = None, ray: RayOptions | None = None, inputs_from: FeedsFrom | None = None,
                 max_memory: int | None = None) -> GradResult:
    """The gradients of the dataset's loss (``reduce``: the sum or the mean of the samples' losses) and
    their statistics (see the module's doc). ``inputs``: a folder of .npz batches or one stacked .npz;
    ``inputs_from``: ``FILE.py:FUNC`` or, from Python, feed dicts in memory (as ``layers_dataset``).
    ``result.arrays``: the weight gradients. ``ray``: the samples shared out to Ray actors. ``max_memory``: the
    most bytes of a batch's weight gradients brought back at once (``api.grad``'s)."""
    if reduce not in REDUCE:
        raise setting_error(UsageError, ("reduce", "--reduce"), f"{as_word(reduce)}: choose sum or mean")
    spec, selection, config = as_spec(spec) or GradSpec(), as_selection(selection), as_config(config)
    if spec.extra is not None:
        kind = spec.loss if spec.loss in EXTRA_FIELD else "output-grad"
        raise settings_error(UsageError, lambda say: f"a dataset: {say((EXTRA_FIELD[kind], EXTRA_FLAG[kind]))} holds one "
                             "input's values, not a dataset's; dataset losses are sum or mean")
    config = config or RunConfig(opt_level=GRAD_OPT_LEVEL)
    model, ray, max_memory, progress = as_model(model), as_ray(ray), as_max_memory(max_memory), as_progress(progress)
    config, level_notes = grad_config(config, model.proto)
    check_usable("ort", config.device)  # CUDA not usable here: said before the backward graph is built
    plan_cache.enabled(config.cache)  # its settings refused once, not as the first batch's failure (run_batches)
    src = source(model, inputs, inputs_from)
    here = GradWorker(model, selection, config, spec, max_memory=max_memory)
    gp = _first_plan(model, src, here)
    factory = GradWorkerFactory(model_path(model), selection, config, spec, threads=1, max_memory=max_memory) if ray else (lambda: here)
    acc = {"loss": [], "weights": {}, "grads": {}, "values": {}, "notes": [], "info": None, "first": None, "count": 0,
           "shapes": {}, "empty": []}

    def merge(index: int, label: str, part: GradPartial) -> None:
        if part.empty:
            acc["empty"].append((index, label))
            return
        acc["loss"] = exact_sum(acc["loss"] + [part.loss])
        for name, g in part.weights.items():
            if name in acc["weights"]:
                acc["weights"][name] += g
            else:
                acc["weights"][name] = g.copy()
        for key in ("grads", "values"):
            for name, m in getattr(part, key).items():
                acc[key][name] = acc[key][name].merge(m) if name in acc[key] else m
        for name, shape in part.shapes.items():  # a dimension the samples disagree on reads None ('?'), as in layers
            have = acc["shapes"].get(name)
            acc["shapes"][name] = shape if have is None else (
                tuple(a if a == b else None for a, b in zip(have, shape)) if len(have) == len(shape) else have)
        acc["notes"] += [n for n in part.notes if n not in acc["notes"]]
        if acc["first"] is None or index < acc["first"]:
            acc["first"], acc["info"] = index, part.info
        acc["count"] += 1

    executor = run_batches(factory, src, merge, ray=ray, progress=progress, cache=config.cache)
    n = acc["count"]
    if not n:
        raise UsageError(f"every batch of the dataset is empty ({len(acc['empty'])}): an empty batch has no loss to "
                         "differentiate; give at least one sample")
    if acc["empty"]:
        labels = [lb for _, lb in sorted(acc["empty"])]
        acc["notes"].append(f"{len(labels)} empty batch{'es' if len(labels) > 1 else ''} skipped ({some(labels, 4, str)}"
                            "): an empty batch has no loss to differentiate (it adds 0 "
                            "to a summed loss) and is not counted among the samples")
    f = 1.0 / n if reduce == "mean" else 1.0
    rows, arrays, wide = [], {}, []
    top = float(np.finfo(np.float32).max)
    for t in gp.targets:
        name = t.ref.name
        if t.kind == "weight":
            g = acc["weights"].get(name)
            st = TensorStats.from_array(g * f) if g is not None else None
            if g is not None:  # float32, as one run's; a float64 sum past its range stays float64 (the row's numbers)
                gf = g * f
                over = bool((np.abs(gf[np.isfinite(gf)]) > top).any())
                arrays[name] = gf if over else gf.astype(np.float32)
                wide += [name] if over else []
            w = weight_value(model.proto, name)
            vn = value_norm(w) if w is not None else None
        else:
            m = acc["grads"].get(name)
            st = m.stats().scaled(f) if m is not None else None
            v = acc["values"].get(name)
            vn = stats_norm(v.stats()) if v is not None else None
        rows.append(GradRow(t, gp.grads[name], st, vn, shape=acc["shapes"].get(name)))
    loss = math.fsum(acc["loss"]) * f
    if wide:
        acc["notes"].append(f"the dataset gradient of {some(wide, form=str)} (summed in float64) is past float32's range: "
                            "kept in float64, as its statistics are of it (float32 would hold Inf)")
    notes = list(dict.fromkeys(level_notes + src.notes + acc["notes"] + executor.notes() + body_left_out(model, selection, rows)
                                 + constant_output_note(gp, rows)))
    return GradResult(gp, rows, loss, acc["info"], notes, arrays, samples=n, reduce=reduce, executor=executor)
