"""The samples of a dataset run (``layers``, ``diff`` and ``grad`` with ``--inputs-dir`` or ``--inputs-from``).

- ``dataset_batches(path, inputs)``: the batches of a folder of ``.npz`` files (one batch each, sorted by
  name) or of one ``.npz`` whose arrays have a leading sample axis, as ``Batch`` addresses: a batch can
  be read where it is processed (``load_batch``), in this process or in a worker of a cluster.
- ``dataset_samples(path, inputs)``: (number of batches, iterator of (label, arrays)).
- ``generator_samples("FILE.py:FUNC")``: the feed dicts the user's own pipeline yields (``--inputs-from``),
  each checked as it comes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from onnxprobe.errors import UsageError, error_about, setting_error
from onnxprobe.runtime.arrays import as_array, read_npz
from onnxprobe.runtime.feeds import ModelInput
from onnxprobe.runtime.userfunc import call_function, load_function, raised, user_code
from onnxprobe.text import clean, clip, quote, some

Samples = Iterator[tuple[str, dict[str, np.ndarray]]]
INPUTS_DIR = ("inputs", "--inputs-dir")  # a dataset's folder or stacked .npz, as the API and the command line name it


@dataclass(frozen=True)
class Batch:
    """Where one batch is: a file of a dataset folder, or one row (``row``) of a stacked ``.npz``."""

    index: int
    label: str  # the file's path in the dataset's folder (its name), or "sample ROW": every error names it so
    path: str
    row: int | None = None


def dataset_batches(path: str | Path, specs: list[ModelInput]) -> list[Batch]:
    """A folder of .npz files (one batch each, sorted by name), or one .npz whose arrays have a leading
    sample axis (an array of the input's own rank is split along its first axis instead, one batch of 1
    per row)."""
    p = Path(path)
    if p.is_dir():
        files = [f for f in sorted(p.iterdir()) if _is_batch(f)]
        if not files:
            raise setting_error(UsageError, INPUTS_DIR, f"{clean(p)}: no .npz files in this folder")
        return [Batch(k, f.name, str(f)) for k, f in enumerate(files)]
    if p.suffix == ".npz" and p.is_file():
        n = _stacked_samples(p, read_npz(p), specs)
        return [Batch(i, f"sample {i}", str(p), i) for i in range(n)]
    what = "a folder of .npz files or one .npz with a leading sample axis"
    if not p.exists() and not p.is_symlink():  # a mistyped folder: not "expected a folder" of what is one
        raise setting_error(UsageError, INPUTS_DIR, f"{clean(p)}: no such folder or file ({what} expected)")
    if not p.exists():  # a link to a folder since removed, or a loop of links: what the path is, as fileio says it
        raise setting_error(UsageError, INPUTS_DIR, f"{clean(p)}: is a symbolic link that leads to no folder or file "
                                                    f"(broken, or a loop of links; {what} expected)")
    raise setting_error(UsageError, INPUTS_DIR, f"{clean(p)}: expected {what}")


def _is_batch(f: Path) -> bool:
    """A batch of a dataset folder: a .npz name that is no dot-file (macOS writes ``._x.npz`` beside ``x.npz``
    on other file systems: its resource fork, no arrays) nor a folder. A name the user gave as a batch that
    is no readable file (a symbolic link to nothing, a pipe) is one all the same: reading it fails the run,
    naming it, rather than leaving its samples out."""
    return f.suffix == ".npz" and not f.name.startswith(".") and not f.is_dir()


def skipped_note(path: str | Path) -> list[str]:
    """A note naming what a dataset folder holds beside its batches (dot-files, folders, other names, ``.NPZ``),
    which is not read: said, since a batch misnamed there would be left out without a word."""
    p = Path(path)
    if not p.is_dir():
        return []
    skipped = [f.name + ("/" if f.is_dir() else "") for f in sorted(p.iterdir()) if not _is_batch(f)]
    if not skipped:
        return []
    shown = some(skipped, 5, clean)
    return [f"--inputs-dir {clean(p.name or p)}: {len(skipped)} entr{'ies' if len(skipped) > 1 else 'y'} skipped, not "
            f"batches (a batch is a .npz file whose name has no leading dot): {shown}"]


def _stacked_samples(p: Path, arrays: dict[str, np.ndarray], specs: list[ModelInput]) -> int:
    """The number of samples of a stacked .npz; its arrays checked here, by the shapes in the file: a sample cut
    from an array of another rank (``load_batch``) was refused with a shape the file does not hold."""
    if not arrays:
        raise setting_error(UsageError, INPUTS_DIR, f"{clean(p)}: holds no arrays (a stacked .npz has one per input, "
                            f"samples along its first axis)")
    by_name = {s.name: s for s in specs}
    n = None
    for name, a in arrays.items():
        if name not in by_name:
            raise setting_error(UsageError, INPUTS_DIR, f"{clean(p)}: unknown input name {quote(name)}")
        want = by_name[name].shape
        if want is not None and a.ndim not in (len(want) + 1, len(want)):
            dims = "x".join(str(d) if isinstance(d, int) else "?" if d is None else str(d) for d in want) or "scalar"
            raise setting_error(UsageError, INPUTS_DIR, f"{clean(p)}: array {quote(name)} has shape {list(a.shape)}: "
                                f"expected samples along a first axis, then the input's {dims} (rank {len(want) + 1}), "
                                f"or the input's own rank {len(want)}, split along its first axis")
        k = a.shape[0] if a.ndim else 0
        if n is not None and k != n:
            raise setting_error(UsageError, INPUTS_DIR, f"{clean(p)}: arrays disagree on the number of samples ({n} vs {k} for {clean(name)})")
        n = k
    if not n:
        raise setting_error(UsageError, INPUTS_DIR, f"{clean(p)}: no samples (arrays need a leading sample axis)")
    return n


def load_batch(batch: Batch, specs: list[ModelInput], cache: dict | None = None) -> dict[str, np.ndarray]:
    """The arrays of ``batch``. ``cache``: a dict that keeps the last stacked .npz read (its rows are
    the next batches)."""
    if batch.row is None:  # its errors name it as every other error about the batch does: by its label
        return read_npz(batch.path, shown=batch.label)
    if cache is not None and cache.get("path") == batch.path:
        arrays = cache["arrays"]
    else:
        arrays = read_npz(batch.path)
        if cache is not None:
            cache.update(path=batch.path, arrays=arrays)
    by_name = {s.name: s for s in specs}
    feed = {}
    for name, a in arrays.items():
        rank = len(by_name[name].shape) if name in by_name and by_name[name].shape is not None else a.ndim - 1
        feed[name] = a[batch.row] if a.ndim == rank + 1 else a[batch.row:batch.row + 1]
    return feed


def dataset_samples(path: str | Path, specs: list[ModelInput]) -> tuple[int, Samples]:
    """(number of batches, iterator of (label, arrays)) of ``dataset_batches``."""
    batches = dataset_batches(path, specs)
    cache: dict = {}
    return len(batches), ((b.label, load_batch(b, specs, cache)) for b in batches)


FLAG = "--inputs-from"
INPUTS_FROM = ("inputs_from", FLAG)  # as the API and the command line name it (runtime.userfunc's messages)


def generator_samples(spec) -> Samples:
    """The feed dicts yielded by ``FUNC()`` of ``FILE.py:FUNC`` (a generator, or anything iterable),
    labelled "item K"; the function is called when the iteration starts. From Python, ``spec`` may also be
    such a function itself, or the iterable of feed dicts. A value that is not a dict of input name ->
    array, or an exception in the pipeline, is one line naming the item."""
    if isinstance(spec, (str, os.PathLike)):
        fn, func = load_function(str(spec), INPUTS_FROM, "a function that yields feed dicts {input name: array}")
        where, produce = (*INPUTS_FROM, clean(str(spec))), (lambda: call_function(fn, func, str(spec), INPUTS_FROM))
    elif callable(spec):
        func = getattr(spec, "__name__", "the function")
        where, produce = f"inputs_from {clean(func)}", (lambda: call_function(spec, func, func, "inputs_from"))
    else:  # an iterable of feed dicts (api.inputs.as_dataset checked it is one)
        func, where, produce = None, "inputs_from", (lambda: spec)

    def items() -> Samples:
        got = produce()
        try:
            it = iter(got)
        except TypeError:
            raise error_about(UsageError, where, f": {clean(func)}() returned {type(got).__name__}, not a generator "
                             "or an iterable of feed dicts") from None
        k = 0
        while True:
            try:
                with user_code():
                    item = next(it)
            except StopIteration:
                break
            except (Exception, SystemExit) as e:  # noqa: BLE001 - the user's pipeline may raise anything, exit too
                raise error_about(UsageError, where, f": item {k}: the pipeline raised {raised(e)}") from None
            yield f"item {k}", _feed_dict(item, where, k)
            k += 1
        if k == 0:
            raise error_about(UsageError, where, f": {f'{clean(func)}() yielded' if func else 'holds'} nothing")

    return items()


def _feed_dict(item, where: str | tuple[str, ...], k: int) -> dict[str, np.ndarray]:
    if not isinstance(item, dict):
        raise error_about(UsageError, where, f": item {k} is a {type(item).__name__}, not a dict {{input name: array}}")
    key = next((n for n in item if not isinstance(n, str)), None)
    if key is not None:
        try:
            shown = f"{clip(clean(repr(key)), 60)} "
        except Exception:  # noqa: BLE001 - the user's object, its repr too
            shown = ""
        raise error_about(UsageError, where, f": item {k} has the key {shown}({type(key).__name__}), not an input name: yield "
                         f"dicts {{input name: array}}")
    out = {}
    for name, v in item.items():
        out[name] = as_array(v, where, f": item {k}, input {quote(name)}")  # dtype and shape: runtime.feeds.check_value
    return out
