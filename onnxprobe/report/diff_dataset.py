"""The report of a dataset ``diff`` (``--inputs-dir`` / ``--inputs-from``): the ``diff`` report of the
pooled metrics, plus per pair the samples of the worst errors, the per-sample SQNR spread, its criterion
and the exact sums ``merge-stats`` pools; at the top the samples, what ran them and what was compared."""

from __future__ import annotations

from rich.text import Text

from onnxprobe.report.diff import diff_dict, diff_renderables
from onnxprobe.report.format import NONFINITE_UNALIKE, num, safe
from onnxprobe.stats.pooled import dataset_fields

EMPTY = {"worst_sample": None, "max_rel_sample": None, "sqnr_per_sample": None, "sums": None, "introduced_sums": None}

DIFF_DATASET_SCHEMA = 1  # the format of a dataset diff report, as compare.merge_diff merges it


def diff_dataset_dict(res, order=None) -> dict:
    d = diff_dict(res, order)
    for p, r in zip(d["pairs"], order if order is not None else res.results):
        p["tolerance"] = r.tolerance.to_dict()
        ok = r.pooled is not None and r.metrics is not None
        p.update(dataset_fields(r.pooled.sums, r.pooled.introduced, res.labels) if ok else EMPTY)
    d.update({"dataset_schema": DIFF_DATASET_SCHEMA, "model_id": res.model_id, "selection": res.selection,
              "samples": res.samples, "sample_labels": list(res.labels),
              "executor": res.executor.to_dict() if res.executor is not None else {"engine": "local"},
              "sample_digests": res.executor.sample_digests() if res.executor is not None else []})
    return d


def diff_dataset_renderables(d: dict, width: int = 120, asked: tuple[str, ...] = ()) -> list:
    """The diff table of the pooled metrics, then how the outputs did sample by sample; ``asked``: the
    --columns keys (a judged-metric column asked for is shown, as in a one-input diff)."""
    out = diff_renderables(d, width, asked=asked)
    ex = d.get("executor") or {}
    engine = ex.get("engine") if isinstance(ex, dict) else None
    how = f" on {ex.get('workers')} Ray workers" if engine == "ray" else ""
    n = d["samples"]
    out.append(Text(f"pooled over {n} sample{'s' if n != 1 else ''}{how}: every metric from the sums over all of them"))
    for p in d["pairs"]:
        sp = p.get("sqnr_per_sample")
        if not p.get("is_output") or not sp:
            continue
        if not p.get("count"):  # no finite pair in any sample: its per-sample SQNR (no noise) is no "exact"
            out.append(Text(f"  output {safe(p['b'])}: not compared ({safe(p.get('problem') or 'no finite values')})",
                            style="bold red"))
            continue
        # samples with no SQNR of their own are left out of the ranking, and said
        left = [f"{n} with {what}" for n, what in ((sp.get("not_compared"), "nothing compared"),
                                                   (sp.get("nonfinite"), NONFINITE_UNALIKE)) if n]
        aside = f" ({', '.join(left)}: left out)" if left else ""
        if sp["min"] is None:
            spread = f"no sample with an SQNR{aside}"
        else:
            spread = (f"min {_db(sp['min'])} ({safe(sp['min_sample'] or '')}), p5 {_db(sp['p5'])}, "
                      f"median {_db(sp['median'])}{aside}")
        worst = "" if p.get("exact") or not p.get("max_abs") else f"; worst |a-b| in {safe(p.get('worst_sample') or '-')}"
        if p.get("nonfinite_sample"):  # the per-sample SQNR is over finite pairs: it cannot show these
            worst += f"; {NONFINITE_UNALIKE}: first in {safe(p['nonfinite_sample'])}"
        out.append(Text(f"  output {safe(p['b'])}: SQNR per sample {spread}{worst}",
                        style="bold red" if p.get("passed") is False else None))
    return out


def _db(v: float | str) -> str:
    """A per-sample SQNR of JSON: "inf" (no error) is exact, "-inf" (B all zeros where A is not) is said."""
    return "exact" if v == "inf" else "-inf dB" if v == "-inf" else f"{num(v, 3)} dB"
