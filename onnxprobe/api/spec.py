"""The input flags as the command line states them, before any model is read: ``input_spec`` (the InputSpec of
``--seed``, ``--int-range``, ``--shape``, ``--input``, ``--inputs``), ``parse_int_range`` and ``protect_inputs``.
No onnx here: a cached ``layers`` run (``api.lean``) reads its request with these and never imports it
(``api.inputs`` re-exports them, where the other input parsers are)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from onnxprobe.errors import UsageError, setting_error, settings_error
from onnxprobe.fileio import protect
from onnxprobe.runtime.input_flags import parse_input_files, parse_shape_overrides
from onnxprobe.runtime.userfunc import split_spec
from onnxprobe.text import clean, clip, controls
from onnxprobe.types import InputSpec

__all__ = ["input_spec", "parse_int_range", "protect_inputs", "what_came", "PATH"]

PATH = (str, os.PathLike)
INPUTS = ("inputs", "--inputs")  # input_spec's


def read_given(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], bool]:
    """The arrays of ``--inputs PATH`` by the names the file gives them, and whether they are every input
    (``api.inputs.given_inputs``, which names them by the model's inputs). onnx (for an ONNX test data set's
    .pb files) is imported only here, when such a file is given."""
    from onnxprobe.runtime.arrays import read_arrays

    given = dict(read_arrays(path, "input", flag=INPUTS))
    complete = not given and Path(path).is_dir()
    if not given and not complete:
        raise settings_error(UsageError, lambda say: f"{say(INPUTS)} {clean(str(path))}: holds no arrays; give a file with the "
                             "model's inputs by name (without one, the inputs are seeded random data)")
    return given, complete


def what_came(value) -> str:
    """What came instead, for messages: its type and the start of its repr."""
    return f"{type(value).__name__} {clip(controls(repr(value)), 40)}"


def protect_inputs(*files: object, inputs_dir: str | os.PathLike | None = None, inputs_from: object = None,
                   py_specs: Iterable[str] = (), what: str = "an input file") -> None:
    """Every file a run will read, recorded as an input (``fileio.protect``) before it is read and before
    any output is written or checked: ``files`` (models, .npz), a dataset's batches (``inputs_dir``: the
    .npz files of the folder, or the one .npz) and the FILE.py of ``inputs_from`` and of ``py_specs``
    (FILE.py:FUNC); ``what`` names ``files`` in the refusal. fileio learns of a file when it is read, which for a dataset is after `grad --export`
    wrote its model and after the whole dataset ran: `--export data/b0.npz` destroyed the batch."""
    for f in files:
        if not isinstance(f, PATH) or str(f) == "-":
            continue
        # a folder: an ONNX test data set (--vs-npz DIR), whose .pb files are read
        for e in (Path(f).iterdir() if os.path.isdir(f) else [Path(f)]):
            if e.is_file():
                protect(e, what)
    if isinstance(inputs_dir, PATH):
        p = Path(inputs_dir)
        if p.is_dir():
            for f in p.iterdir():
                if f.suffix == ".npz" and f.is_file():
                    protect(f, "an input file")
        elif p.is_file():
            protect(p, "an input file")
    for spec in [inputs_from, *py_specs]:
        parts = split_spec(spec) if isinstance(spec, PATH) else None
        if parts is not None and os.path.isfile(parts[0]):
            protect(parts[0], "an input file")


def parse_int_range(spec: str) -> tuple[int, int]:
    """'LOW:HIGH' -> (LOW, HIGH)."""
    lo, sep, hi = str(spec).partition(":")
    try:
        if not sep:
            raise ValueError
        return int(lo), int(hi)
    except ValueError:
        raise setting_error(UsageError, ("int_range", "--int-range"), f"{spec!r}: expected LOW:HIGH, e.g. 0:100") from None


def input_spec(seed: int = 0, int_range: str | tuple[int, int] = (0, 100), shape: list[str] | None = None,
               input_: list[str] | None = None, inputs: str | os.PathLike | None = None,
               arrays: dict[str, np.ndarray] | None = None) -> InputSpec:
    """The InputSpec of the input flags: ``shape`` and ``input_`` are lists of ``NAME=...`` strings,
    ``inputs`` an ``.npz`` path or an ONNX test data set folder (its input_N.pb: ``runtime.arrays.read_arrays``)."""
    # one "NAME=..." string is one flag value, not a list of its characters
    shape, input_ = ([v] if isinstance(v, str) else v for v in (shape, input_))
    if arrays is not None and not isinstance(arrays, Mapping):
        raise UsageError(f"arrays: expected a dict of arrays by input name, got {what_came(arrays)}")
    # a test data set without input_N.pb is a model's without inputs: one that takes some is refused them (feeds)
    given, complete = read_given(inputs) if inputs is not None else ({}, False)
    given.update(arrays or {})
    rng = parse_int_range(int_range) if isinstance(int_range, str) else int_range  # InputSpec checks the others
    return InputSpec(seed=seed, int_range=rng, shapes=parse_shape_overrides(shape), files=parse_input_files(input_),
                     arrays=given, arrays_from=f"--inputs {Path(inputs).name}" if inputs is not None else
                     "the arrays given" if arrays else "--inputs", arrays_complete=complete)
