"""Memory budgets: parsing ``--max-memory``, the default budget, and packing tensors into chunks."""

from __future__ import annotations

import re

import numpy as np

from onnxprobe.errors import UsageError
from onnxprobe.runtime.arrays import available_memory

DEFAULT_FRACTION = 0.25  # of the memory available when the command starts
_UNITS = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "KIB": 2**10, "M": 2**20, "MB": 2**20, "MIB": 2**20,
          "G": 2**30, "GB": 2**30, "GIB": 2**30, "T": 2**40, "TB": 2**40, "TIB": 2**40}


def parse_size(text: str, what: str = "--max-memory", *, whole: bool = False, minimum: int = 1) -> int:
    """'512M', '2G', '1.5GB', '1000000' -> bytes (powers of 1024). ``what``: the setting messages name;
    ``whole``: the number before the unit must be a whole one; ``minimum``: the least size taken."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).upper() not in _UNITS or (whole and "." in m.group(1)):
        example = "536870912 or 512M" if whole else "512M or 2G"
        raise UsageError(f"{what} {text!r}: expected a size{' in bytes' if whole else ''} such as {example}")
    n = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if n < minimum:
        raise UsageError(f"{what} {text!r}: must be positive" if minimum == 1 else f"{what} {text!r}: at least {minimum}")
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
