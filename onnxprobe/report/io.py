"""Writing report files: JSON (stdout with '-'). Atomic, never over the user's model."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from onnxprobe.fileio import write_file

# numpy and onnx (through graph.io) are imported where they are used: the command line imports this module
# at start, and `--help` should not pay for them


def check_writable(path: str | os.PathLike, model: str | os.PathLike | None = None, model_is: str = "an input model") -> Path:
    from onnxprobe.graph.io import check_output_path

    return check_output_path(path, source=model, source_is=model_is)


def write_json(data: dict, path: str | os.PathLike) -> None:
    text = json.dumps(data, indent=2, allow_nan=False, default=json_default)
    if str(path) == "-":
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return
    write_file(path, lambda f: f.write(text.encode() + b"\n"))


def write_text(text: str, path: str | os.PathLike) -> None:
    """A text file (an HTML report), atomically."""
    write_file(path, lambda f: f.write(text.encode("utf-8")))


def json_default(o):
    """numpy scalars and arrays as the Python values json writes."""
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
