"""The ``diff`` report: a JSON-ready dict and a Rich table of pairs, with an SQNR sparkline."""

from __future__ import annotations

import math

from rich.text import Text

from onnxprobe import __version__
from onnxprobe.errors import report_voice
from onnxprobe.report.cells import cells, ljust
from onnxprobe.report.columns import DIFF_COLUMNS, DIFF_JUDGED_COLUMNS, DIFF_PROBLEM, DIFF_PROFILE_COLUMNS, UNJUDGED
from onnxprobe.report.console import phrased
from onnxprobe.report.format import NONFINITE_UNALIKE, finite as finite_number, json_float, json_word, num, num_or_word, op, safe, shape, shorten
from onnxprobe.report.table import Table
from onnxprobe.report.wrap import phrase_wrap, wrap
from onnxprobe.stats.metrics import json_sqnr
from onnxprobe.types import MAP, UNPAIRED

SPARK = "▁▂▃▄▅▆▇█"
# where the table's rows cut short are all listed, in the reader's words (``errors.report_voice``)
SEE_ALL = lambda say: say.either("api.report(result)", "--json")  # noqa: E731
MIN_SPAN_DB = 3.0  # SQNRs closer than this draw as equal in the sparkline: rounding noise, not a trend



def diff_dict(res, order=None) -> dict:
    rows = order if order is not None else res.results
    topo = {id(r): k for k, r in enumerate(res.results)}
    pairs = []
    for r in rows:
        m, i = r.metrics, r.introduced
        d = {"index": r.pair.a.index, "a": r.pair.a.name, "b": r.pair.b.name, "key": r.pair.b.key, "node_a": r.pair.a.node, "node_b": r.pair.b.node,
             "op_type": r.pair.a.effective_op, "op_type_b": r.pair.b.effective_op, "strategy": r.pair.strategy, "reason": r.pair.reason,
             "shape": list(r.shape) if r.shape is not None else None, "is_output": r.pair.a.is_output or r.pair.b.is_output,
             "module": r.pair.b.module or r.pair.a.module, "scope": r.pair.a.scope or r.pair.b.scope or None,
             "passed": r.passed, "problem": r.problem, "unjudged": r.unjudged,
             "runtime_shapes": [list(x) for x in r.runtime_shapes] if r.runtime_shapes is not None else None}
        d.update(m.to_dict() if m else dict.fromkeys(["max_abs", "mean_abs", "max_rel", "rmse", "cosine", "sqnr_db", "exact", "worst_index",
                                                  "nonfinite_mismatch", "count", "nonfinite_same"]))
        d["introduced_sqnr_db"] = json_sqnr(i.sqnr_db, i.count, i.exact) if i else None
        d["introduced_max_abs"] = json_word(float(i.max_abs)) if i else None
        d["introduced_exact"] = i.exact if i else None
        d["introduced_count"] = i.count if i else None  # tells a null SQNR's -inf (or +inf) from not measured
        d["introduced_nonfinite_mismatch"] = i.nonfinite_mismatch if i else None  # NaN/Inf on one side only
        d["metric"] = r.tolerance.metric  # what its pass/fail judged (a per-tensor criterion may differ)
        d["topo"] = topo.get(id(r))  # its row under --sort topo: pairs of one node (a weight's gradients) keep that order
        pairs.append(d)
    verdict, why = res.verdict()
    other_values = (list(getattr(res, "other_values", None) or [])
                    or [u.obs.name for u in res.matching.unmatched_a if u.cause == "other-values"])
    judged = [p["passed"] for p in pairs if p["is_output"] and p["passed"] is not None]

    def unmatched(u, selected: bool) -> dict:
        return {"name": u.obs.name, "op_type": u.obs.effective_op, "reason": u.reason, "cause": u.cause,
                "is_output": u.obs.is_output, "selected": selected}

    return {
        "schema_version": 2, "onnxprobe_version": __version__,
        "a": res.a.describe(), "b": res.b.describe(), "measured": res.measured,
        # what each side is, machine-readable (as layers' model, runtime, device, opt_level, providers)
        "sides": {"a": res.a.facts(), "b": res.b.facts()},  # a served diff's sides keep the first run's (api.diff_direct)
        "criterion": res.criterion,
        # the criteria of named tensors (--atol NAME:VALUE, api per_tensor=), each judging that tensor instead
        "per_tensor": {n: t.to_dict() for n, t in sorted((getattr(res, "per_tensor", None) or {}).items())},
        "verdict": verdict, "verdict_reason": why, "compared": res.compared,
        "in_graph": getattr(res, "in_graph", 0),  # pairs measured in the one run of both models (a dataset: on every sample)
        "pairs": pairs,
        # those of a specific cause first ("no counterpart" last): the footer shows the first few
        "unmatched_a": [unmatched(u, res.selected_a is None or u.obs.name in res.selected_a)
                        for u in res.unmatched_in("a")],
        "unmatched_b": [unmatched(u, u.obs.name in res.selected_b) for u in res.unmatched_in("b")],
        "uncompared": res.uncompared,  # what was left uncompared, by cause (counts and examples)
        "first_failure": res.first_failure.pair.a.name if res.first_failure else None,
        "first_failure_module": (res.first_failure.pair.b.module or res.first_failure.pair.a.module)
                                if res.first_failure else None,
        "outputs_passed": verdict == "pass",  # the verdict's (a weight with other values fails it too)
        # what the verdict is made of: every judged output row (weight gradient) passed (None: none judged), and
        # the weights checked against the torch parameters they stand for hold their values (None: not checked)
        "output_rows_passed": all(judged) if judged else None,
        "weights_passed": False if other_values else True if getattr(res, "weights_checked", False) else None,
        # against a torch module: A's weights that hold other values than the parameter they stand for (each
        # fails the verdict whatever the rows say); diff --grad --vs-torch names them as diff_torch does
        # (COPY[PARAM]: ``ParamMap.said``); two models' diff --grad: its unmatched of cause other-values
        "other_values": other_values,
        "notes": res.notes,
        "fp32_sensitivity": [x.to_dict() for x in res.sensitivity],
        **({"grad": {k: json_word(v) for k, v in res.grad.items()}} if getattr(res, "grad", None) else {}),
    }


def beyond_rows(d: dict) -> list[str]:
    """What failed the verdict besides the rows: "weights FAIL" (a weight with other values than its torch
    parameter), "losses FAIL" (--grad --vs-torch: the forward passes disagree)."""
    g = d.get("grad") or {}
    return ((["weights FAIL"] if d.get("other_values") else [])
            + (["losses FAIL"] if g.get("forward_differs") and g.get("vs_torch") else []))


def verdict_words(d: dict) -> str:
    """The footer's verdict: "outputs pass", "outputs FAIL", "outputs not compared"; a fail that is not the
    rows' says what failed beside them: "outputs pass · weights FAIL" (a weight with other values than its
    torch parameter), "weight gradients pass · losses FAIL" (--grad --vs-torch: the forward passes). An error verdict
    after some outputs (weight gradients) were compared says what they did and how many were not:
    "weight gradients pass, but 3 not compared" (a weight in one model only), "outputs pass, but 1
    pair(s) given in --map not compared"; "not compared" alone read as if nothing had been."""
    verdict_of = "weight gradients" if d.get("grad") else "outputs"
    beyond = beyond_rows(d)
    if d["verdict"] == "fail" and beyond:  # the rows' verdict, then what failed besides them (the FAIL: line says why)
        rows = [p["passed"] for p in d["pairs"] if p["is_output"] and p["passed"] is not None]
        word = "FAIL" if not all(rows) else "pass" if rows else "not compared"
        return " · ".join([f"{verdict_of} {word}"] + beyond)
    outputs = any(p["is_output"] for p in d["pairs"]) or any(u["is_output"] for u in d["unmatched_a"] + d["unmatched_b"])
    if d["verdict"] == "fail" and not outputs and not d.get("grad"):  # models that declare no outputs: pairs failed
        return " · ".join([f"{verdict_of} not compared", "pairs FAIL"] + beyond)
    if d["verdict"] != "error":
        return f"{verdict_of} {({'pass': 'pass', 'fail': 'FAIL'})[d['verdict']]}"
    judged = [p for p in d["pairs"] if p["is_output"] and p["passed"] is not None]
    missing = (sum(1 for u in d["unmatched_a"] + d["unmatched_b"] if u["is_output"] and u["cause"] in UNPAIRED)
               + sum(1 for p in d["pairs"] if p["is_output"] and p["passed"] is None and not p.get("unjudged")))
    mapped = sum(1 for p in d["pairs"] if p.get("strategy") == "map" and p["passed"] is None and not p["is_output"])
    say = report_voice()  # the reader's words for --map: user_map through the API
    told = ([f"{missing} not compared"] if missing else []) + ([f"{mapped} pair(s) given in {say(MAP)} not compared"] if mapped else [])
    if not judged or not told:  # nothing judged, or an error about the whole run (a constant or non-finite loss)
        return f"{verdict_of} not compared"
    word = "FAIL" if any(p["passed"] is False for p in judged) else "pass"
    return f"{verdict_of} {word}, but {' and '.join(told)}"


def why_lines(d: dict, limit: int = 5) -> list[tuple[str, str]]:
    """One line per row whose numbers need a word: not compared (empty, NaN/Inf everywhere, shapes that
    differ at run time), NaN/Inf on one side only, or NaN/Inf alike on both sides left out of a pass;
    (line, style)."""
    out = []
    for p in d["pairs"]:
        mis, same, count = p.get("nonfinite_mismatch") or 0, p.get("nonfinite_same"), p.get("count")
        if p.get("problem"):
            why = p["problem"] if p["passed"] is not None else f"not compared: {p['problem']}"
        elif mis:
            why = f"NaN/Inf mismatch at {mis} position(s) ({NONFINITE_UNALIKE}); the metrics are over the {count} finite pair(s)"
        elif same:
            why = f"{same} value(s) NaN/Inf on both sides alike, left out; the metrics are over the other {count}"
        else:
            continue
        out.append((f"{safe(p['b'])}: {safe(why)}", "yellow" if p["passed"] else "red"))
    if len(out) > limit:
        out = out[:limit] + [(f"and {len(out) - limit} more (see {SEE_ALL(report_voice())})", "red")]
    return out



def sparkline(values: list[float | None], cap: float = 140.0, room: int | None = None) -> str:
    """One block per value; values at or above ``cap`` dB (float32 agrees to ~140 dB; the caller draws exact
    pairs there), or within ``MIN_SPAN_DB`` below it, draw as full blocks, whatever the others (exact, 139.08
    and 140.20 dB with the cap at the best pair drew █▁█: the span below measured from 139.08). The rest are scaled from their lowest over at
    least ``MIN_SPAN_DB``, so that rounding noise (30.37086749 against 30.37086729 dB drew █▁) draws as
    equal. More values than ``room`` blocks: each block stands for a run of consecutive values, and shows
    its worst."""
    values = [min(v, cap) if v is not None and math.isfinite(v) else None for v in values]
    if room is not None and len(values) > max(room, 1):
        step = math.ceil(len(values) / max(room, 1))
        runs = [[v for v in values[k:k + step] if v is not None] for k in range(0, len(values), step)]
        values = [min(r) if r else None for r in runs]
    vals = [v for v in values if v is not None]
    if not vals:
        return ""
    lo = min(vals)
    span = max(max(vals) - lo, MIN_SPAN_DB)
    out = []
    for v in values:
        if v is None or not math.isfinite(v):
            out.append(" ")
        else:  # at the cap: full, also where every value is there (an exact pair alone drew the lowest block)
            k = len(SPARK) - 1 if v >= cap - MIN_SPAN_DB else int(round((v - lo) / span * (len(SPARK) - 1)))
            out.append(SPARK[k])
    return "".join(out)


COLUMNS, PROFILE_COLUMNS, PROBLEM, JUDGED_COLUMNS = DIFF_COLUMNS, DIFF_PROFILE_COLUMNS, DIFF_PROBLEM, DIFF_JUDGED_COLUMNS


def first_failing_row(d: dict) -> int | None:
    """The row of the pair where the error starts (``first_failure``), when it failed."""
    first = d["first_failure"]
    return next((k for k, p in enumerate(d["pairs"]) if p["a"] == first and p["passed"] is False), None)


def pair_label(p: dict) -> str:
    """A pair as its row names it: B's name where A's is the same value under another name (quantized
    views), else 'A ↔ B' where the two names differ (the footer's "error starts at" too)."""
    same_value = p["strategy"] in ("name", "qdq", "qoperator", "dynamic")
    return p["b"] if same_value or p["a"] == p["b"] else f"{p['a']} ↔ {p['b']}"


def diff_table(d: dict, asked: tuple[str, ...] = ()) -> Table:
    """The pairs of a ``diff_dict`` as a table; the first failing pair is marked ``▶``. For gradients
    (``diff --grad``) there is no introduced error, so no such column."""
    cols = [c for c in COLUMNS if not (d.get("grad") and c.key == "introduced_sqnr_db")]
    # the metric a pair is judged by, or one --columns asks for (``asked``)
    judged = [JUDGED_COLUMNS[k] for k in JUDGED_COLUMNS
              if any(p.get("metric") == k for p in d["pairs"]) or k in {a.strip().lower() for a in asked}]
    at = next(k for k, c in enumerate(cols) if c.key == "pass")
    cols[at:at] = judged  # beside the verdict they decide
    if any("kernel_ms_a" in p for p in d["pairs"]):
        cols += PROFILE_COLUMNS
    t = Table(cols, data=(PROBLEM.key, UNJUDGED.key))
    first_row = first_failing_row(d)
    for k, p in enumerate(d["pairs"]):
        name = pair_label(p)
        ok = "FAIL" if p["passed"] is False else ("ok" if p["passed"] else "noise" if p.get("unjudged") else "n/a")
        if p["passed"] is False and p.get("nonfinite_mismatch"):
            ok = "FAIL NaN/Inf"  # the numbers beside it may show no error: they are over the finite pairs only
        idx = f"▶{p['index']}" if k == first_row else str(p["index"])
        # inside an If branch (JSON has the scope), as layers marks body tensors
        cells = {"index": idx, "tensor": f"↳ {name}" if p.get("scope") else name, "op": op(p["op_type"]), "match": p["strategy"], "shape": shape(p["shape"]),
                 "max_abs": num(json_float(p["max_abs"]), 3), "cosine": cosine_cell(json_float(p["cosine"]), p.get("metric") == "cosine"), "sqnr_db": _db(p["sqnr_db"], p["exact"], p.get("count"), p["max_abs"]),
                 "introduced_sqnr_db": "NaN/Inf" if p.get("introduced_nonfinite_mismatch") else _db(
                     p["introduced_sqnr_db"], p["introduced_exact"], p.get("introduced_count"), p.get("introduced_max_abs")),
                 "pass": ok,
                 **{k: num(p[k]) if p.get(k) is not None else "-" for k in ("kernel_ms_a", "kernel_ms_b")},
                 **{k: num_or_word(p[k], 3) if p.get(k) is not None else "-" for k in JUDGED_COLUMNS}}
        values = {"index": p["index"], "tensor": name, "op": p["op_type"], "match": p["strategy"], "shape": p["shape"],
                  "max_abs": json_float(p["max_abs"]), "cosine": json_float(p["cosine"]), "sqnr_db": "exact" if p["exact"] else _infinite_db(p),
                  "introduced_sqnr_db": "NaN/Inf" if p.get("introduced_nonfinite_mismatch") else "exact" if p["introduced_exact"]
                  else _infinite_db(p, "introduced_"), "pass": p["passed"],
                  "kernel_ms_a": p.get("kernel_ms_a"), "kernel_ms_b": p.get("kernel_ms_b"),
                  **{k: p.get(k) for k in JUDGED_COLUMNS}}
        style = "red" if p["passed"] is False else ("green" if p["passed"] else None)
        # the page sorts the verdicts as they read: FAIL, ok, noise, n/a (their raw False/True/None tied the last two)
        rank = 0 if p["passed"] is False else 1 if p["passed"] else 2 if p.get("unjudged") else 3
        t.add_row([cells[c.key] for c in cols], [values[c.key] for c in cols], "bold red" if k == first_row else style,
                  [p.get("problem"), p.get("unjudged")], order={"pass": [rank]})
    return t


def diff_renderables(res, width: int = 120, order=None, asked: tuple[str, ...] = ()) -> list:
    """What the ``diff`` report shows, as Rich renderables (nothing is printed here); ``res`` is a
    DiffResult or a ``diff_dict``; ``asked``: the --columns keys (``diff_table``)."""
    out: list = []
    d = res if isinstance(res, dict) else diff_dict(res, order)
    first_row = first_failing_row(d)
    t = diff_table(d, asked)
    # broken between phrases at the width (paths after a '/', never inside a file name), as every Text line
    out += [phrase_wrap(Text(f"A: {safe(d['a'])}"), width), phrase_wrap(Text(f"B: {safe(d['b'])}  (reference)"), width),
            phrase_wrap(Text(f"measured: {d['measured']} · criterion: {d['criterion']}"), width)]
    if d.get("grad"):
        g = d["grad"]
        out.append(Text(f"loss {g['loss']}: A {num_or_word(g['loss_a'], 6)}, B {num_or_word(g['loss_b'], 6)}",
                        style=None if all(finite_number(g[k]) is not None for k in ("loss_a", "loss_b")) else "bold red"))
    out.append(t)
    out += [Text(line, style=style) for line, style in why_lines(d)]
    # the table's order under --sort topo, whatever --sort (pairs of one node, a weight's gradients beside its
    # activation's, in the table's order); by name among those of one node where a dict has no "topo"
    topo = sorted(d["pairs"], key=lambda p: (p["index"], p["topo"] if p.get("topo") is not None else -1, p["a"], p["b"]))
    measured = [v for p in topo if not p["exact"] and (v := finite_number(p["sqnr_db"])) is not None]
    top = max(measured + [140.0])  # float32 agrees to ~140 dB; float64 and torch pairs measure more
    # exact pairs draw as full blocks; a pair with NaN/Inf on one side only as a blank, as one at -inf dB
    sq = [top if p["exact"] else -math.inf if p.get("nonfinite_mismatch") else _infinite_db(p) for p in topo]
    lead = "SQNR along depth: "
    line = sparkline(sq, cap=top, room=max(10, width - len(lead)))
    per = math.ceil(len(sq) / len(line)) if line else 1
    # pairs at -inf dB (B all zeros where A is not) draw as blanks: counted, so they never pass for exact
    neg = sum(1 for p in topo if not p["exact"] and _infinite_db(p) == -math.inf)
    n_exact = sum(1 for p in topo if p["exact"])
    if neg and not measured:
        out.append(Text(f"{lead}{line}  ({neg} at -inf dB: B all zeros where A is not, as blanks; {n_exact} exact)"))
    elif line:
        ends = [topo[0], topo[-1]]  # the first and last pairs as drawn, a blank one too (-inf, not compared)
        end = (lambda p: "exact" if p["exact"] else "NaN/Inf" if p.get("nonfinite_mismatch") else "n/a" if _infinite_db(p) is None
               else f"{num(_infinite_db(p), 3)} dB")
        odd = sum(1 for p in topo if not p["exact"] and p.get("nonfinite_mismatch"))
        if not measured and odd:  # no error over the finite values, NaN/Inf on one side elsewhere: not exact
            out.append(Text(f"SQNR along depth: no error over the finite values; {odd} pair{'s' if odd != 1 else ''} with "
                            f"{NONFINITE_UNALIKE}, {n_exact} exact"))
        elif not measured and n_exact == len(topo):  # every pair exact: a number would read as a measurement
            out.append(Text(f"SQNR along depth: every pair exact ({n_exact})"))
        elif not measured:  # the others not compared (empty, not run, shapes that differ): no pass for exact
            out.append(Text(f"SQNR along depth: every compared pair exact ({n_exact} of {len(topo)}; "
                            f"{len(topo) - n_exact} not compared)"))
        else:
            low = f"-inf dB ({neg} pair{'s' if neg > 1 else ''}: B all zeros where A is not, as blanks)" if neg else f"{num(min(measured), 3)} dB"
            blanks = f"{odd} with {NONFINITE_UNALIKE}, as blanks; " if odd else ""
            out.append(Text(f"{lead}{line}  ({end(ends[0])} → {end(ends[-1])}, min {low}; {blanks}"
                            + (f"a block per {per} pairs, their worst; " if per > 1 else "") + "exact pairs as full blocks)"))
    n_fail = sum(1 for p in d["pairs"] if p["passed"] is False)
    foot = Text()
    foot.append(f"{len(d['pairs'])} pair{'s' if len(d['pairs']) != 1 else ''} · ")
    foot.append(f"{n_fail} failing", style="bold red" if n_fail else "green")
    # rows that read "noise" were compared (their numbers are shown) but not judged: not "not compared"
    n_noise = sum(1 for p in d["pairs"] if p["passed"] is None and p.get("unjudged"))
    n_none = sum(1 for p in d["pairs"] if p["passed"] is None) - n_noise
    if n_none:
        foot.append(f" · {n_none} not compared")
    if n_noise:
        foot.append(f" · {n_noise} noise (not judged)")
    shown_a, shown_b = ([u for u in d[k] if u.get("selected", True)] for k in ("unmatched_a", "unmatched_b"))
    foot.append(f" · unmatched: {len(shown_a)} in A, {len(shown_b)} in B")  # of the selection (JSON: all, marked)
    if first_row is not None:
        first_op = d["pairs"][first_row]["op_type"]  # none for a weight given as an output
        foot.append(f" · ▶ error starts at {safe(pair_label(d['pairs'][first_row]))}" + (f" ({safe(first_op)})" if first_op else ""), style="bold")
    foot.append(f" · {verdict_words(d)}", style="green" if d["verdict"] == "pass" else "bold red")
    out.append(phrased(foot, width))  # broken between phrases, as layers' and grad's footers
    if d["verdict"] == "fail" and (beyond_rows(d) or not any(p["is_output"] and p["passed"] is False for p in d["pairs"])):
        # a fail that no row shows (a weight with other values than its torch parameter, losses that differ):
        # the footer's "0 failing · outputs FAIL" alone said nothing of why; nor, where an output fails too,
        # did the rows name the weight (QA: GPT-2's c_attn.weight x1.01 read only "outputs FAIL")
        out.append(phrased(Text(f"FAIL: {safe(d['verdict_reason'])}", style="bold red"), width))
    for side, items in (("A", shown_a), ("B", shown_b)):
        if items:
            entries = [f"{safe(u['name'])} ({safe(u['reason'])})" for u in items[:3]]
            more = f" and {len(items) - 3} more (see {SEE_ALL(report_voice())})" if len(items) > 3 else ""
            line = f"unmatched in {side}: {', '.join(entries)}{more}"
            if cells(line) <= width:
                out.append(Text(line, style="dim"))
                continue
            # one entry a line, broken between words (a name only after a '/', where it cannot fit whole): a
            # name split in two and its reason glued to the next name read as one (OpenVINO's If bodies)
            lines = [f"unmatched in {side}:"]
            for e in entries + ([more.strip()] if more else []):
                w = wrap(e, max(width - 4, 10))
                lines += ["  " + w[0]] + ["    " + x for x in w[1:]]
            out.append(Text("\n".join(lines), style="dim"))
    out += sensitivity_lines(d["fp32_sensitivity"], width)
    return out


def sensitivity_lines(rows: list[dict], width: int) -> list:
    """The --fp32-sensitivity lines of a report's rows (``Sensitivity.to_dict``), the largest gain first: its
    SQNRs and gain numbers, or text.json_word's words where not finite (a layer that makes the output exact
    in fp32: "inf")."""
    if not rows:
        return []
    gain = (lambda x: json_float(x["gain_db"]))
    n = len(rows)
    base = json_float(rows[0]["output_sqnr_db"])
    # an output with no SQNR (NaN or Inf where the reference has numbers, no finite pair): no gain to measure, said
    # in words, not as 'nan dB (+nan)'
    said = (f"{num(base, 3)} dB as quantized" if base == base else
            "not measurable as quantized (NaN/Inf where B has numbers, see its row): no gain to measure")
    out = [Text(f"keeping one layer in fp32 (the {n} inner QDQ layer{'s' if n != 1 else ''} with the lowest intro "
                f"SQNR; model outputs have nothing after them to gain): output {rows[0]['output']} SQNR {said}", style="bold")]
    lw = min(48, max(cells(safe(x["layer"])) for x in rows))  # as wide as the names, in cells
    ow = max(len(op(x["op_type"], 10)) for x in rows)
    for x in sorted(rows, key=lambda x: -gain(x) if gain(x) == gain(x) else math.inf):  # a NaN gain last
        out.append(Text(f"  {ljust(shorten(x['layer'], lw), lw)}  {op(x['op_type'], 10):{ow}}  intro "
                        f"{num(json_float(x['introduced_sqnr_db']), 3):>5} dB  →  output "
                        f"{num(json_float(x['output_sqnr_db_fp32_layer']), 3):>5} dB "
                        + (f"({gain(x):+.2f})" if gain(x) == gain(x) else "(no gain measurable)"),
                        style="green" if gain(x) > 0.5 else None))
    return out


def _infinite_db(p: dict, of: str = ""):
    """A pair's SQNR (``of`` "introduced_": its introduced error's) as a float, for CSV and JSON rows and the
    sparkline: JSON's "inf", "-inf" or "nan" (``stats.metrics.json_sqnr``) a float again, as the table says it
    (``_db``); None where not measured. The null of a report written before that, beside a count, was -inf (B all
    zeros where A is not) or +inf (no error over the finite pairs, a NaN/Inf mismatch elsewhere)."""
    v = p[f"{of}sqnr_db"]
    if v is None and p.get(f"{of}count") and not p.get(f"{of}exact"):
        return -math.inf if p[f"{of}max_abs"] else math.inf
    return json_float(v)


def _db(v, exact: bool | None, count: int | None = None, max_abs: float | None = None) -> str:
    if exact:
        return "exact"
    return num(_infinite_db({"sqnr_db": v, "count": count, "max_abs": max_abs}), 3)


def cosine_cell(v: float | None, judged: bool = False) -> str:
    """Six places near 1, four below 0.99; a cosine below 1 takes up to nine places that tell it from 1
    (0.9999998: a pair at 0.99999982 that failed --min-cosine 0.9999999 read '1.000000 ... FAIL'). Closer
    to 1 than that it reads 1.000000, unless the pair is ``judged`` by its cosine, where it says how far
    below 1 it is (1-4.4e-15): no cell then contradicts the criterion."""
    if v is None:
        return "-"
    if math.isnan(v):  # sums past float64's range
        return "nan"
    if v <= 0.99:
        return f"{v:.4f}"
    for places in range(6, 10):
        if v >= 1 or float(f"{v:.{places}f}") < 1:
            return f"{v:.{places}f}"
    return f"1-{1 - v:.2g}" if judged else f"{v:.6f}"
