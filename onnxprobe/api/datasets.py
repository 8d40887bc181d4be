"""Running a dataset's batches (``layers``, ``diff`` and ``grad`` with ``--inputs-dir`` / ``--inputs-from``):
in this process, or on Ray actors (``--ray``), with the same worker either way.

A worker (``BatchWorker``) is built once per process from a small picklable factory (model paths and
settings, never the models themselves: a Ray actor loads them), turns one batch into a mergeable partial
result, and names the batch in any error. The driver merges partials as they come (the merges are exact
and order-independent, so the result does not depend on which worker did what); a batch that fails does
not stop the others, and the run then fails with one line naming the batches that failed.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from onnxprobe.api.inputs import Progress, as_dataset, as_progress
from onnxprobe.errors import (ExecutionError, OnnxProbeError, UsageError, Voice, debug_enabled, first_line, in_words,
                              plain_class, said, settings_error)
from onnxprobe.graph.model import Model
from onnxprobe.runtime.dataset import (INPUTS_DIR, INPUTS_FROM, Batch, dataset_batches, generator_samples, load_batch,
                                       skipped_note)
from onnxprobe.runtime.feeds import Feeds, ModelInput, feed_digest, make_feeds, model_inputs
from onnxprobe.runtime.ray_pool import Executor, RayOptions, ray_map
from onnxprobe.text import clean, clip, some
from onnxprobe.types import FeedsFrom, InputSpec


@dataclass
class Source:
    """A dataset: addressable batches (``--inputs-dir``: any process can read them) or the samples a
    pipeline yields (``--inputs-from``: read here, in order)."""

    batches: list[Batch] | None = None
    samples: Iterator[tuple[str, dict[str, np.ndarray]]] | None = None
    notes: list[str] = field(default_factory=list)  # what the folder holds that is not read (dot-files...)

    @property
    def total(self) -> int:
        return len(self.batches) if self.batches is not None else 0  # 0: not known in advance


def source(model: Model, inputs=None, inputs_from: FeedsFrom | None = None) -> Source:
    """The Source of ``inputs`` (a folder of .npz batches or one stacked .npz) or ``inputs_from``
    (``FILE.py:FUNC``; from Python also a function returning feed dicts, or an iterable of them); exactly
    one of them."""
    if (inputs is None) == (inputs_from is None):
        raise settings_error(UsageError, lambda say: f"a dataset comes from {say(INPUTS_DIR)} or from {say(INPUTS_FROM)} (one "
                             f"of them{say.either('', '; from Python: inputs= or inputs_from=')})")
    as_dataset(inputs, inputs_from)
    if inputs_from is not None:
        return Source(samples=generator_samples(inputs_from))
    return Source(batches=dataset_batches(inputs, model_inputs(model.proto)), notes=skipped_note(inputs))


def first_arrays(src: Source, specs: list[ModelInput]) -> dict[str, np.ndarray] | None:
    """The arrays of the dataset's first sample (None: no sample); a pipeline's first sample is put back
    in front of the others. A first batch that cannot be read raises, naming it."""
    if src.batches is not None:
        return load_batch(src.batches[0], specs) if src.batches else None
    first = next(src.samples, None)
    if first is None:
        return None
    src.samples = itertools.chain([first], src.samples)
    return first[1]


def first_label(src: Source) -> str:
    """The name of the dataset's first sample, for a message about it (after ``first_arrays``)."""
    if src.batches:
        return src.batches[0].label
    first = next(src.samples, None) if src.samples is not None else None
    if first is None:
        return "the first sample"
    src.samples = itertools.chain([first], src.samples)
    return first[0]


def first_shapes(model: Model, src: Source) -> dict[str, tuple[int, ...]] | None:
    """The feed shapes of the dataset's first sample, for a runtime that reads some models only with
    static inputs (OpenVINO) and is made before any sample runs; None when that sample does not make
    feeds here (the run then reports it, naming the sample)."""
    try:
        arrays = first_arrays(src, model_inputs(model.proto))
    except OnnxProbeError:
        if src.batches is None:  # a pipeline's failure: its samples cannot be read again, so it is said now
            raise
        return None  # a batch file is read again by the run, which names it
    if arrays is None:
        return None
    try:
        values = BatchWorker.feeds(model, arrays).values
    except OnnxProbeError:
        return None
    return {k: tuple(getattr(v, "shape", ())) for k, v in values.items()}


class BatchWorker:
    """Turns one batch into a partial result (``process``); ``__call__(batch)`` reads the batch first
    (on a Ray actor: where it runs). Errors name the batch."""

    specs: list[ModelInput] = []

    def process(self, index: int, label: str, arrays: dict[str, np.ndarray]):
        raise NotImplementedError

    @staticmethod
    def feeds(model: Model, arrays: dict[str, np.ndarray]) -> Feeds:
        """The feed dict of a batch, checked against the model's inputs."""
        return make_feeds(model.proto, InputSpec(arrays=arrays, arrays_from="the dataset", arrays_complete=True))

    def __call__(self, batch: Batch):
        cache = self.__dict__.setdefault("_cache", {})
        try:
            arrays = load_batch(batch, self.specs, cache)
        except OnnxProbeError as e:
            raise relabel(e, batch.label) from None
        return self.run(batch.index, batch.label, arrays)

    def run(self, index: int, label: str, arrays: dict[str, np.ndarray]) -> Done:
        try:
            return Done(self.process(index, label, arrays), feed_digest(arrays))
        except OnnxProbeError as e:
            raise relabel(e, label) from None


@dataclass
class Done:
    """A batch's partial result and the digest of its input values (``runtime.feeds.feed_digest``)."""

    partial: object
    digest: str


def relabel(e: OnnxProbeError, label: str) -> OnnxProbeError:
    """The same kind of error (its class, ``errors.plain_class``: a model's problem stays a ModelError), its
    message saying which batch, once: an error about the batch's own file ('dir/b.npz: not a readable .npz
    file', ``OnnxProbeError.about``) names it already."""
    err = settings_error(plain_class(e), lambda say: labelled(e, label, say))
    err.batch = label
    err.reason = None if _names(e, label) else said(lambda say: _line(e, say))
    return err


def labelled(e: OnnxProbeError, label: str, say: Voice | None = None) -> str:
    """``e``'s first line, naming batch ``label`` once (from what the error says it names, not its words); in
    ``say``'s words (the command line's: ``e.cli_message``), the API's where none is given."""
    text = _line(e, say)
    return text if _names(e, label) else f"{clean(label)}: {text}"  # a file name may hold a newline: escaped, on the one line


def _line(e: OnnxProbeError, say: Voice | None = None) -> str:
    """``e``'s first line as ``say``'s reader says it: the command line's words (``cli_message``) kept where the
    error is said again inside another one (a batch's, the batches' failures)."""
    return first_line(Exception(e.cli_message)) if say is not None and say.cli and e.cli_message else first_line(e)


def _names(e: OnnxProbeError, label: str) -> bool:
    """Whether error ``e`` names batch ``label`` itself (a file it could not read, a batch it refused)."""
    return e.batch == label or (e.about is not None and os.path.basename(e.about) == label)


def model_path(model: Model | str | os.PathLike, flag: str = "--ray") -> str:
    """The file a worker loads the model from: Ray actors get paths, not models."""
    path = model.source if isinstance(model, Model) else str(model)
    if not path or not os.path.isfile(path):
        raise UsageError(f"{flag} loads the models in its workers from files: {path or 'a model built in memory'} is not one")
    return os.path.abspath(path)


FAILURES_SHOWN = 3  # failed batches named with their reasons in the one error; the rest are counted
PIPELINE_GIVES_UP = 64  # a pipeline (it may never end) whose first samples all failed is stopped after this many


def run_batches(factory: Callable[[], BatchWorker], src: Source, merge: Callable[[int, str, object], None], *,
                ray: RayOptions | None = None, progress: Progress | None = None, cache: bool = True) -> Executor:
    """``merge(index, label, partial)`` for every batch of ``src``, here or on Ray (``ray``); raises the
    batches' failures as one error after all of them ran. ``cache``: the run's (RunConfig.cache), whose settings
    in the environment (a cache folder that is a file, a size that is no size) are refused here, once, before
    any batch: every batch failing for them was said as "2 of 2 batches failed"."""
    from onnxprobe.runtime import plan_cache

    plan_cache.enabled(cache)
    progress = as_progress(progress)
    executor = Executor()
    failures: list[tuple[int, str, OnnxProbeError]] = []
    count = [0]

    def done(index: int, label: str, got) -> None:
        if isinstance(got, OnnxProbeError):
            failures.append((index, label, _frameless(got)))
        elif isinstance(got, BaseException):
            err = ExecutionError(f"{clean(label)}: {type(got).__name__}: {first_line(got)}")
            err.batch, err.reason = label, f"{type(got).__name__}: {first_line(got)}"
            failures.append((index, label, err))
        else:
            executor.digests[index] = got.digest
            merge(index, label, got.partial)
        count[0] += 1
        if progress is not None:
            progress(count[0], src.total or count[0])

    if progress is not None and src.total:
        progress(0, src.total)  # the bar starts at 0/N
    if ray is not None:
        if src.batches is None:
            raise settings_error(UsageError, lambda say: f"{say(('ray', '--ray'))} shards the batches of {say(INPUTS_DIR)}; "
                                 f"{say(INPUTS_FROM)} runs in this process")
        ray_map(factory, src.batches, ray, executor, lambda b, got: done(b.index, b.label, got))
    else:
        worker = factory()
        items = ((b, None) for b in src.batches) if src.batches is not None else (
            (None, s) for s in src.samples)
        for k, (b, sample) in enumerate(items):
            label = b.label if b is not None else sample[0]
            try:
                got = worker(b) if b is not None else worker.run(k, label, sample[1])
            except OnnxProbeError as e:
                got = e
            done(b.index if b is not None else k, label, got)
            if b is None and len(failures) == count[0] >= PIPELINE_GIVES_UP:  # a generator may yield forever
                raise failed_batches(failures, count[0], stopped=True)
    if failures:
        raise failed_batches(failures, count[0])
    if not count[0]:
        raise UsageError("the dataset has no samples")
    return executor


def _frameless(e: BaseException) -> BaseException:
    """``e`` kept for the message said after every batch ran, without its traceback (nor its causes'): the frames
    held the failed batch's arrays, and a dataset of failing batches grew by one batch each (20 wrong-shape batches
    of 32 MB: 712 MB before the one-line error). Kept where ONNXPROBE_DEBUG=1 asks for tracebacks."""
    if debug_enabled():
        return e
    seen, x = set(), e
    while x is not None and id(x) not in seen:
        seen.add(id(x))
        x.__traceback__ = None
        x = x.__cause__ or x.__context__
    return e


def failed_batches(failures: list[tuple[int, str, OnnxProbeError]], total: int, stopped: bool = False) -> OnnxProbeError:
    """One error for the failed batches: each of the first few with its own reason (batches fail for different
    reasons: a wrong shape in one, an unknown input name in another), the rest counted. ``stopped``: a
    pipeline's first samples all failed, and it was not read further."""
    failures.sort(key=lambda f: f[0])
    cls = plain_class(failures[0][2])
    head = (f"the pipeline's first {total} samples failed (it was read no further)" if stopped else
            f"{len(failures)} of {total} batch{'es' if total != 1 else ''} failed")
    texts = {e.reason if e.batch == label else None if _names(e, label) else said(lambda say, e=e: _line(e, say))
             for _, label, e in failures}
    if len(failures) > 1 and len(texts) == 1 and None not in texts:
        # one reason for all (a stacked .npz that lacks an input fails every sample alike): said once
        labels = [clean(lb) for _, lb, _ in failures]
        reason = texts.pop()
        return settings_error(cls, lambda say: f"{head}, no result, each for the same reason: {clip(in_words(reason, say), 240)} "
                              f"({some(labels, form=str)})")
    shown = len(failures) if len(failures) <= FAILURES_SHOWN + 1 else FAILURES_SHOWN  # never "and 1 more"
    more = (f"; and {len(failures) - shown} more ({some((lb for _, lb, _ in failures[shown:]), form=clean)})"
            if len(failures) > shown else "")
    return settings_error(cls, lambda say: f"{head}, no result: "
                          f"{'; '.join(clip(labelled(e, label, say), 240) for _, label, e in failures[:shown])}{more}")
