"""Small formatting helpers shared by every table: numbers, shapes, shortened names."""

from __future__ import annotations

import math


def num(v: float | None, digits: int = 4) -> str:
    """Significant digits, compact: 0.0001641, 1.234e+05, nan, inf."""
    if v is None:
        return "-"
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if v == 0:
        return "0"
    return f"{v:.{digits}g}"


def shape(s: tuple | list | None) -> str:
    if s is None:
        return "?"
    if len(s) == 0:
        return "scalar"
    return "x".join("?" if d is None else str(d) for d in s)


def shorten(name: str, width: int) -> str:
    """Keep both ends of a long name: '/model/encoder/layer.0/…/MatMul_output_0'."""
    if width <= 0 or len(name) <= width:
        return name
    if width <= 3:
        return name[:width]
    head = (width - 1) // 3
    tail = width - 1 - head
    return name[:head] + "…" + name[-tail:]
