"""Memory budgets: parsing ``--max-memory``, the default budget, and packing tensors into chunks."""

from __future__ import annotations

import re

import numpy as np

from onnxprobe.errors import UsageError
from onnxprobe.runtime.arrays import available_memory

DEFAULT_FRACTION = 0.25  # of the memory available when the command starts
_UNITS = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "KIB": 2**10, "M": 2**20, "MB": 2**20, "MIB": 2**20,
          "G": 2**30, "GB": 2**30, "GIB": 2**30, "T": 2**40, "TB": 2**40}


def parse_size(text: str) -> int:
    """'512M', '2G', '1.5GB', '1000000' -> bytes."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).upper() not in _UNITS:
        raise UsageError(f"--max-memory {text!r}: expected a size such as 512M or 2G")
    n = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if n <= 0:
        raise UsageError(f"--max-memory {text!r}: must be positive")
    return n


def default_budget() -> int:
    return int(available_memory() * DEFAULT_FRACTION)


def nbytes(shape: tuple[int, ...] | None, dtype: str | None, count: int | None = None) -> int:
    n = count if count is not None else (int(np.prod(shape)) if shape is not None else 0)
    try:
        item = np.dtype(dtype).itemsize if dtype else 4
    except TypeError:
        item = 4
    return n * item


def plan_chunks(sizes: list[tuple[str, int]], budget: int) -> list[list[str]]:
    """Greedy packing in the given (topological) order; a tensor larger than the budget gets a chunk
    of its own (it cannot be split)."""
    chunks: list[list[str]] = []
    cur: list[str] = []
    used = 0
    for name, size in sizes:
        if cur and used + size > budget:
            chunks.append(cur)
            cur, used = [], 0
        cur.append(name)
        used += size
    if cur:
        chunks.append(cur)
    return chunks
