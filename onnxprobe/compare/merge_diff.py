"""Merging the reports of dataset ``diff`` runs (``diff A B --inputs-dir DIR --json FILE``) shard by shard,
exactly and in any order.

Each pair of such a report carries its exact sums (``stats.pooled.PairSums``) and its criterion, so the
merged report is the report of one run over all the shards' samples: sums pooled (samples laid end to end
in the order of the shards' file names, whatever the order given, so the merged bytes do not depend on
it), metrics and pass/fail recomputed, the verdict earned again on the pooled metrics. Reports of
different models, selections, criteria, runtimes or onnxprobe versions are refused, and malformed ones
are named with the field.
"""

from __future__ import annotations

import json
from pathlib import Path

from onnxprobe.compare.uncompared import merged_uncompared, nothing_compared, outputs_not_compared
from onnxprobe.errors import UsageError, settings_error
from onnxprobe.types import UNPAIRED
from onnxprobe.report.diff_dataset import DIFF_DATASET_SCHEMA
from onnxprobe.stats.merge import check_identity, common_fields, refuse_shards_given_twice, sample_overlap
from onnxprobe.compare.unmeasured import mapped_not_compared, nothing_measured
from onnxprobe.stats.metrics import Tolerance, json_sqnr
from onnxprobe.stats.pooled import PairSums, dataset_fields, pool
from onnxprobe.text import json_word

IDENTITY = ("schema_version", "dataset_schema", "onnxprobe_version", "model_id", "selection", "sides", "criterion",
            "measured")


def hint(say) -> str:
    """Where a dataset diff report comes from, in the words of whoever merges (``errors.Voice``)."""
    return say.either("api.diff_dataset(a, b, inputs=DIR) makes one",
                      "write one with `onnxprobe diff A B --inputs-dir DIR --json FILE`")


# a pair's facts of the matching and its criterion, the same in every shard; every other field is measured
# and computed again from the pooled sums (one copied from the first shard was that shard's alone: its
# introduced error's count and NaN/Inf verdict, and counts that depended on the order of the files)
FACTS = ("index", "a", "b", "key", "node_a", "node_b", "op_type", "op_type_b", "strategy", "reason", "is_output", "module",
         "scope", "tolerance", "metric", "topo")
MEASURED = ("max_abs", "mean_abs", "max_rel", "rmse", "cosine", "sqnr_db", "exact", "worst_index", "nonfinite_mismatch",
            "introduced_sqnr_db", "introduced_max_abs", "introduced_exact")


def is_diff_report(d) -> bool:
    return isinstance(d, dict) and "pairs" in d


def check_diff_report(d, label: str) -> None:
    """A UsageError naming the first thing that makes ``d`` not a mergeable dataset diff report."""
    if not isinstance(d, dict) or not isinstance(d.get("pairs"), list) or "samples" not in d:
        raise settings_error(UsageError, lambda say: f"{label}: not a dataset diff report ({hint(say)})")
    if d.get("dataset_schema") != DIFF_DATASET_SCHEMA:
        raise settings_error(UsageError, lambda say: f"{label}: dataset diff schema {d.get('dataset_schema')!r}, this "
                             f"onnxprobe merges schema {DIFF_DATASET_SCHEMA} ({hint(say)} with this version)")
    n = d["samples"]
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise UsageError(f"{label}: 'samples' is not a count")
    labels = d.get("sample_labels")
    if not isinstance(labels, list) or len(labels) != n or not all(isinstance(x, str) for x in labels):
        raise UsageError(f"{label}: 'sample_labels' is not a list of {n} names")
    digests = d.get("sample_digests")
    if isinstance(digests, list) and digests and len(digests) != n:  # one digest a sample ([]: not said)
        raise UsageError(f"{label}: {len(digests)} sample digests for {n} samples: a damaged report")
    for k in ("onnxprobe_version", "model_id", "selection", "criterion", "measured"):
        if not isinstance(d.get(k), str):
            raise settings_error(UsageError, lambda say: f"{label}: '{k}' missing or not a string ({hint(say)})")
    if d.get("verdict") not in ("pass", "fail", "error") or not isinstance(d.get("verdict_reason"), str):
        raise UsageError(f"{label}: 'verdict' is not pass, fail or error")
    for i, p in enumerate(d["pairs"]):
        where = f"{label}: pairs[{i}]"
        if not isinstance(p, dict) or not isinstance(p.get("a"), str) or not isinstance(p.get("b"), str):
            raise UsageError(f"{where}: not a pair with the names of its two tensors")
        if not isinstance(p.get("index"), int) or not isinstance(p.get("is_output"), bool):
            raise UsageError(f"{where} ({p['a']!r}): 'index' or 'is_output' missing")
        if p.get("problem") is not None and not isinstance(p["problem"], str):
            raise UsageError(f"{where} ({p['a']!r}): 'problem' is not a string")
        if p.get("sums") is None and p.get("passed") is not None:  # judged on values it does not carry
            raise UsageError(f"{where} ({p['a']!r}): judged ('passed' {json.dumps(p['passed'])}) but its 'sums' are missing: "
                             f"a damaged report")
        rs = p.get("runtime_shapes")  # A's and B's shapes where they differed at run time, and the problem said
        if rs is not None and not (isinstance(rs, list) and len(rs) == 2 and all(_dims(x) for x in rs)
                                   and isinstance(p.get("problem"), str)):
            raise UsageError(f"{where} ({p['a']!r}): 'runtime_shapes' is not A's and B's shapes beside the 'problem' "
                             f"they caused: a damaged report")
        what = "tolerance"
        try:
            Tolerance.from_dict(p.get("tolerance"))
            for what in ("sums", "introduced_sums"):
                if p.get(what) is not None:
                    s = PairSums.from_dict(p[what])
                    if max(s.per_sample, default=0) >= n or s.worst[0] >= n or s.max_rel_sample >= n:
                        raise ValueError(f"a sample index is beyond the report's {n} samples")
        except ValueError as e:
            raise UsageError(f"{where} ({p['a']!r}): malformed '{what}' ({e})") from None


def _dims(x) -> bool:
    return isinstance(x, list) and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in x)


def _key(p: dict) -> tuple[str, str]:
    return p["a"], p["b"]


def _how_run(sides) -> dict | None:
    """What of each side (``report.diff``'s ``sides``: a single-input diff's facts) must agree across shards:
    the runtime, device, opt level, precision and options; not the model's path (``model_id`` is the model)
    nor the providers (nothing when a side ran nothing of its own)."""
    if not isinstance(sides, dict):
        return sides
    return {k: {f: v for f, v in s.items() if f not in ("model", "providers")} if isinstance(s, dict) else s
            for k, s in sides.items()}


def merge_diff_reports(reports: list[dict]) -> dict:
    check_identity([{**r, "sides": _how_run(r.get("sides"))} for r in reports], IDENTITY)
    refuse_shards_given_twice(reports, ("pairs", "samples", "sample_labels"),
                              [not any(p.get("count") or p.get("nonfinite_same") or p.get("nonfinite_mismatch")
                                       for p in r["pairs"]) for r in reports])  # of empty batches only
    first = reports[0]
    keys = [_key(p) for p in first["pairs"]]
    for r in reports[1:]:
        if sorted(_key(p) for p in r["pairs"]) != sorted(keys):
            raise UsageError(f"{r['_path']}: compares other pairs than {first['_path']} (same models and selection needed)")
    # the shards laid end to end in the order of their names: the merged bytes do not depend on the arguments'
    shards = sorted(reports, key=lambda r: (Path(r["_path"]).name, json.dumps(r["sample_labels"])))
    offsets, labels = [], []
    for r in shards:
        offsets.append(len(labels))
        labels += [f"{Path(r['_path']).name}:{x}" for x in r["sample_labels"]]
    by_key = [{_key(p): p for p in r["pairs"]} for r in shards]
    rank = {k: (p["index"], i) for i, (k, p) in enumerate(zip(keys, first["pairs"]))}
    pairs = [_merged_pair(k, [(m[k], off, Path(r["_path"]).name) for m, off, r in zip(by_key, offsets, shards)], labels)
             for k in sorted(keys, key=rank.__getitem__)]
    result = common_fields(reports, ("pairs", "_path", "notes", "samples", "sample_labels", "verdict", "verdict_reason",
                                     "compared", "first_failure", "first_failure_module", "outputs_passed", "in_graph",
                                     "output_rows_passed",
                                     "sample_digests", "uncompared"))
    result["sides"] = first.get("sides")  # agreed on (``_how_run``): the first shard's model path
    result.update(_verdict(shards, pairs, first["criterion"]))
    result["samples"] = len(labels)
    result["sample_labels"] = labels
    result["merged_from"] = sorted(Path(r["_path"]).name for r in reports)
    result["sample_digests"], overlap = sample_overlap(reports)
    result["notes"] = sorted({n for r in reports for n in r.get("notes", []) if isinstance(n, str)}) + overlap
    result["pairs"] = pairs
    return result


def _merged_pair(key, parts: list[tuple[dict, int, str]], labels: list[str]) -> dict:
    base = parts[0][0]
    for p, _, name in parts[1:]:
        if (p["tolerance"], p.get("metric")) != (base["tolerance"], base.get("metric")):
            raise UsageError(f"{name}: pair {p['a']!r} is judged by another criterion than in {parts[0][2]} "
                             "(its 'tolerance' differs: a damaged report?): merge shards of one criterion")
        if p.get("topo") != base.get("topo"):  # the table's order under --sort topo: a fact of the matching
            raise UsageError(f"{name}: pair {p['a']!r} has another topological position ('topo' {p.get('topo')!r}) than "
                             f"in {parts[0][2]} ({base.get('topo')!r}): shards of other models or selections?")
    # the key order of one diff's report; what is not a fact is measured: None until computed below
    out = {k: base[k] if k in FACTS else None for k in base}
    tol = Tolerance.from_dict(base["tolerance"])
    # shapes that differed at run time in a shard: not compared, as in one diff over every sample
    problems = [(f"{name}:{p['problem']}", p["runtime_shapes"]) for p, _, name in parts if p.get("runtime_shapes")]
    measured = [(PairSums.from_dict(p["sums"]).shifted(off), p) for p, off, _ in parts if p.get("sums") is not None]
    out.update(dict.fromkeys(MEASURED))
    out.update({"worst_sample": None, "max_rel_sample": None, "sqnr_per_sample": None, "sums": None,
                "introduced_sums": None, "runtime_shapes": None, "count": None, "nonfinite_same": None,
                "introduced_count": None, "introduced_nonfinite_mismatch": None, "nonfinite_sample": None})
    if problems:
        out.update(passed=None, problem=problems[0][0], runtime_shapes=problems[0][1])
        return out
    if not measured:  # in no shard: why, where every shard says the same (an If branch that never ran)
        said = {p.get("problem") for p, _, _ in parts}
        out.update(passed=None, problem=said.pop() if len(said) == 1 and None not in said else "value not produced")
        return out
    sums = pool(s for s, _ in measured)
    intros = [PairSums.from_dict(p["introduced_sums"]).shifted(off) for p, off, _ in parts
              if p.get("sums") is not None and p.get("introduced_sums") is not None]
    intro = pool(intros) if len(intros) == len(measured) else None
    m = sums.metrics(tol.measured_rtol)
    i = intro.introduced() if intro is not None else None
    out.update(m.to_dict())
    # nothing finite over every shard: not compared, or a fail when NaN/Inf sits on one side only, in the
    # words of one diff
    passed = tol.judge(m)
    problem = nothing_measured(sums.shape, m) if m.empty else None
    out.update(introduced_sqnr_db=json_sqnr(i.sqnr_db, i.count, i.exact) if i else None, introduced_max_abs=json_word(float(i.max_abs)) if i else None,
               introduced_exact=i.exact if i else None, introduced_count=i.count if i else None,
               introduced_nonfinite_mismatch=i.nonfinite_mismatch if i else None, passed=passed, problem=problem,
               shape=None if sums.shape is None else list(sums.shape))
    out.update(dataset_fields(sums, intro, labels))
    return out


def _verdict(shards: list[dict], pairs: list[dict], criterion: str) -> dict:
    """The verdict of the pooled metrics, as one diff over every sample would give it: an error when
    nothing was compared, when an output has no counterpart (a fact of the matching, the same in every
    shard) or when an output has nothing finite in any shard; a shard's other errors (diff --grad's) stay.
    An output that had nothing finite in one shard but values in another is judged on those values."""
    failed = next((p for p in pairs if p["passed"] is False), None)
    judged = [p["passed"] for p in pairs if p["is_output"] and p["passed"] is not None]
    first = shards[0]
    unpaired_a, unpaired_b = ([(u["name"], u["reason"]) for u in first.get(k, []) if u.get("is_output") and u.get("cause") in UNPAIRED]
                              for k in ("unmatched_a", "unmatched_b"))
    uncompared = [(p["b"], p["problem"] or "value not produced") for p in pairs
                  if p["is_output"] and p["passed"] is None and not p.get("unjudged")]
    missing = outputs_not_compared(unpaired_a, unpaired_b, uncompared, "weight gradients" if first.get("grad") else "outputs")
    mapped = [(p["a"], p["b"], p["problem"] or "value not produced") for p in pairs
              if p.get("strategy") == "map" and p["passed"] is None]
    err = next((r for r in shards if r["verdict"] == "error"), None) if first.get("grad") else None
    # what the merge left uncompared, by cause: the matching's (every shard's), and the pairs measured in no shard
    causes = merged_uncompared(first.get("uncompared", []), [p for p in pairs if not _compared(p) and not p.get("unjudged")])
    if not any(_compared(p) for p in pairs):
        verdict, why = "error", nothing_compared(causes)
    elif missing:
        verdict, why = "error", missing
    elif mapped:
        verdict, why = "error", mapped_not_compared(mapped)
    elif err is not None:
        verdict, why = "error", err["verdict_reason"]
    else:
        n = sum(1 for p in pairs if p["passed"] is False and p["is_output"])
        verdict, why = ("fail", f"{n} of the outputs fail the criterion ({criterion})") if n else (
            "pass", f"outputs pass ({criterion})")
    return {"verdict": verdict, "verdict_reason": why, "compared": sum(1 for p in pairs if _compared(p)), "uncompared": causes,
            "first_failure": failed["a"] if failed else None, "first_failure_module": failed.get("module") if failed else None,
            "outputs_passed": verdict == "pass",
            "output_rows_passed": all(judged) if judged else None}


def _compared(p: dict) -> bool:
    """Measured: finite pairs, or NaN/Inf on one side (reports before "count" existed: measured)."""
    return p["exact"] is not None and bool(p.get("count", 1) or p.get("nonfinite_mismatch"))

