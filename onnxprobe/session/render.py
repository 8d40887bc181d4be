"""Renderings for the debugging session: pure functions from data to Rich renderables (no printing).

- ``histogram(values)``: a bar chart of the finite values drawn with Unicode eighth blocks;
- ``tensor_table(rows, width)``: tensors with shapes, statistics and where they come from / go to;
- ``kv_table(pairs)``: a two-column key/value grid;
- ``stats_line(stats)``: one line of statistics;
- ``values(array, width, threshold)``: an array's values as numpy lays them out, each number as the tables write it.
"""

from __future__ import annotations

import math

import numpy as np
from rich.text import Text

from onnxprobe.report.format import no_values, num, safe, shape as fmt_shape, spread_digits, type_digits
from onnxprobe.report.layers import extreme_text
from onnxprobe.report.table import Column, Table
from onnxprobe.api import TensorStats

BLOCKS = " ▏▎▍▌▋▊▉█"
BAR_MIN = 10  # the narrowest bar beside its label: narrower, the label goes above it


def bar(fraction: float, width: int) -> str:
    """A horizontal bar of ``fraction`` (0..1) of ``width`` cells, to 1/8 of a cell."""
    eighths = int(round(max(0.0, min(1.0, fraction)) * width * 8))
    full, part = divmod(eighths, 8)
    return "█" * full + (BLOCKS[part] if part else "")


def histogram(values: np.ndarray, bins: int = 16, width: int = 40, log: bool = False, room: int | None = None,
              asked: bool = False) -> Text:
    """Counts of the finite values in ``bins`` equal bins (integer tensors with a small range get one bin
    per integer), one row per bin: ``low … high  bar  count``. A bin that holds anything shows at least
    a sliver; ``log`` scales the bars by log(1 + count), for skewed distributions. ``room``: the line's
    width; the bars take at most ``width`` cells of what the labels and counts leave (float64 labels of
    1e6 + 1e-10 take 39), and where that is under BAR_MIN each label goes on a line of its own above its bar.
    At most sqrt(n) + 1 bins for n values; ``asked``: ``bins`` is the user's (`--bins`), and the note says so
    where fewer are drawn."""
    a = np.asarray(values)
    if a.dtype.kind == "b":
        a = a.astype(np.int8)
    if a.dtype.kind not in "iuf":
        return Text(f"(no histogram for dtype {a.dtype})", style="dim")
    out = Text()
    finite = a.ravel() if a.dtype.kind in "iu" else a.astype(np.float64, copy=False).ravel()
    if a.dtype.kind == "f":
        finite = finite[np.isfinite(finite)]
    most = max(1, min(bins, int(math.ceil(math.sqrt(finite.size))) + 1))
    if finite.size:
        labels, counts = (_int_bins(finite, most) if a.dtype.kind in "iu" else
                          _float_bins(finite, most, 17 if a.dtype == np.float64 else 10))
    skipped = a.size - finite.size
    if finite.size == 0:
        out.append(f"(no finite values to draw: {a.size} values, all NaN or Inf)", style="dim")
        return out
    peak = int(counts.max()) if counts.size else 0
    lw = max(len(s) for s in labels)
    cw = len(str(peak))
    above = False
    if room is not None:
        above = room - lw - 3 - cw < BAR_MIN
        width = max(min(width, room - 3 - cw - (0 if above else lw)), 1)
    for label, c in zip(labels, counts):
        out.append(f"{label}\n │" if above else f"{label:>{lw}} │", style="dim")
        frac = (math.log1p(c) / math.log1p(peak) if log else c / peak) if peak else 0.0
        b = bar(frac, width) or ("▏" if c else "")
        out.append(f"{b:<{width}}", style="cyan")
        out.append(f" {int(c):>{cw}}\n")
    note = f"{finite.size} finite values" + (" (bars on a log scale)" if log else "")
    if asked and most < bins:  # --bins 50 of 100 values drew 11, without a word
        note += f"; {most} bins, not {bins}: at most sqrt(n) + 1 for n values"
    if skipped:
        note += f"; {skipped} NaN/Inf not drawn"
    out.append(note, style="dim")
    return out


def _int_bins(v: np.ndarray, bins: int) -> tuple[list[str], np.ndarray]:
    """Bins of an integer tensor taken in the integers: one per integer over a small range, else bins of
    one integer width from the exact min (in float64, uint64 near 2^64 rounded to one value and left no
    bin; int64 near 2^62 filled 2 of 16 bins under labels that all read the same)."""
    lo, hi = int(v.min()), int(v.max())
    span = hi - lo + 1
    w = 1 if span <= max(bins, 2) * 2 else -(-span // bins)
    # v - lo in uint64: exact for any pair of int64 or uint64 values (the int64 difference wraps modulo 2^64)
    u = v.astype(np.uint64) if v.dtype.kind == "u" else v.astype(np.int64).view(np.uint64)
    # one bin over the whole 64-bit range (--bins 1 of -2^63 and 2^63-1) is 2^64 wide, past uint64: every value in it
    idx = (u - np.uint64(lo % 2 ** 64)) // np.uint64(w) if w < 2 ** 64 else np.zeros(u.shape, np.uint64)
    counts = np.bincount(idx.astype(np.int64), minlength=-(-span // w))
    if w == 1:
        return [str(lo + i) for i in range(counts.size)], counts
    # enough digits to tell the edges apart: the magnitude over a bin's width, plus one; past float64's
    # 15, the integers themselves
    d = max(4, math.ceil(math.log10(max(abs(lo), abs(hi), 1) / w)) + 1)
    label = (lambda e: num(float(e), d) if d <= 15 else str(e))
    return [f"{label(lo + i * w)} … {label(min(hi, lo + (i + 1) * w - 1))}" for i in range(counts.size)], counts


def _float_bins(x: np.ndarray, bins: int, most: int) -> tuple[list[str], np.ndarray]:
    """Equal bins of finite float values (``most``: the significant digits the type holds), or one bin per
    distinct value where their range holds fewer float64 steps than bins (1 and 1 + 2^-52 read `1 … 1`)."""
    lo, hi = float(x.min()), float(x.max())
    # halved and doubled back (exact) where hi - lo is past float64's range: linspace gave NaN edges, read as
    # values too close to split, and every distinct value drawn as a bin of its own
    edges = np.linspace(lo, hi, bins + 1) if math.isfinite(hi - lo) else np.linspace(lo / 2, hi / 2, bins + 1) * 2
    if lo == hi:
        return [f"{num(lo, 15 if most > 10 else spread_digits(lo, hi))}"], np.array([x.size])  # 10000.5, as the statistics
    if not np.all(edges[:-1] < edges[1:]):
        u, counts = np.unique(x, return_counts=True)
        return [_shortest(float(e)) for e in u], counts
    # each edge to one decimal place finer than a bin's width (at least four digits): one count of significant
    # digits for all lost a place across a power of ten (9999.6 … 10001, then 10001 … 10002 for 10000.66, 10001.75)
    place = math.floor(math.log10(hi / bins - lo / bins)) - 1

    def edge(v: float) -> str:
        return num(v, max(4, min(most, math.floor(math.log10(abs(v))) - place + 1)) if v else 4)

    counts, _ = np.histogram(x, bins=edges)
    return [f"{edge(float(edges[i]))} … {edge(float(edges[i + 1]))}" for i in range(len(edges) - 1)], counts


def values(a: np.ndarray, width: int, threshold: int, edge: int = 3) -> str:
    """``a`` laid out as numpy prints it (nested brackets, lines within ``width``, past ``threshold`` values
    the middle of each long axis left out with '...'), each float as ``num`` writes it in the statistics and
    tables (-0.2088, 1e+06, 0), right-aligned in one width: numpy put every value in scientific form
    (-2.08842e-01) once one needed it, and its fixed form padded on the right ('1000000.    ')."""
    a = np.asarray(a)
    with np.printoptions(threshold=threshold, edgeitems=edge, linewidth=width):
        if a.dtype.kind != "f":
            return np.array2string(a, separator=" ")
        shown = _shown_part(a, threshold, edge)
        digits = _value_digits(shown)
        cell = max((len(_number(v, digits)) for v in shown.flat), default=1)
        return np.array2string(a, separator=" ", formatter={"float_kind": lambda v: _number(v, digits).rjust(cell)})


def _number(v: np.floating, digits: int) -> str:
    """``num`` of ``v`` at ``digits``, or at the fewer that its type's shortest decimal needs: a float16 0.1
    (0.0999755859375) reads 0.1 as numpy prints it, not 0.09998."""
    if not np.isfinite(v):
        return num(float(v))
    shortest = str(v).lstrip("-").split("e")[0].replace(".", "").strip("0")  # '65500.0': 655; '0.1': 1
    return num(float(v), min(digits, max(1, len(shortest))))


def _shown_part(a: np.ndarray, threshold: int, edge: int) -> np.ndarray:
    """The values of ``a`` that numpy shows: all, or past ``threshold`` the first and last ``edge`` of each longer axis."""
    if a.size <= threshold:
        return a
    for axis, n in enumerate(a.shape):
        if n > 2 * edge:
            a = np.take(a, list(range(edge)) + list(range(n - edge, n)), axis=axis)
    return a


def _value_digits(shown: np.ndarray) -> int:
    """The significant digits for ``shown``: ``spread_digits`` of their range (values offset from zero get
    the digits that tell them apart), then more while two different values would read the same (1e6 and
    1e6 + 0.5 both read 1e+06 beside 0.001), up to the digits that read back to every value of the type
    (float16 5, float32 9, float64 17)."""
    top = 1 + math.ceil((np.finfo(shown.dtype).nmant + 1) * math.log10(2))
    f = np.unique(shown[np.isfinite(shown)])
    if not f.size:
        return 4
    digits = spread_digits(float(f[0]), float(f[-1]), most=top)
    while digits < top and len({float(_number(v, digits)) for v in f}) < len(f):  # as read back, not as text
        digits += 1
    return digits


def _shortest(v: float) -> str:
    """The shortest digits that read back as ``v`` (1.0000000000000002), without a trailing '.0'."""
    s = repr(v)
    return s[:-2] if s.endswith(".0") else s


def stats_line(s: TensorStats | None, compact: bool = False, dtype=None) -> Text:
    t = Text()
    if s is None:
        t.append("no statistics (non-numeric tensor)", style="dim")
        return t
    if s.count == 0:  # a value there is (a tensor whose branch did not run has none: `show` says so)
        t.append("empty (no element: a dimension of size 0)", style="dim")
        return t
    # no finite value (all NaN or Inf): '-' for every statistic of the finite values, as the layers table shows
    digits = spread_digits(s.min, s.max, most=type_digits(dtype))  # told apart on offset data, as in the layers table
    value = (lambda v, d=digits: num(v, d) if s.finite and v is not None and math.isfinite(v) else "-")
    # an int64/uint64 tensor's extremes are exact Python ints (``TensorStats.with_extremes``): as layers shows them
    # (in float64 its max 2^63-1 read 2^63, outside the type, and a min 24 below the tensor's)
    ext = (lambda v: str(v) if s.finite and isinstance(v, int) and not isinstance(v, bool) else value(v))
    parts = [("count", str(s.count)), ("min", ext(s.min)), ("max", ext(s.max)), ("mean", value(s.mean)),
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
        d = spread_digits(s.min, s.max, most=type_digits(r.get("dtype"))) if fin else 4  # told apart on offset data, as in layers
        # a tensor that did not run (an If branch not taken) has no values to count NaN or Inf among: '-', as layers
        counted = s is not None and (ran or no_values(r.get("shape")) != "not run")
        # an integer tensor's extremes as the integers they are, as layers writes them (int64's near 2^63 read three
        # equal floats beside a std of 0.83)
        extreme = (lambda v: extreme_text(v, r.get("dtype"), d))  # noqa: E731
        cells = [
            r.get("role", ""), r["name"], shp, r.get("dtype") or "?",
            extreme(s.min) if fin else ("-" if s is None or s.count else no_values(r.get("shape"))),
            extreme(s.max) if fin else "-", num(s.mean, d) if fin else "-", num(s.std) if fin else "-",
            str(s.nan) if counted else "-", str(s.inf) if counted else "-", r.get("link", ""),
        ]
        values = [r.get("role", ""), r["name"], shp, r.get("dtype"), s.min if fin else None, s.max if fin else None,
                  s.mean if fin else None, s.std if fin else None, s.nan if counted else None,
                  s.inf if counted else None, r.get("link", "")]
        style = "bold red" if s is not None and s.has_nonfinite else (r.get("style") or None)
        t.add_row(cells, values, style)
    return t
