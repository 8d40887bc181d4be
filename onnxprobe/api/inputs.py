"""Inputs and sizes from what people type: ``--seed``, ``--int-range 0:100``, ``--shape x=1x3x224x224``,
``--input x=x.npy`` / ``--input sr=16000``, ``--inputs batch.npz``, ``--max-memory 2G``; and the arrays
they name. The command line and the debugger build their InputSpec here, so a flag means the same in both."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from onnxprobe.errors import UsageError
from onnxprobe.runtime.arrays import read_array, read_npz
from onnxprobe.runtime.budget import parse_size
from onnxprobe.runtime.feeds import Feeds, ModelInput, check_value, model_inputs, parse_input_files, parse_shape_overrides
from onnxprobe.runtime.npz import save_npz
from onnxprobe.types import InputSpec

__all__ = ["input_spec", "parse_int_range", "parse_size", "parse_shape_overrides", "parse_input_files", "read_array",
           "read_npz", "save_npz", "Feeds", "ModelInput", "model_inputs", "check_value"]


def parse_int_range(spec: str) -> tuple[int, int]:
    """'LOW:HIGH' -> (LOW, HIGH)."""
    lo, sep, hi = str(spec).partition(":")
    try:
        if not sep:
            raise ValueError
        return int(lo), int(hi)
    except ValueError:
        raise UsageError(f"--int-range {spec!r}: expected LOW:HIGH, e.g. 0:100") from None


def input_spec(seed: int = 0, int_range: str | tuple[int, int] = (0, 100), shape: list[str] | None = None,
               input_: list[str] | None = None, inputs: str | os.PathLike | None = None,
               arrays: dict[str, np.ndarray] | None = None) -> InputSpec:
    """The InputSpec of the input flags: ``shape`` and ``input_`` are lists of ``NAME=...`` strings,
    ``inputs`` an ``.npz`` path."""
    given = dict(read_npz(inputs)) if inputs is not None else {}
    given.update(arrays or {})
    rng = parse_int_range(int_range) if isinstance(int_range, str) else tuple(int_range)
    return InputSpec(seed=seed, int_range=rng, shapes=parse_shape_overrides(shape), files=parse_input_files(input_),
                     arrays=given, arrays_from=f"--inputs {Path(inputs).name}" if inputs is not None else "--inputs")
