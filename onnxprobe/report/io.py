"""Writing report files: JSON (stdout with '-'), npz archives. Atomic, never over the user's model."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from onnxprobe.graph.io import check_output_path


def check_writable(path: str | os.PathLike, model: str | os.PathLike | None = None) -> Path:
    return check_output_path(path, source=model)


def write_json(data: dict, path: str | os.PathLike) -> None:
    text = json.dumps(data, indent=2, allow_nan=False, default=_default)
    if str(path) == "-":
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return
    _atomic_write(Path(path), text.encode() + b"\n")


def _default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def save_npz(arrays: dict[str, np.ndarray], path: str | os.PathLike) -> None:
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp.npz", dir=p.parent if str(p.parent) else ".")
    os.close(fd)
    try:
        np.savez(tmp, **arrays)
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _atomic_write(p: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent if str(p.parent) else ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
