"""``--profile`` in reports: per-row kernel times merged into the JSON rows, and a summary with the
slowest nodes as Rich renderables (nothing here prints)."""

from __future__ import annotations

from rich.text import Text

from onnxprobe.report.format import num
from onnxprobe.report.table import Column, Table
from onnxprobe.text import duration

COLUMNS = [Column("tensor", "tensor", name=True, head=True), Column("op", "op", head=True),
           Column("ms", "ms", "right"), Column("plain_ms", "plain ms", "right", wrap=True)]
DIFF_COLUMNS = [Column("tensor", "tensor", name=True, head=True), Column("op", "op", head=True),
                Column("a_ms", "A ms", "right"), Column("b_ms", "B ms", "right")]


def _ms(v) -> str:
    """Milliseconds in the unit that fits, as every duration reads ('840 µs', '12.3 ms')."""
    return duration(v / 1e3) if v is not None else "-"


def _of_runs(s: dict) -> str:
    """How many timed runs the times are the fastest of (runtime.profile.RUNS)."""
    n = s.get("runs") or 1
    return f" (each time the fastest of {n} runs)" if n > 1 else " (one run)"


def with_profile(data: dict, prof, rows_key: str = "tensors", name_key: str = "name") -> dict:
    """``data`` (a layers dict) with ``kernel_ms`` & co. on each row and a top-level ``profile``."""
    times = {k: v.to_dict() for k, v in prof.rows.items()}
    for row in data.get(rows_key, []):
        row.update(times.get(row.get(name_key), {"kernel_ms": None, "plain_kernel_ms": None, "fused_into": None,
                                                   "plain_fused_into": None, "removed": None, "plain_removed": None}))
    data["profile"] = prof.summary()
    return data


def _between(s: dict, plain: str | None = None) -> str:
    """', between kernels T' (', T plain' too where the plain run's is known): the run's time in no kernel, which
    every node adds to; nothing for a summary written before it was measured (a saved JSON)."""
    if s.get("between_kernels_ms") is None:
        return ""
    of_plain = f" against {_ms(s[plain])} plain" if plain and s.get(plain) is not None else ""
    return f", between kernels {_ms(s['between_kernels_ms'])}{of_plain}"


def summary_words(data: dict) -> str | None:
    """The summary of a layers or diff dict's ``profile`` after the word "profile", as the text report and the
    HTML page say it: where the run's time went, 'between kernels' among it; None where there is none."""
    s = data.get("profile")
    if not s:
        return None
    if "run_ms" in s:  # a diff's: its one run of both models
        return (f"{_of_runs(s).strip()}: one run of both models {_ms(s['run_ms'])} (A's kernels {_ms(s['a_kernels_ms'])}, "
                f"B's {_ms(s['b_kernels_ms'])}, metrics and introduced error {_ms(s['metrics_and_introduced_ms'])}, "
                f"layout and other {_ms(s['layout_and_other_ms'])}{_between(s)})")
    host = s.get("host_statistics_tensors") or 0  # small tensors' statistics, computed on the host after the run
    after = (f" and the statistics of {host} tensor{'s' if host != 1 else ''} on the host {_ms(s['host_statistics_ms'])}"
             if host else "")
    return (f"{_of_runs(s).strip()}: plain run {_ms(s['plain_ms'])}, probed run {_ms(s['probed_ms'])} "
            f"(model kernels {_ms(s['model_kernels_ms'])}, probes {_ms(s.get('probe_kernels_ms', s['probe_overhead_ms']))}, "
            f"layout and other {_ms(s['layout_and_other_ms'])}{_between(s, 'plain_between_kernels_ms')}){after}; "
            f"kernels {s['kernels_plain']} plain, "
            f"{s['kernels_probed']} probed: {s['fusions_broken']} fusion(s) broken by probing")


def profile_renderables(data: dict, width: int = 120, rows_key: str = "tensors", top: int = 10) -> list:
    s = data.get("profile")
    if not s:
        return []
    line = Text(f"profile {summary_words(data)}")
    rows = [r for r in data.get(rows_key, []) if r.get("kernel_ms") is not None]
    rows.sort(key=lambda r: -r["kernel_ms"])
    title = Text(f"slowest {min(top, len(rows))} nodes (kernel time of each probed tensor's producer)")
    t = Table(COLUMNS, main=False)
    for r in rows[:top]:
        plain = num(r["plain_kernel_ms"]) if r.get("plain_kernel_ms") is not None else (
            f"fused into {r['plain_fused_into']}" if r.get("plain_fused_into") else f"removed ({r['plain_removed']})" if r.get("plain_removed") else "-")
        t.add_row([r.get("name", ""), r.get("op_type", ""), num(r["kernel_ms"]), plain],  # add_row escapes names
                  [r.get("name"), r.get("op_type"), r["kernel_ms"], r.get("plain_kernel_ms")])
    return [line, title, t] if rows else [line]


def with_diff_profile(data: dict, res) -> dict:
    """A diff dict with ``kernel_ms_a`` / ``kernel_ms_b`` on each pair and the run's ``profile``."""
    r4 = (lambda v: round(v, 4) if v is not None else None)
    by_index = {(r.pair.a.name, r.pair.b.name): r.kernel_ms for r in res.results}
    for p in data.get("pairs", []):
        ka, kb = by_index.get((p["a"], p["b"])) or (None, None)
        p["kernel_ms_a"], p["kernel_ms_b"] = r4(ka), r4(kb)
    data["profile"] = res.profile
    return data


def diff_profile_renderables(data: dict, width: int = 120, top: int = 10) -> list:
    s = data.get("profile")
    if not s:
        return []
    line = Text(f"profile {summary_words(data)}")
    rows = [p for p in data.get("pairs", []) if p.get("kernel_ms_a") is not None]
    rows.sort(key=lambda p: -(p["kernel_ms_a"] or 0))
    title = Text(f"slowest {min(top, len(rows))} layers of A")
    t = Table(DIFF_COLUMNS, main=False)
    for p in rows[:top]:
        t.add_row([p["a"], p.get("op_type") or "", num(p["kernel_ms_a"]),
                   num(p["kernel_ms_b"]) if p.get("kernel_ms_b") is not None else "-"],
                  [p["a"], p.get("op_type"), p["kernel_ms_a"], p.get("kernel_ms_b")])
    return [line, title, t] if rows else [line]
