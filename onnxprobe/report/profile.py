"""``--profile`` in reports: per-row kernel times merged into the JSON rows, and a summary with the
slowest nodes as Rich renderables (nothing here prints)."""

from __future__ import annotations

from rich.text import Text

from onnxprobe.report.format import num, safe
from onnxprobe.report.table import Column, Table

COLUMNS = [Column("tensor", "tensor", name=True, head=True), Column("op", "op", head=True),
           Column("ms", "ms", "right"), Column("plain_ms", "plain ms", "right", wrap=True)]
DIFF_COLUMNS = [Column("tensor", "tensor", name=True, head=True), Column("op", "op", head=True),
                Column("a_ms", "A ms", "right"), Column("b_ms", "B ms", "right")]


def with_profile(data: dict, prof, rows_key: str = "tensors", name_key: str = "name") -> dict:
    """``data`` (a layers dict) with ``kernel_ms`` & co. on each row and a top-level ``profile``."""
    times = {k: v.to_dict() for k, v in prof.rows.items()}
    for row in data.get(rows_key, []):
        row.update(times.get(row.get(name_key), {"kernel_ms": None, "plain_kernel_ms": None, "fused_into": None,
                                                   "plain_fused_into": None}))
    data["profile"] = prof.summary()
    return data


def profile_renderables(data: dict, width: int = 120, rows_key: str = "tensors", top: int = 10) -> list:
    s = data.get("profile")
    if not s:
        return []
    line = Text(f"profile: plain run {num(s['plain_ms'])} ms, probed run {num(s['probed_ms'])} ms "
                f"(model kernels {num(s['model_kernels_ms'])} ms, probes {num(s['probe_overhead_ms'])} ms, "
                f"layout and other {num(s['layout_and_other_ms'])} ms); kernels {s['kernels_plain']} plain, "
                f"{s['kernels_probed']} probed: {s['fusions_broken']} fusion(s) broken by probing")
    rows = [r for r in data.get(rows_key, []) if r.get("kernel_ms") is not None]
    rows.sort(key=lambda r: -r["kernel_ms"])
    title = Text(f"slowest {min(top, len(rows))} nodes (kernel time of each probed tensor's producer)")
    t = Table(COLUMNS, main=False)
    for r in rows[:top]:
        plain = num(r["plain_kernel_ms"]) if r.get("plain_kernel_ms") is not None else (
            f"fused into {safe(r['plain_fused_into'])}" if r.get("plain_fused_into") else "-")
        t.add_row([safe(r.get("name", "")), safe(r.get("op_type", "")), num(r["kernel_ms"]), plain],
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
    line = Text(f"profile: one run of both models {num(s['run_ms'])} ms (A's kernels {num(s['a_kernels_ms'])} ms, "
                f"B's {num(s['b_kernels_ms'])} ms, metrics and introduced error {num(s['metrics_and_introduced_ms'])} ms, "
                f"layout and other {num(s['layout_and_other_ms'])} ms)")
    rows = [p for p in data.get("pairs", []) if p.get("kernel_ms_a") is not None]
    rows.sort(key=lambda p: -(p["kernel_ms_a"] or 0))
    title = Text(f"slowest {min(top, len(rows))} layers of A")
    t = Table(DIFF_COLUMNS, main=False)
    for p in rows[:top]:
        t.add_row([safe(p["a"]), safe(p.get("op_type") or ""), num(p["kernel_ms_a"]),
                   num(p["kernel_ms_b"]) if p.get("kernel_ms_b") is not None else "-"],
                  [p["a"], p.get("op_type"), p["kernel_ms_a"], p.get("kernel_ms_b")])
    return [line, title, t] if rows else [line]
