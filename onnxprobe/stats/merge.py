"""Merging dataset reports (the JSON of ``layers --inputs-dir``) shard by shard, exactly."""

from __future__ import annotations

import json
from pathlib import Path

from onnxprobe.errors import UsageError
from onnxprobe.stats.histogram import Histogram
from onnxprobe.stats.moments import Moments


def read_report(path: str | Path) -> dict:
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{p}: no such file")
    try:
        d = json.loads(p.read_text())
    except (OSError, ValueError):
        raise UsageError(f"{p}: not a JSON report") from None
    if not isinstance(d, dict) or "tensors" not in d or "batches" not in d:
        raise UsageError(f"{p}: not a dataset report (write one with `onnxprobe layers MODEL --inputs-dir DIR --json FILE`)")
    if any(t.get("moments") is None for t in d["tensors"] if t.get("count")):
        raise UsageError(f"{p}: a tensor has no moments to merge")
    d["_path"] = str(p)
    return d


def merge_reports(reports: list[dict]) -> dict:
    if not reports:
        raise UsageError("merge-stats: give at least one report")
    first = reports[0]
    names = [t["name"] for t in first["tensors"]]
    for r in reports[1:]:
        if [t["name"] for t in r["tensors"]] != names:
            raise UsageError(f"{r['_path']}: probes other tensors than {first['_path']} (same model and selection needed)")
    merged_tensors = []
    for i, base in enumerate(first["tensors"]):
        m, h = Moments(), Histogram()
        for r in reports:
            t = r["tensors"][i]
            if t.get("moments"):
                m = m.merge(Moments.from_dict(t["moments"]))
            if t.get("histogram"):
                h = h.merge(Histogram.from_dict(t["histogram"]))
        st = m.stats()
        out = {k: v for k, v in base.items() if k not in ("moments", "histogram")}
        out.update(st.to_dict())
        out["p0.01"] = h.percentile(0.01, st.min, st.max) if h.total else None
        out["p99.99"] = h.percentile(99.99, st.min, st.max) if h.total else None
        out["moments"] = m.to_dict()
        out["histogram"] = h.to_dict()
        merged_tensors.append(out)
    result = {k: v for k, v in first.items() if k not in ("tensors", "_path", "notes")}
    result["batches"] = sum(int(r["batches"]) for r in reports)
    # sources sorted so that the merged bytes do not depend on the order of the arguments
    result["merged_from"] = sorted(Path(r["_path"]).name for r in reports)
    result["notes"] = sorted({n for r in reports for n in r.get("notes", [])})
    result["tensors"] = merged_tensors
    return result
