"""The HTML report (``--html FILE`` of ``layers``, ``diff``, ``grad``; the debugger's ``save html``): one
self-contained file, built from the report's JSON dict, that opens offline and can be attached to a bug.

- the header facts: models, runtime, device, opt level, inputs, criterion, verdict;
- ``#depth-chart``: the key metric along depth (``report.charts``), drawn by plotly.js;
- histograms of the worst rows' values (and, for ``diff``, of their error);
- ``#rows``: the full table, one ``<tr>`` per row with every name whole, sortable by any column and
  filterable by name or op.

The page loads nothing: plotly.js (MIT, from the plotly wheel: ``plotly.offline.get_plotlyjs``) is
inlined, the data are JSON in ``<script type="application/json">`` blocks with ``<``, ``>`` and ``&``
escaped so no name from a model can close a tag, and every text is HTML-escaped.

Names show as they are (``shown``): not as the terminal writes them (``text.clean``, which doubles each
backslash so that its escapes read back one way): a control character is escaped as there (``\\n``,
``\\x1b``, ``\\u202e``: nothing moves a line or reorders text) in a mark of its own (``span.ctl``), which is
what tells it from a backslash and an n; the filter matches the text as shown.
"""

from __future__ import annotations

import html
import json
import math

from onnxprobe import __version__
from onnxprobe.report import charts
from onnxprobe.report.diff import beyond_rows, first_failing_row, pair_label, sensitivity_lines, verdict_words
from onnxprobe.report.format import finite, num_or_word, shape
from onnxprobe.report.io import json_default
from onnxprobe.report.profile import summary_words
from onnxprobe.report.table import Table
from onnxprobe.text import controls, duration, json_float, json_words, pieces, unclean

WORST = 10  # rows that get a histogram

STYLE = """
body{font:13px/1.4 system-ui,sans-serif;margin:16px 24px;color:#222}
h1{font-size:18px;margin:0 0 8px} h2{font-size:15px;margin:18px 0 6px}
dl#facts{display:grid;grid-template-columns:max-content auto;gap:2px 14px;margin:0}
dt{font-weight:600;color:#555} dd{margin:0;word-break:break-all}
.pass{color:#2e7d32;font-weight:600} .fail{color:#c62828;font-weight:600}
#depth-chart{width:100%;min-height:420px}
#histograms{display:flex;flex-wrap:wrap;gap:6px;align-items:flex-start}
.hist{border:1px solid #ddd;border-radius:4px;display:flex;flex-wrap:wrap;padding:4px}
.hist{box-sizing:border-box} .hist.one{width:300px} .hist.two{width:590px}
.hist .name{width:100%;font:11px ui-monospace,monospace;word-break:break-all;padding:0 4px;
  display:-webkit-box;-webkit-box-orient:vertical;-webkit-line-clamp:3;overflow:hidden}
table{border-collapse:collapse;font:12px ui-monospace,monospace}
th{position:sticky;top:0;background:#f3f3f3;cursor:pointer;text-align:left;padding:3px 6px;border-bottom:1px solid #bbb}
th.num,td.num{text-align:right} td{padding:2px 6px;border-bottom:1px solid #eee;white-space:nowrap}
td.name{white-space:normal;overflow-wrap:anywhere;max-width:40em}
tr.bad td{color:#c62828} tr.first td{background:#ffebee;font-weight:600} tr.hl td{background:#fff59d}
#filter{width:28em;padding:3px;margin:4px 0}
.ctl{background:#ede7f6;color:#6a1b9a;border-radius:2px;padding:0 1px}
"""

SCRIPT = r"""
(() => {
  const read = id => JSON.parse(document.getElementById(id).textContent);
  const fig = read('figure'), hists = read('hists');
  const chart = document.getElementById('depth-chart');
  // no button that sends the figure (names, statistics) to Plotly's servers: the report stays offline
  const offline = {displaylogo: false, showSendToCloud: false, showEditInChartStudio: false, plotlyServerURL: '',
                   showLink: false, modeBarButtonsToRemove: ['sendDataToCloud']};
  Plotly.newPlot(chart, fig.data, fig.layout, {...offline, responsive: true});
  const show = id => { const tr = document.getElementById(id); if (!tr) return;
    document.querySelectorAll('tr.hl').forEach(x => x.classList.remove('hl'));
    tr.classList.add('hl'); tr.scrollIntoView({block: 'center'}); };
  chart.on('plotly_click', e => show(e.points[0].customdata[1]));
  const box = document.getElementById('histograms');
  for (const h of hists) { const card = document.createElement('div');
    card.className = 'hist ' + (h.plots.length > 1 ? 'two' : 'one');
    const title = document.createElement('div'); title.className = 'name'; card.append(title);
    for (const [t, ctl] of h.name) { const s = document.createElement('span'); s.textContent = t;  // pieces()
      if (ctl) s.className = 'ctl'; title.append(s); }
    title.title = h.name.map(([t]) => t).join('');  // three lines at most (a 3,000-character name took 90): all of it here
    box.append(card);
    for (const f of h.plots) { const div = document.createElement('div'); card.append(div);
      Plotly.newPlot(div, f.data, f.layout, {...offline, staticPlot: true}); } }
  const tbody = document.getElementById('rows'), filter = document.getElementById('filter');
  const count = document.getElementById('shown');
  filter.addEventListener('input', () => { const q = filter.value.toLowerCase(); let n = 0;
    for (const tr of tbody.rows) { const hit = tr.dataset.text.includes(q); tr.hidden = !hit; n += hit; }
    count.textContent = n; });
  let key = -1, asc = true;
  // a number column's data-v is a number, 'inf', '-inf' or 'nan' (sort_value): -inf sorts below every number
  // and inf above, either way; NaN, then no value, last whichever way
  const INF = {'inf': Infinity, '-inf': -Infinity};
  // a shape's data-k is [element count, rank, ...dims] (shape_key), an unknown one null: known shapes by their
  // numbers either way, then those with an unknown dim (as NaN: last whichever way), the shorter one first;
  // another cell's data-k, the order of what it shows (Row.order: a verdict's [rank], grad's check [rank, error]), sorts the same way
  const order = (x, y) => { for (let j = 0; j < Math.max(x.length, y.length); j++) {
      if (j >= x.length) return -1; if (j >= y.length) return 1;
      const u = x[j] ?? Infinity, w = y[j] ?? Infinity; if (u !== w) return u < w ? -1 : 1; } return 0; };
  document.querySelectorAll('#table th').forEach((th, i) => th.addEventListener('click', () => {
    asc = key === i ? !asc : true; key = i;
    const value = tr => { const td = tr.cells[i], v = td.dataset.v;
      if (td.dataset.k) { const k = JSON.parse(td.dataset.k); return [k[0] === null ? 1 : 0, k]; }
      if (v === '') return [2, null];
      if (!td.classList.contains('num')) return [0, v];
      if (v === 'nan') return [1, null];
      const x = v in INF ? INF[v] : Number(v); return [0, isNaN(x) ? v : x]; };
    const rows = Array.from(tbody.rows).sort((a, b) => { const [p, x] = value(a), [q, y] = value(b);
      if (p !== q) return p - q; if (p === 2 || x === y) return 0;
      const shapes = Array.isArray(x) && Array.isArray(y);
      if (p) return shapes ? order(x, y) : 0;
      const c = shapes ? order(x, y) : typeof x === 'number' && typeof y === 'number' ? (x < y ? -1 : 1)
        : typeof x === 'number' ? -1 : typeof y === 'number' ? 1 : String(x).localeCompare(String(y));
      return asc ? c : -c; });
    tbody.append(...rows); }));
})();
"""


def _json(data) -> str:
    """JSON safe inside a <script> element: no '<', '>' or '&' survives as such."""
    text = json.dumps(json_words(data), allow_nan=False, default=json_default, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _clean_json(o):
    """Non-finite floats (not JSON) as null."""
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, dict):
        return {k: _clean_json(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean_json(v) for v in o]
    return o


def worst_rows(kind: str, d: dict, n: int = WORST) -> list[str]:
    """The names of the rows that get a histogram: NaN/Inf and failures first, then the largest
    magnitudes (``layers``), the lowest introduced SQNR (``diff``), the largest |grad| / |tensor|
    (``grad``)."""
    def f(v, default):
        x = finite(v)
        return default if x is None else x

    if kind == "layers":
        rows = [r for r in d["tensors"] if r.get("count")]
        key = lambda r: (not (r.get("nan") or r.get("inf")), not str(r.get("dtype") or "").startswith(("float", "bfloat")),  # noqa: E731
                         -max(abs(f(r.get("min"), 0)), abs(f(r.get("max"), 0))))
        return [r.get("key") or r["name"] for r in sorted(rows, key=key)[:n]]  # the key: 'o' may be 4 branches' rows
    if kind == "diff":
        # (a pair with NaN/Inf on one side only may have no finite pair measured: no SQNR, but a histogram first)
        rows = [p for p in d["pairs"] if p.get("sqnr_db") is not None or p.get("max_abs") is not None
                or p.get("nonfinite_mismatch")]
        rows = [p for p in rows if not p.get("exact")]
        def db(v, default):  # an SQNR of -inf (B all zeros where A is not, "-inf" in JSON) is the lowest
            x = json_float(v)
            return default if x is None or math.isnan(x) else x

        def intro(p) -> float:  # a layer that introduces no error (exact) ranks after every one that does, not by
            # the error it carries from upstream (its accumulated SQNR, often the lowest); without an introduced
            # error measured (--separate-runs...), the accumulated one
            return math.inf if p.get("introduced_exact") else db(p.get("introduced_sqnr_db"), db(p.get("sqnr_db"), math.inf))

        key = lambda p: (p["passed"] is not False, not p.get("nonfinite_mismatch"), intro(p))  # noqa: E731
        return [p["a"] for p in sorted(rows, key=key)[:n]]
    rows = d["gradients"]
    key = lambda g: (not (g.get("nan") or g.get("inf") or (g.get("check") and g["check"]["ok"] is False)),  # noqa: E731
                     -f(g.get("ratio"), -math.inf), -f(g.get("norm"), -math.inf))
    return [g["tensor"] for g in sorted(rows, key=key)[:n]]


def _facts(kind: str, d: dict, inputs: list[str] | None) -> list[tuple[str, str, str | None]]:
    """(label, text, css class) of the header."""
    ins = "; ".join(inputs) if inputs else None
    if kind == "diff":
        fails = sum(1 for p in d["pairs"] if p["passed"] is False)
        word = {"pass": "pass", "fail": "FAIL", "error": "not compared"}[d["verdict"]]
        if (d["verdict"] == "fail" and beyond_rows(d)) or d["verdict"] == "error":
            # what failed or was left, as the text's footer: 'outputs pass · weights FAIL', 'outputs pass, but 1 not compared'
            word = verdict_words(d)
        out = [("A", d["a"], None), ("B (reference)", d["b"], None), ("measured", d["measured"], None),
               ("criterion", d["criterion"], None), ("verdict", f"{word}: {d['verdict_reason']}", "pass" if d["verdict"] == "pass" else "fail"),
               ("pairs", f"{len(d['pairs'])} ({d['compared']} compared, {fails} failing"
                         + (f", {len(d['pairs']) - d['compared']} not compared" if d["compared"] < len(d["pairs"]) else "")
                         + f"); unmatched {sum(u.get('selected', True) for u in d['unmatched_a'])} in A, "
                         f"{sum(u.get('selected', True) for u in d['unmatched_b'])} in B", None)]  # of the selection, as the table's footer
        if d.get("first_failure"):  # named as its row names it (B's name for a quantized view), as the footer does
            k = first_failing_row(d)
            out.append(("error starts at", pair_label(d["pairs"][k]) if k is not None else d["first_failure"], "fail"))
        if "samples" in d:  # diff_dataset: every metric pooled over the batches, as a layers dataset page says
            out.append(("dataset", f"{d['samples']} batch{'' if d['samples'] == 1 else 'es'}, the metrics pooled over "
                                   f"all; selection {d.get('selection', '')}", None))
        if d.get("grad"):
            g = d["grad"]
            # the terminal's digits (report.diff): six, a loss's digits are what tell A from B
            out.append(("loss", f"{g['loss']}: A {num_or_word(g['loss_a'], 6)}, B {num_or_word(g['loss_b'], 6)}", None))
    elif kind == "layers":
        bad = sum(1 for t in d["tensors"] if t.get("nan") or t.get("inf"))
        out = [("model", d["model"], None), ("runtime", ", ".join(d.get("providers") or []) or "-", None),
               ("device", d["device"], None), ("opt level", d["opt_level"] or "-", None)]
        if "batches" in d:
            out.append(("dataset", f"{d['batches']} batches; selection {d.get('selection', '')}", None))
        n = len(d["tensors"])
        out.append(("verdict", f"{n} tensor{'' if n == 1 else 's'}, {bad} with NaN/Inf", "fail" if bad else "pass"))
        if d.get("timing"):
            out.append(("time", f"run {duration(d['timing']['run_s'])}, session {duration(d['timing']['session_s'])}", None))
    else:
        bad = sum(1 for g in d["gradients"] if g.get("nan") or g.get("inf"))
        failed = sum(1 for g in d["gradients"] if g.get("check") and g["check"]["ok"] is False)
        ok = sum(1 for g in d["gradients"] if g.get("check") and g["check"]["ok"])
        unchecked = len(d["gradients"]) - ok - failed - sum(1 for g in d["gradients"] if g.get("unjudged") and not g.get("check"))
        # a check that compared nothing is no pass (exit 1), nor one of the loss's own input alone (its formula)
        judged = sum(1 for g in d["gradients"] if g.get("check") and g["check"]["ok"] is not None
                     and g["tensor"] != d["loss"]["output"])
        nothing = bool(d.get("check")) and not judged
        # the check's own verdict (the JSON's, the exit code's) where the rows do not tell it: a check that could not
        # run at all (an infinite loss) leaves no check mode and no checked row, and is no pass
        said = d.get("constant_loss") or nothing
        lost = d.get("verdict") in ("fail", "error") and not (bad or failed or said)
        loss = d["loss"]
        out = [("model", d["model"], None), ("runtime", ", ".join(d.get("providers") or []) or "-", None),
               ("device", d["device"], None), ("opt level", d["opt_level"] or "-", None),
               ("loss", f"{loss['kind']}({loss['output']}) = {num_or_word(loss['value'])}", None),  # as the terminal's footer
               ("verdict", f"{len(d['gradients'])} gradients, {bad} with NaN/Inf"
                + (f"; check ({d['check']}): {ok} ok, {failed} failed" + (f", {unchecked} not checked" if unchecked else "")
                   if d.get("check") else "")
                + ("; the loss is constant: nothing judged meaningfully" if d.get("constant_loss") else
                   "; --check checked nothing" if nothing else f"; {d['verdict_reason']}" if lost else ""),
                "fail" if bad or failed or said or lost else "pass"),
               # forward: the model's nodes the gradients need, plus the loss's own and its seed (dL/dL = 1), which
               # is why it can exceed the model's count
               ("graph", f"{d['graph']['forward_nodes']} forward nodes (the model's the gradients need, with the loss's and "
                         f"its seed) + {d['graph']['backward_nodes']} backward nodes", None)]
    if ins:
        out.insert(min(4, len(out)), ("inputs", ins, None))
    if kind != "grad" and summary_words(d):  # --profile: where the run's time went, as the text report says it
        out.append(("profile", summary_words(d), None))
    return out


def shown(s: object) -> str:
    """``s`` as the page shows it: HTML-escaped, its backslashes single, each control character escaped as on a
    terminal inside ``<span class="ctl">`` (``text.pieces``)."""
    return "".join(f'<span class="ctl">{html.escape(t)}</span>' if ctl else html.escape(t) for t, ctl in pieces(s))


def sort_value(raw, number: bool) -> str:
    """A cell's ``data-v``, what the page sorts by: "" for no value; in a number column a non-finite float as
    "nan", "inf" or "-inf" and an exact pair's SQNR ("exact") as "inf", so that a pair at -inf dB, often
    where the error starts, sorts below every number and not among the blanks at the end."""
    if raw is None:
        return ""
    if isinstance(raw, float) and not math.isfinite(raw):
        return "nan" if math.isnan(raw) else ("inf" if raw > 0 else "-inf")
    if number and raw == "exact":  # report.diff's raw value of an infinite SQNR with no error at all
        return "inf"
    if number and raw == "NaN/Inf":  # a layer that brings in NaN/Inf where the other has a number: the worst
        return "-inf"
    return shape(raw) if isinstance(raw, (list, tuple)) else str(raw)  # a shape as the cell shows it: '?x?'


def shape_key(raw: list | tuple) -> str:
    """A shape cell's ``data-k``, what the page sorts it by: JSON [element count, rank, *dims], null for a dim
    that is not a number (unknown, symbolic) and for the count then: by its numbers, not as a string ('12'
    before '2x3'), one with an unknown dim after every known one."""
    dims = [d if isinstance(d, int) and not isinstance(d, bool) else None for d in raw]
    return json.dumps([None if None in dims else math.prod(dims), len(dims), *dims], separators=(",", ":"))


def _table_html(table: Table) -> tuple[str, dict[int, str]]:
    """The rows as HTML (every name whole, raw values to sort by) and row index -> <tr> id."""
    cols = table.columns
    head = "".join(f'<th class="{"num" if c.justify == "right" else ""}" title="{html.escape(c.key)}">'
                   f"{html.escape(c.header or c.key)}</th>" for c in cols)
    lines, ids = [], {}
    for k, r in enumerate(table.rows):
        ids[k] = f"r{k}"
        # what the filter matches: the names and ops as shown (a control as its escape, a backslash single)
        text = controls(" ".join(str(v) for c, v in zip(cols, r.values) if (c.name or c.key == "op") and v is not None).lower())
        style = r.style or ""
        cls = "first" if "bold red" in style and table.columns and r.cells[0].startswith("▶") else ("bad" if "red" in style else "")
        tds = []
        for c, cell, raw in zip(cols, r.cells, r.values):
            # names whole; another cell as the table has it, its text back from the terminal's escapes
            full = raw if (c.name or c.key in ("op", "dtype")) and isinstance(raw, str) else unclean(cell)
            v = sort_value(raw, c.justify == "right")
            kind = "num" if c.justify == "right" else ("name" if c.name else "")
            # not k, the row's number: <tr id="r{k}"> below took the last cell's key and every row was "r"
            key = (f' data-k="{html.escape(json.dumps(r.order[c.key]))}"' if c.key in (r.order or {}) else
                   f' data-k="{html.escape(shape_key(raw))}"' if isinstance(raw, (list, tuple)) else "")
            # names with their controls escaped and marked (``shown``): a right-to-left override reorders no text
            tds.append(f'<td class="{kind}" data-v="{html.escape(controls(v))}"{key}>{shown(full)}</td>')
        lines.append(f'<tr id="r{k}" class="{cls}" data-text="{html.escape(text)}">{"".join(tds)}</tr>')
    return f'<table id="table"><thead><tr>{head}</tr></thead>\n<tbody id="rows">\n' + "\n".join(lines) + "\n</tbody></table>", ids


def require_plotly() -> None:
    """MissingExtra unless plotly is installed: checked before any work when --html is given."""
    charts.plotly_objects()


def html_report(kind: str, d: dict, table: Table, histograms: dict | None = None, inputs: list[str] | None = None) -> str:
    """The page of a ``layers``, ``diff`` or ``grad`` dict ``d``, with ``table`` (its report table),
    ``histograms`` (tensor -> {"values": bins, "error": bins}, ``api.*_histograms``) and ``inputs``
    (``api.describe_inputs``)."""
    charts.plotly_objects()
    from plotly.offline import get_plotlyjs

    plotly_js = get_plotlyjs()
    if "</script" in plotly_js.lower():  # pragma: no cover - would end our <script> early
        raise RuntimeError("the bundled plotly.js cannot be inlined")
    table_html, row_ids = _table_html(table)
    figure = charts.FIGURES[kind](d, row_ids)
    hists = []
    histograms = histograms or {}
    order = [n for n in worst_rows(kind, d, len(histograms)) if n in histograms]
    # a diff's cards are named as the table's rows name the pairs (histograms are keyed by A's tensor)
    titled = {p["a"]: pair_label(p) for p in d["pairs"]} if kind == "diff" else {}
    for name in order + [n for n in histograms if n not in order]:
        h = histograms[name]
        plots = [charts.histogram_figure("gradient values" if kind == "grad" else "values", h["values"])]
        if h.get("error"):
            plots.append(charts.histogram_figure("error A − B", h["error"], "#d62728"))
        hists.append({"name": pieces(titled.get(name, name)), "plots": plots})
    facts = "".join(f'<dt>{html.escape(k)}</dt><dd class="{c or ""}">{shown(v)}</dd>' for k, v, c in _facts(kind, d, inputs))
    notes = "".join(f"<li>{shown(n)}</li>" for n in d.get("notes") or [])
    # diff --fp32-sensitivity: the lines the text report prints (a gain of "inf" where the output turns exact)
    sensitivity = "".join(f"<li>{shown(t.plain)}</li>" for t in sensitivity_lines(d.get("fp32_sensitivity") or [], 0))
    title = {"diff": "diff", "layers": "layers", "grad": "gradients"}[kind]
    model = d.get("a") if kind == "diff" else d.get("model")
    n = len(table.rows)
    hist_note = ("values of A and the error A − B, " if kind == "diff" else "") + "for the worst rows (NaN/Inf and failures first)"
    if not histograms:  # the heading promised histograms: say why there are none
        hist_note = ("none: a diff over a dataset keeps each pair's pooled metrics, not its values" if kind == "diff" and "batches" in d
                     else "none: every pair is exact, no error to draw" if kind == "diff" and d.get("pairs")
                     and all(p.get("exact") for p in d["pairs"]) else "none: no row has values to draw")
    elif "batches" in d:  # a dataset's: from the mergeable histogram, not from the values themselves
        hist_note += ("; over a dataset they are redrawn from the mergeable log2 histogram (32 buckets per octave), so "
                      "a bar's count and the outer edges are within about 3 % of the values, not exact")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="generator" content="onnxprobe {html.escape(__version__)}">
<title>onnxprobe {title}: {html.escape(controls(str(model)))}</title>
<style>{STYLE}</style>
<script>{plotly_js}</script>
</head><body>
<h1>onnxprobe {title} report</h1>
<dl id="facts">{facts}</dl>
<h2>along depth</h2>
<div id="depth-chart"></div>
<h2>histograms</h2><p>{html.escape(hist_note)}</p>
<div id="histograms"></div>
<h2>all rows (<span id="shown">{n}</span> of {n})</h2>
<input id="filter" placeholder="filter by name or op" aria-label="filter by name or op">
{table_html}
{f'<h2>keeping one layer in fp32</h2><ul id="sensitivity">{sensitivity}</ul>' if sensitivity else ""}
{f"<h2>notes</h2><ul>{notes}</ul>" if notes else ""}
<script type="application/json" id="figure">{_json(_clean_json(figure))}</script>
<script type="application/json" id="hists">{_json(_clean_json(hists))}</script>
<script>{SCRIPT}</script>
</body></html>
"""
