"""The charts of the HTML report, as plotly figures (JSON for plotly.js): the key metric along depth and
histograms of the worst rows. Built with plotly's Python API (its figure classes validate every
attribute); drawn in the page by the plotly.js that the plotly wheel ships (``report.html``).

- ``diff``: accumulated and introduced SQNR per pair, failing pairs marked, a line where the error starts;
- ``layers``: the largest magnitude max(|min|, |max|) and the standard deviation per tensor (log axis),
  NaN/Inf marked, tensors all zeros at the bottom;
- ``grad``: the gradient norm and |grad| / |tensor| per gradient (log axis), NaN/Inf and failed checks
  marked, zero gradients at the bottom.

Each point carries the row's name and the id of its table row, so a click scrolls the table to it.
"""

from __future__ import annotations

import html
import math

from onnxprobe.report.diff import pair_label
from onnxprobe.report.format import NONFINITE_UNALIKE, exact_db, finite
from onnxprobe.text import pieces


def label(name: str) -> str:
    """A name for plotly's text (hover labels, annotations, titles), which reads a subset of HTML (<a>, <b>,
    <br>...): '<', '>' and '&' as entities, so a model's name never becomes a link or markup in the report; as
    the table shows it (``report.html.shown``): its backslashes single, each control escaped as on a terminal
    (``text.pieces``) and in italics, which tells a newline from a backslash and an n."""
    return "".join(f"<i>{html.escape(t, quote=False)}</i>" if ctl else html.escape(t, quote=False) for t, ctl in pieces(name))


HOVER = "%{customdata[0]}<br>#%{x}: %{y:.4g}<extra>%{fullData.name}</extra>"


def plotly_objects():
    """plotly.graph_objects, or MissingExtra: the HTML report needs the html extra."""
    try:
        from plotly import graph_objects
    except ImportError:
        from onnxprobe.errors import MissingExtra

        raise MissingExtra("the HTML report (--html)", "html", "plotly") from None
    return graph_objects


def _trace(go, name: str, points: list, colour: str | None = None, mode: str = "lines+markers", **marker):
    """points: (x, y, name, row id); None y values are gaps."""
    return go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], name=name, mode=mode,
                      customdata=[[label(p[2]), p[3]] for p in points], hovertemplate=HOVER,
                      line={"color": colour} if colour and "lines" in mode else None,
                      marker={"color": colour, **marker} if colour or marker else None)


def _layout(go, fig, ytitle: str, log: bool = False) -> None:
    fig.update_layout(margin={"t": 30, "l": 60, "r": 20, "b": 50}, hovermode="closest", height=420,
                      xaxis={"title": {"text": "node # (depth, topological order)"}},
                      yaxis={"title": {"text": ytitle}, "type": "log" if log else "linear"},
                      legend={"orientation": "h", "y": 1.08})


def diff_figure(d: dict, row_ids: dict[int, str]) -> dict:
    go = plotly_objects()
    rows = sorted(enumerate(d["pairs"]), key=lambda kp: kp[1]["index"])
    top = exact_db(d["pairs"])  # above every measured pair: float64 ones measure more than 140 dB

    def db(v, exact):
        return top if exact else finite(v)

    # each point named as the table's row names its pair (B's name for a quantized view, 'A ↔ B' where they differ)
    acc = [(p["index"], db(p["sqnr_db"], p["exact"]), pair_label(p), row_ids[k]) for k, p in rows]
    intro = [(p["index"], db(p["introduced_sqnr_db"], p["introduced_exact"]), pair_label(p), row_ids[k]) for k, p in rows]
    fig = go.Figure()
    fig.add_trace(_trace(go, "SQNR dB (accumulated)", acc, "#1f77b4"))
    if any(pt[1] is not None for pt in intro):
        fig.add_trace(_trace(go, "introduced SQNR dB (this layer alone)", intro, "#ff7f0e"))
    failing = _failing(rows, acc, intro)
    if failing:
        fig.add_trace(marked_trace(go, "failing", failing))
    first = next(((p, row_ids[k]) for k, p in rows if p["a"] == d.get("first_failure") and p["passed"] is False), None)
    if first is not None:
        p, _ = first
        fig.add_vline(x=p["index"], line={"color": "#d62728", "dash": "dot"},
                      annotation={"text": label(f"error starts: {pair_label(p)}"[:80]), "font": {"color": "#d62728"}})
    _layout(go, fig, f"SQNR dB (exact at {top:g}; -inf, NaN/Inf ✖ at the bottom)")
    return fig.to_plotly_json()


def _failing(rows, acc, intro) -> list:
    """Every failing pair, as (x, y, name, row id, what): one whose SQNR is no number (-inf dB: B all zeros
    where A is not; NaN/Inf on one side only, over no finite error) at the bottom of the axis, 10 dB below
    the lowest point drawn. Dropping them left a page of failures that read as a clean pass."""
    drawn = [pt[1] for pt in acc + intro if pt[1] is not None]
    bottom = (min(drawn) if drawn else 0.0) - 10.0
    out = []
    for pt, (_, p) in zip(acc, rows):
        if p["passed"] is not False:
            continue
        what = [f"{pt[1]:.4g} dB" if pt[1] is not None else "no finite pair" if not p.get("count")
                else "-inf dB: B all zeros where A is not" if p.get("max_abs") else "no error over the finite values"]
        if p.get("nonfinite_mismatch"):
            what.append(f"{NONFINITE_UNALIKE} ({p['nonfinite_mismatch']} elements)")
        out.append((pt[0], pt[1] if pt[1] is not None else bottom, pt[2], pt[3], "; ".join(what)))
    return out


def marked_trace(go, name: str, points: list, size: int = 10):
    """Red ✖ marks, points (x, y, name, row id, what): the hover says ``what`` in words, not y, which for a
    point with no number to draw (an SQNR of -inf, a tensor with no finite value) is only where it is drawn."""
    return go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], name=name, mode="markers",
                      customdata=[[label(p[2]), p[3], label(p[4])] for p in points],
                      hovertemplate="%{customdata[0]}<br>#%{x}: %{customdata[2]}<extra>%{fullData.name}</extra>",
                      marker={"color": "#d62728", "size": size, "symbol": "x"})


def zero_trace(go, name: str, points: list):
    """Grey open circles for values a log axis cannot draw, 0 (a tensor all zeros, a zero gradient): points
    (x, y, name, row id, what), drawn at the bottom, the hover saying ``what``. Left as gaps, a dead layer
    was missing from the chart, which then read as a chart of fewer layers."""
    return go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], name=name, mode="markers",
                      customdata=[[label(p[2]), p[3], label(p[4])] for p in points],
                      hovertemplate="%{customdata[0]}<br>#%{x}: %{customdata[2]}<extra>%{fullData.name}</extra>",
                      marker={"color": "#7f7f7f", "size": 9, "symbol": "circle-open"})


def _bottom(*series: list) -> float:
    """Where a 0 goes on a log axis: a decade below the lowest positive value drawn (1e-3 where there is none)."""
    drawn = [pt[1] for s in series for pt in s if pt[1] is not None]
    return min(drawn) / 10 if drawn else 1e-3


def _counts(r: dict) -> list[str]:
    return [f"{r[k]} {w}" for k, w in (("nan", "NaN"), ("inf", "Inf")) if r.get(k)]


def layers_figure(d: dict, row_ids: dict[int, str]) -> dict:
    go = plotly_objects()
    rows = sorted(enumerate(d["tensors"]), key=lambda kr: kr[1]["index"])

    def magnitude(r):
        lo, hi = finite(r.get("min")), finite(r.get("max"))
        return max(abs(lo), abs(hi)) if lo is not None and hi is not None else None

    def positive(v):  # a log axis: zeros are gaps
        return v if v is not None and v > 0 else None

    mag = [(r["index"], positive(magnitude(r)), r["name"], row_ids[k]) for k, r in rows]
    std = [(r["index"], positive(finite(r.get("std"))), r["name"], row_ids[k]) for k, r in rows]
    top = max([m for _, m, _, _ in mag if m] or [1.0])
    # a tensor with no finite value is drawn at the top, and its hover says it has none (it claimed the top's value)
    bad = [(r["index"], m or top, r["name"], row_ids[k],
            "; ".join([("no finite value" if m is None else f"max |x| {m:.4g}") + ("" if m else " (drawn at the top)")] + _counts(r)))
           for k, r in rows if r.get("nan") or r.get("inf") for m in [magnitude(r)]]
    bottom = _bottom(mag, std)
    zeros = [(r["index"], bottom, r["name"], row_ids[k], "all zeros (drawn at the bottom: a log axis has no 0)")
             for k, r in rows if magnitude(r) == 0]
    fig = go.Figure()
    fig.add_trace(_trace(go, "max |x|", mag, "#1f77b4"))
    fig.add_trace(_trace(go, "std", std, "#2ca02c"))
    if zeros:
        fig.add_trace(zero_trace(go, "all zeros", zeros))
    if bad:
        fig.add_trace(marked_trace(go, "NaN / Inf", bad, size=12))
    _layout(go, fig, "max |x| and std (log)", log=True)
    return fig.to_plotly_json()


def grad_figure(d: dict, row_ids: dict[int, str]) -> dict:
    go = plotly_objects()
    rows = list(enumerate(d["gradients"]))
    norm = [(g["index"], finite(g.get("norm")), g["tensor"], row_ids[k]) for k, g in rows]
    ratio = [(g["index"], finite(g.get("ratio")), g["tensor"], row_ids[k]) for k, g in rows]
    top = max([n for _, n, _, _ in norm if n] or [1.0])
    bad = [(g["index"], finite(g.get("norm")) or top, g["tensor"], row_ids[k], _grad_mark(g)) for k, g in rows
           if g.get("nan") or g.get("inf") or (g.get("check") and g["check"]["ok"] is False)]
    norm, ratio = ([(x, y if y is None or y > 0 else None, *rest) for x, y, *rest in pts] for pts in (norm, ratio))
    bottom = _bottom(norm, ratio)
    zeros = [(g["index"], bottom, g["tensor"], row_ids[k], "norm 0 (drawn at the bottom: a log axis has no 0)")
             for k, g in rows if finite(g.get("norm")) == 0]
    fig = go.Figure()
    fig.add_trace(_trace(go, "|grad| (norm)", norm, "#1f77b4", mode="markers", size=7))
    fig.add_trace(_trace(go, "|grad| / |tensor|", ratio, "#9467bd", mode="markers", size=7, symbol="diamond"))
    if zeros:
        fig.add_trace(zero_trace(go, "zero", zeros))
    if bad:
        fig.add_trace(marked_trace(go, "NaN / Inf or check failed", bad, size=12))
    _layout(go, fig, "gradient norm and |grad| / |tensor| (log)", log=True)
    return fig.to_plotly_json()


def _grad_mark(g: dict) -> str:
    """The hover of a grad mark: a norm that is no number (NaN, inf) is drawn at the top, and said."""
    norm = finite(g.get("norm"))
    what = [f"norm {norm:.4g}" if norm is not None else f"norm {g.get('norm') or 'none'} (drawn at the top)"] + _counts(g)
    if g.get("check") and g["check"]["ok"] is False:
        what.append("check failed")
    return "; ".join(what)


FIGURES = {"diff": diff_figure, "layers": layers_figure, "grad": grad_figure}


def _axis_shift(edges: list[float]) -> int:
    """0 where plotly.js draws an axis over ``edges`` as they are; else the power of two that brings the largest
    magnitude to [0.5, 1)."""
    if not edges:
        return 0
    top = max(abs(edges[0]), abs(edges[-1]))
    if top <= 2.0 ** 900 and edges[-1] / 2 - edges[0] / 2 >= 2.0 ** -900:
        return 0
    return -math.frexp(top)[1]


def histogram_figure(title: str, bins: dict, colour: str = "#1f77b4") -> dict:
    """A bar chart of ``stats.histogram.binned`` counts."""
    go = plotly_objects()
    edges, counts = bins.get("edges") or [], bins.get("counts") or []
    # plotly.js throws on an axis of values past about 1e300 or a span below about 1e-300 (float64 values near
    # its largest or subnormal), and (a + b) / 2 overflowed there: the page's script stopped before the table
    # could sort or filter. Such an axis is drawn scaled by a power of two (exact), ticks and hover saying the
    # values themselves
    shift = _axis_shift(edges)
    e = [math.ldexp(v, shift) for v in edges]
    centres = [(a + b) / 2 for a, b in zip(e, e[1:])]
    widths = [b - a for a, b in zip(e, e[1:])]
    extra = [f"{bins[k]} {'NaN' if k == 'nan' else 'Inf'}" for k in ("nan", "inf") if bins.get(k)]
    # each bar's centre with the digits that tell it from its neighbours: 4 significant ones read every bar of
    # 1e6 + noise (bins 1e-3 wide) as '1e+06'
    values = [math.ldexp(c, -shift) for c in centres]
    step = min((abs(b - a) for a, b in zip(values, values[1:]) if b != a), default=0.0)
    top = max((abs(v) for v in values), default=0.0)
    digits = min(17, max(4, math.ceil(math.log10(top / step)) + 2)) if step > 0 and top > 0 and math.isfinite(top / step) else 4
    fig = go.Figure(go.Bar(x=centres, y=counts, width=widths, marker={"color": colour}, customdata=[f"{v:.{digits}g}" for v in values],
                           hovertemplate="%{customdata}: %{y}<extra></extra>"))
    if shift:
        ticks = [e[0] * (1 - k / 4) + e[-1] * k / 4 for k in range(5)]  # the last one e[-1] exactly
        fig.update_xaxes(tickvals=ticks, ticktext=[f"{math.ldexp(t, -shift):.3g}" for t in ticks])
    fig.update_layout(title={"text": label(title) + (f" ({', '.join(extra)} not drawn)" if extra else ""), "font": {"size": 11}},
                      width=288, height=190, margin={"l": 40, "r": 10, "t": 30, "b": 25}, bargap=0, showlegend=False)
    return fig.to_plotly_json()
