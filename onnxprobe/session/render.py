"""Renderings for the debugging session: pure functions from data to Rich renderables (no printing).

- ``histogram(values)``: a bar chart of the finite values drawn with Unicode eighth blocks;
- ``tensor_table(rows, width)``: tensors with shapes, statistics and where they come from / go to;
- ``kv_table(pairs)``: a two-column key/value grid;
- ``stats_line(stats)``: one line of statistics.
"""

from __future__ import annotations

import math

import numpy as np
from rich.text import Text

from onnxprobe.report.format import no_values, num, safe, shape as fmt_shape, spread_digits
from onnxprobe.report.table import Column, Table
from onnxprobe.api import TensorStats

BLOCKS = " ▏▎▍▌▋▊▉█"


def bar(fraction: float, width: int) -> str:
    """A horizontal bar of ``fraction`` (0..1) of ``width`` cells, to 1/8 of a cell."""
    eighths = int(round(max(0.0, min(1.0, fraction)) * width * 8))
    full, part = divmod(eighths, 8)
    return "█" * full + (BLOCKS[part] if part else "")


def histogram(values: np.ndarray, bins: int = 16, width: int = 40, log: bool = False) -> Text:
    """Counts of the finite values in ``bins`` equal bins (integer tensors with a small range get one bin
    per integer), one row per bin: ``low … high  bar  count``. A bin that holds anything shows at least
    a sliver; ``log`` scales the bars by log(1 + count), for skewed distributions."""
    a = np.asarray(values)
    if a.dtype.kind == "b":
        a = a.astype(np.int8)
    if a.dtype.kind not in "iuf":
        return Text(f"(no histogram for dtype {a.dtype})", style="dim")
    x = a.astype(np.float64, copy=False).ravel()
    finite = x[np.isfinite(x)]
    out = Text()
    skipped = x.size - finite.size
    if finite.size == 0:
        out.append(f"(no finite values to draw: {x.size} values, all NaN or Inf)", style="dim")
        return out
    lo, hi = float(finite.min()), float(finite.max())
    bins = max(1, min(bins, int(math.ceil(math.sqrt(finite.size))) + 1))
    integer = a.dtype.kind in "iu" or bool(np.all(finite == np.round(finite)))
    if integer and hi - lo + 1 <= max(bins, 2) * 2 and a.dtype.kind in "iu":
        edges = np.arange(lo, hi + 2) - 0.5
        labels = [f"{int(e + 0.5)}" for e in edges[:-1]]
    elif lo == hi:
        edges = np.array([lo - 0.5, hi + 0.5]) if lo == 0 else np.array([lo - abs(lo) * 1e-6, hi + abs(hi) * 1e-6])
        labels = [f"{num(lo, 15 if a.dtype == np.float64 else spread_digits(lo, hi))}"]  # 10000.5, as the statistics
    else:
        edges = np.linspace(lo, hi, bins + 1)
        # enough digits to tell the edges apart: the magnitude over a bin's width, plus one (at least four)
        d = max(4, min(10, math.ceil(math.log10(max(abs(lo), abs(hi)) / ((hi - lo) / bins))) + 1))
        labels = [f"{num(float(edges[i]), d)} … {num(float(edges[i + 1]), d)}" for i in range(len(edges) - 1)]
    counts, _ = np.histogram(finite, bins=edges)
    peak = int(counts.max()) if counts.size else 0
    lw = max(len(s) for s in labels)
    cw = len(str(peak))
    for label, c in zip(labels, counts):
        out.append(f"{label:>{lw}} │", style="dim")
        frac = (math.log1p(c) / math.log1p(peak) if log else c / peak) if peak else 0.0
        b = bar(frac, width) or ("▏" if c else "")
        out.append(f"{b:<{width}}", style="cyan")
        out.append(f" {int(c):>{cw}}\n")
    note = f"{finite.size} finite values" + (" (bars on a log scale)" if log else "")
    if skipped:
        note += f"; {skipped} NaN/Inf not drawn"
    out.append(note, style="dim")
    return out


def stats_line(s: TensorStats | None, compact: bool = False) -> Text:
    t = Text()
    if s is None:
        t.append("no statistics (non-numeric tensor)", style="dim")
        return t
    if s.count == 0:  # a value there is (a tensor whose branch did not run has none: `show` says so)
        t.append("empty (no element: a dimension of size 0)", style="dim")
        return t
    # no finite value (all NaN or Inf): '-' for every statistic of the finite values, as the layers table shows
    digits = spread_digits(s.min, s.max)  # min, max and mean told apart on offset data, as in the layers table
    value = (lambda v, d=digits: num(v, d) if s.finite and v is not None and math.isfinite(v) else "-")
    parts = [("count", str(s.count)), ("min", value(s.min)), ("max", value(s.max)), ("mean", value(s.mean)),
             ("std", value(s.std, 4)), ("abs_mean", value(s.abs_mean)), ("zeros", f"{num(s.zero_fraction * 100, 3)}%" if math.isfinite(s.zero_fraction) else "-")]
    if compact:
        parts = parts[1:5]
    for i, (k, v) in enumerate(parts):
        if i:
            t.append(" · ", style="dim")
        t.append(f"{k} ", style="dim")
        t.append(v)
    t.append(" · ", style="dim")
    bad = s.has_nonfinite
    t.append(f"NaN {s.nan} · Inf {s.inf}", style="bold red" if bad else None)
    return t


def kv_table(pairs: list[tuple[str, object]]) -> Text:
    """Aligned 'key  value' lines; multi-line values stay under their first line."""
    w = max((len(k) for k, _ in pairs), default=0)
    out = Text()
    for i, (k, v) in enumerate(pairs):
        if i:
            out.append("\n")
        out.append(f"{k:<{w}}  ", style="bold")
        value = v if isinstance(v, Text) else Text(safe(str(v)))
        for j, line in enumerate(value.split("\n")):
            if j:
                out.append("\n" + " " * (w + 2))
            out.append_text(line)
    return out


TENSOR_COLUMNS = [
    Column("role", "", head=True), Column("tensor", "tensor", name=True), Column("shape", "shape", head=True),
    Column("dtype", "dtype", head=True), Column("min", "min", "right"), Column("max", "max", "right"),
    Column("mean", "mean", "right"), Column("std", "std", "right"), Column("nan", "NaN", "right"),
    Column("inf", "Inf", "right"), Column("link", "from / to", name=True),
]


def tensor_table(rows: list[dict], width: int = 120, link: str = "from / to") -> Table:
    """rows: dicts with role, name, shape, dtype, stats (TensorStats or None), link (producer/consumers,
    under the header ``link``)."""
    t = Table(TENSOR_COLUMNS[:-1] + [Column("link", link, name=True)])
    for r in rows:
        s: TensorStats | None = r.get("stats")
        ran = s is not None and s.count > 0
        fin = ran and s.finite > 0
        shp = fmt_shape(r.get("shape")) if r.get("shape") is not None or r.get("known") else "?"
        d = spread_digits(s.min, s.max) if fin else 4  # min, max and mean told apart on offset data, as in layers
        cells = [
            r.get("role", ""), r["name"], shp, r.get("dtype") or "?",
            num(s.min, d) if fin else ("-" if s is None or s.count else no_values(r.get("shape"))),
            num(s.max, d) if fin else "-", num(s.mean, d) if fin else "-", num(s.std) if fin else "-",
            str(s.nan) if s is not None else "-", str(s.inf) if s is not None else "-", r.get("link", ""),
        ]
        values = [r.get("role", ""), r["name"], shp, r.get("dtype"), s.min if fin else None, s.max if fin else None,
                  s.mean if fin else None, s.std if fin else None, s.nan if s is not None else None,
                  s.inf if s is not None else None, r.get("link", "")]
        style = "bold red" if s is not None and s.has_nonfinite else (r.get("style") or None)
        t.add_row(cells, values, style)
    return t
