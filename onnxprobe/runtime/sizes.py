"""Sizes as people type them (``--max-memory 2G``, ``$ONNXPROBE_CACHE_SIZE``): ``parse_size``. No onnx: the plan
cache reads its size with it on every run, a cached ``layers`` run too (``runtime.direct``)."""

from __future__ import annotations

import re

from onnxprobe.errors import UsageError, error_about

_UNITS = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "KIB": 2**10, "M": 2**20, "MB": 2**20, "MIB": 2**20,
          "G": 2**30, "GB": 2**30, "GIB": 2**30, "T": 2**40, "TB": 2**40, "TIB": 2**40}


def parse_size(text: str, what: str | tuple[str, ...] = ("max_memory", "--max-memory"), *, whole: bool = False,
               minimum: int = 1) -> int:
    """'512M', '2G', '1.5GB', '1000000' -> bytes (powers of 1024). ``what``: the setting messages name, (API
    parameter, flag[, the option]) or as it is written (an environment variable: ``errors.error_about``);
    ``whole``: the number before the unit must be a whole one; ``minimum``: the least size taken."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).upper() not in _UNITS or (whole and "." in m.group(1)):
        example = "536870912 or 512M" if whole else "512M or 2G"
        raise error_about(UsageError, what, f" {text!r}: expected a size{' in bytes' if whole else ''} such as {example}")
    from fractions import Fraction  # (1.4 ms of a start that parses no size: with decimal, on its first use)

    n = int(Fraction(m.group(1)) * _UNITS[m.group(2).upper()])  # exact: a float of 309+ digits is inf
    if n < minimum:
        raise error_about(UsageError, what, f" {text!r}: must be positive" if minimum == 1 else f" {text!r}: at least {minimum}")
    return n
