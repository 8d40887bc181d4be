"""Merging dataset reports (the JSON of ``layers --inputs-dir``) shard by shard, exactly.

Reports carry what they describe: the model's identity (a hash of its graph and weights), the selection,
the onnxprobe version and the report schema. Merging refuses reports of different things, and reports
that are malformed (a field of the wrong type, histograms whose codes and counts differ in length, deep
nesting), each with one line naming the file and the field. Merged bytes do not depend on the order of
the shards.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from functools import reduce
from pathlib import Path

from onnxprobe.errors import UsageError, settings_error
from onnxprobe.fileio import input_file, protect, read_bounded
from onnxprobe.stats.histogram import Histogram
from onnxprobe.stats.moments import Impossible, Moments
from onnxprobe.stats.pooled import merged_shape
from onnxprobe.stats.shard_fields import LAYERS_STATS, check_fields
from onnxprobe.stats.status import values_status
from onnxprobe.text import clip, quote, some

DATASET_SCHEMA = 3
MAX_REPORT_BYTES = 512 * 2**20
IDENTITY = ("schema_version", "onnxprobe_version", "model_id", "selection", "runtime", "precision", "runtime_options")  # devices, opt levels: listed
TEXT_FIELDS = ("onnxprobe_version", "model_id", "selection")
# the most values of one tensor a batch can hold: numpy's and onnxruntime's sizes are int64
MAX_BATCH_VALUES = 2**63 - 1


def read_json_report(path: str | Path) -> dict:
    """The JSON object of a report file, its path kept under "_path" (not yet checked for its kind)."""
    p = input_file(path, "report file", pipe_ok=True)  # read once: `merge-stats <(...)` works
    try:
        data = read_bounded(p, MAX_REPORT_BYTES)
    except OSError:
        raise UsageError(f"{p}: not a JSON report") from None
    if len(data) > MAX_REPORT_BYTES:
        raise UsageError(f"{p}: over {MAX_REPORT_BYTES >> 20} MiB; not a dataset report")
    try:
        d = json.loads(data)
    except RecursionError:
        raise UsageError(f"{p}: nested too deeply to be a dataset report") from None
    except (OSError, ValueError):
        raise UsageError(f"{p}: not a JSON report") from None
    if not isinstance(d, dict):
        raise settings_error(UsageError, lambda say: f"{p}: not a dataset report (a JSON object "
                             f"{say.either('api.report(result) returns', 'written with --json')})")
    d["_path"] = str(p)
    protect(p, "an input report")
    return d


def described_models(d: dict, report) -> list[str]:
    """The model files report ``d`` (read from ``report``) names (a layers report's ``model``, a diff report's sides'),
    as paths from here and, where relative, from the report's folder (it may have been written from there)."""
    sides = d.get("sides") if isinstance(d.get("sides"), dict) else {}
    named = [d.get("model")] + [s.get("model") for s in sides.values() if isinstance(s, dict)]
    out = []
    for m in named:
        if isinstance(m, str) and m and "\0" not in m:
            out += [m] + ([os.path.join(os.path.dirname(str(report)), m)] if not os.path.isabs(m) else [])
    return [m for m in out if os.path.isfile(m)]


# a file descriptor's path: what a shell's process substitution `<(...)` passes, numbered by the shell alone
_DESCRIPTOR = re.compile(r"/dev/(fd/\d+|stdin)|/proc/(self|thread-self|\d+)/fd/\d+")


def shard_name(path: str, position: int) -> str:
    """A shard's name in labels, merged_from and messages: its path, or for a pipe read through a file
    descriptor (`merge-stats <(...) <(...)`) "shard N" by its place among the arguments (1-based): the
    descriptor's number ('63') says nothing, and another shell gives another."""
    return f"shard {position}" if _DESCRIPTOR.fullmatch(str(path)) else str(path)


def hint(say) -> str:
    """Where a layers dataset report comes from, in the words of whoever merges (``errors.Voice``)."""
    return say.either("api.layers_dataset(model, inputs=DIR) makes one",
                      "write one with `onnxprobe layers MODEL --inputs-dir DIR --json FILE`")


def merge_stats_said(say) -> str:
    """The merge, named as whoever merges calls it: ``merge_stats`` from the API, ``merge-stats`` on the command line."""
    return say.either("merge_stats", "merge-stats")


def check_report(d, label: str) -> None:
    """A UsageError naming the first thing that makes ``d`` not a mergeable dataset report."""
    if not isinstance(d, dict) or not isinstance(d.get("tensors"), list) or "batches" not in d:
        raise settings_error(UsageError, lambda say: f"{label}: not a dataset report ({hint(say)})")
    if d.get("schema_version") != DATASET_SCHEMA:
        raise settings_error(UsageError, lambda say: f"{label}: dataset report schema {d.get('schema_version')!r}, this "
                             f"onnxprobe merges schema {DATASET_SCHEMA} ({hint(say)} with this version)")
    if not isinstance(d["batches"], int) or isinstance(d["batches"], bool) or d["batches"] < 0:
        raise UsageError(f"{label}: 'batches' is not a count")
    digests = d.get("sample_digests")
    if isinstance(digests, list) and digests and len(digests) != d["batches"]:  # one digest a batch ([]: not said)
        raise UsageError(f"{label}: {len(digests)} sample digests for {d['batches']} batches: a damaged report")
    for k in TEXT_FIELDS:
        if not isinstance(d.get(k), str):
            raise settings_error(UsageError, lambda say: f"{label}: '{k}' missing or not a string ({hint(say)})")
    for i, t in enumerate(d["tensors"]):
        where = f"{label}: tensors[{i}]"
        if not isinstance(t, dict) or not isinstance(t.get("name"), str):
            raise UsageError(f"{where}: not a tensor entry with a name")
        if not isinstance(t.get("op_type"), str) or not isinstance(t.get("dtype"), (str, type(None))):
            raise settings_error(UsageError, lambda say: f"{where} ({t['name']!r}): no op_type or dtype (a partial tensor "
                                 f"entry; {hint(say)})")
        check_fields(t, LAYERS_STATS, f"{where} ({t['name']!r})")
        if t.get("moments") is None:
            if t.get("count"):
                raise UsageError(f"{where} ({t['name']!r}): no moments to merge")
            continue
        try:
            m = Moments.from_dict(t["moments"])
        except Impossible as e:
            raise UsageError(f"{where} ({t['name']!r}): moments no values have ({e}): a damaged report") from None
        except (KeyError, TypeError, ValueError) as e:
            raise UsageError(f"{where} ({t['name']!r}): malformed moments ({e})") from None
        if m.count and not d["batches"]:
            raise UsageError(f"{where} ({t['name']!r}): {m.count} values from 0 batches: a damaged report")
        if m.count > d["batches"] * MAX_BATCH_VALUES:  # without a histogram, nothing else holds the count to the data
            raise UsageError(f"{where} ({t['name']!r}): moments 'count' {clip(str(m.count), 24)}: more values than "
                             f"{d['batches']} batches hold (at most 2^63 - 1 a batch): a damaged report")
        _summary_agrees(t, m, f"{where} ({t['name']!r})")
        h = t.get("histogram")
        if h is not None:
            if not isinstance(h, dict) or not isinstance(h.get("codes"), list) or not isinstance(h.get("counts"), list):
                raise UsageError(f"{where} ({t['name']!r}): malformed histogram")
            if len(h["codes"]) != len(h["counts"]):
                raise UsageError(f"{where} ({t['name']!r}): histogram codes and counts differ in length "
                                 f"({len(h['codes'])} vs {len(h['counts'])})")
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in h["codes"] + h["counts"]):
                raise UsageError(f"{where} ({t['name']!r}): histogram codes and counts must be integers")
            if any(v < 0 for v in h["counts"]):
                raise UsageError(f"{where} ({t['name']!r}): a histogram count of {min(h['counts'])}: counts are never "
                                 "negative (a damaged report)")
            try:
                hist = Histogram.from_dict(h)
            except ValueError as e:
                raise UsageError(f"{where} ({t['name']!r}): {e}") from None
            finite = m.count - m.nan - m.inf  # the histogram bins every finite value, zeros in code 0
            if hist.total != finite or hist.counts.get(0, 0) != m.zeros:  # an empty one too: percentiles of other shards
                raise UsageError(f"{where} ({t['name']!r}): the histogram holds {hist.total} values ({hist.counts.get(0, 0)} "
                                 f"zeros), the moments {finite} finite ({m.zeros} zeros): a damaged report")


def _summary_agrees(t: dict, m: Moments, where: str) -> None:
    """A UsageError where a tensor's summary (``shard_fields.LAYERS_STATS``, each of its kind) says other counts
    than its moments, which the merge pools and writes them anew from, or a minimum above its maximum."""
    for k in ("count", "nan", "inf"):
        if t.get(k) is not None and t[k] != getattr(m, k):
            raise UsageError(f"{where}: '{k}' is {t[k]}, its moments hold {getattr(m, k)}: a damaged report")
    lo, hi = t.get("min"), t.get("max")
    if lo is not None and hi is not None and lo > hi and m.count - m.nan - m.inf > 0:
        raise UsageError(f"{where}: 'min' {lo:g} is above 'max' {hi:g}: a damaged report")


def _merged_shape(shapes: list) -> list | None:
    """The shards' JSON shapes merged as a dataset's are (``stats.pooled.merged_shape``): one dimension
    where every shard agrees, None where they differ (batches of other sizes); shards without one skipped."""
    shapes = [tuple(s) for s in shapes if isinstance(s, list)]
    merged = reduce(merged_shape, shapes) if shapes else None
    return list(merged) if merged is not None else None


WHAT = {"model_id": "a different model (or other weights)", "selection": "another selection of tensors",
        "onnxprobe_version": "another onnxprobe version", "schema_version": "another report schema",
        "dataset_schema": "another report schema", "sides": "other runtimes, devices, opt levels, precisions or runtime options",
        "criterion": "another pass/fail criterion", "measured": "another kind of measurement",
        "runtime": "another runtime", "device": "another device", "opt_level": "another opt level",
        "precision": "another floating-point precision", "runtime_options": "other runtime options"}


def check_identity(reports: list[dict], keys: tuple[str, ...]) -> None:
    """A UsageError when two reports describe different things (``keys``: what must agree)."""
    if not reports:
        raise settings_error(UsageError, lambda say: f"{merge_stats_said(say)}: give at least one report")
    first = reports[0]
    for k in keys:
        for r in reports[1:]:
            if r.get(k) != first.get(k):
                what, said = _difference(k, r.get(k), first.get(k))
                raise UsageError(f"{r['_path']}: describes {what} than {first['_path']} ({said}); shards to merge come "
                                 "from the same models, selection, runtime, settings and onnxprobe")


def _difference(k: str, x, y) -> tuple[str, str]:
    """What differs between two reports' values of ``k`` (``WHAT``) and the two values, as JSON writes them (null, not
    Python's None); of a diff report's ``sides``, the first field that differs and the sides it differs on."""
    def shown(v) -> str:
        if k == "model_id":  # a digest shortened; a diff report's is A's + B's: each shortened, or two shards of
            return "+".join(d[:12] + "…" for d in str(v).split("+"))  # other B models would both show A's first 12
        return clip(json.dumps(v, sort_keys=True, default=str), 80)

    if k == "sides" and isinstance(x, dict) and isinstance(y, dict):
        fields = [(side, f) for side in sorted(set(x) | set(y)) for f in sorted(set(_dict(x.get(side))) | set(_dict(y.get(side))))
                  if _dict(x.get(side)).get(f) != _dict(y.get(side)).get(f)]
        if fields:
            f = fields[0][1]
            sides = [side for side, g in fields if g == f]
            vx, vy = _dict(x.get(sides[0])).get(f), _dict(y.get(sides[0])).get(f)
            who = " and ".join(side.upper() if len(side) == 1 else side for side in sides)
            return WHAT.get(f, WHAT[k]), f"{who}: {f} {clip(json.dumps(vx, default=str), 60)} vs {clip(json.dumps(vy, default=str), 60)}"
    return WHAT[k], f"{k} {shown(x)} vs {shown(y)}"


def _dict(v) -> dict:
    return v if isinstance(v, dict) else {}


def _digests(reports: list[dict]) -> list[list[str | None]]:
    """Each report's ``sample_digests``, checked: a digest a sample (batch), None for a sample whose digest it does
    not say (a report older than digests, a list left empty beside its samples, or a merged report's entry for such
    a shard's samples: null in its JSON)."""
    out = []
    for r in reports:
        x, n = r.get("sample_digests"), r.get("batches", r.get("samples"))
        if x is not None and (not isinstance(x, list) or not all(v is None or isinstance(v, str) for v in x)):
            raise UsageError(f"{r['_path']}: sample_digests is not a list of digests: a damaged report")
        # [] beside samples says nothing of them (a merge that took it for "none" wrote fewer digests than batches,
        # a report merge-stats then refused as damaged); check_report refuses any other length
        out.append(x if x else [None] * (n if isinstance(n, int) else 0))
    return out


def _floats(v):
    """``v`` (parsed JSON) with every number a float, for comparing reports as values rather than as text."""
    if isinstance(v, dict):
        return {k: _floats(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_floats(x) for x in v]
    return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


def refuse_shards_given_twice(reports: list[dict], stats: tuple[str, ...], valueless: list[bool] | None = None) -> None:
    """A UsageError when every sample of a shard is also in another one: the same shard given twice (the
    file, a copy, a rerun with another model path or executor) or beside a merged report that holds it,
    however deeply merged (a merged report carries all its samples' digests). Its samples would count
    twice. Decided on the samples' digests, never on file names: shards of one name from different
    folders, or pipes, are other shards. Reports that do not list their samples (older ones) are compared
    on their statistics (``stats``: the fields that hold them), which only catches a shard given twice.
    A shard with no value (``valueless``: of empty batches only, whose digests are any empty batch's) has
    nothing to count twice: refused only beside one of exactly its samples (itself again, or a copy)."""
    lists = _digests(reports)
    known = [Counter(v for v in x if v is not None) for x in lists]
    full = [bool(x) and None not in x for x in lists]  # every sample's digest said
    # every number as a float: 0 and 0.0 are one number (a shard rewritten by jq writes 0.0 as 0)
    same = [json.dumps(_floats({k: r.get(k) for k in stats}), sort_keys=True, default=str) for r in reports]
    for k, r in enumerate(reports):
        for j, o in enumerate(reports):
            if j == k:
                continue
            if full[k] and known[j]:  # every sample of k known, some of j's (a merged report's others unknown)
                alike = full[j] and known[k] == known[j]
                if known[k] - known[j] or (alike and j > k):  # the same samples: said of the later one
                    continue
                if valueless and valueless[k] and not alike:  # its empty batches beside another's
                    continue
                what = (f"{r['_path']} holds the same samples as {o['_path']}" if alike else
                        f"every sample of {r['_path']} is also in {o['_path']}") + " (the same input values)"
            elif same[k] == same[j] and j < k:
                what = f"{r['_path']} holds the same statistics as {o['_path']}"
            else:
                continue
            raise settings_error(UsageError, lambda say: f"{merge_stats_said(say)}: {what}: they would count twice; give each "
                                 "shard once (a merged report holds the samples of the shards it was merged from)")


def sample_overlap(reports: list[dict]) -> tuple[list[str] | None, list[str]]:
    """The merged ``sample_digests`` (the shards' in the order of their names; None when a shard does not
    list its samples) and a note when a sample (the same input values) is in more than one shard but no
    shard's samples are all in another (``refuse_shards_given_twice``): overlapping ranges of one dataset,
    which count those samples twice. A note, not a refusal: a dataset may hold the same values twice."""
    shards = sorted(reports, key=lambda r: Path(r["_path"]).name)
    lists = _digests(shards)
    if all(v is None for x in lists for v in x):
        return None, []  # no shard says which samples it holds (older reports): nothing to check
    where: dict[str, list[str]] = {}
    for r, digests in zip(shards, lists):
        for v in set(digests) - {None}:  # a sample whose digest is not said: null in the merged list, as it was
            where.setdefault(v, []).append(Path(r["_path"]).name)
    shared = {v: files for v, files in where.items() if len(files) > 1}
    merged = [v for x in lists for v in x]
    if not shared:
        return merged, []
    files = sorted({f for fs in shared.values() for f in fs})
    count = sum(1 for v in merged if v in shared)
    return merged, [f"{count} of the {len(merged)} samples have the same input values as a sample of another shard "
                    f"({some(files, 4, str)}): overlapping shards of one dataset "
                    "count those samples more than once"]


def common_fields(reports: list[dict], skip: tuple[str, ...]) -> dict:
    """The first report's other fields: a value every shard agrees on, else the sorted distinct values
    (shards that ran differently)."""
    result = {}
    for k, v in reports[0].items():
        if k in skip:
            continue
        values = {json.dumps(r.get(k), sort_keys=True) for r in reports}
        result[k] = v if len(values) == 1 else [json.loads(x) for x in sorted(values)]
    return result


def merge_reports(reports: list[dict]) -> dict:
    check_identity(reports, IDENTITY)
    refuse_shards_given_twice(reports, ("tensors", "batches"),
                              [not any((t.get("moments") or {}).get("count") for t in r["tensors"]) for r in reports])
    first = reports[0]
    names = [t["name"] for t in first["tensors"]]
    for r in reports[1:]:
        if [t["name"] for t in r["tensors"]] != names:
            raise UsageError(f"{r['_path']}: probes other tensors than {first['_path']} (same model and selection needed)")
        for a, b in zip(first["tensors"], r["tensors"]):
            if (a.get("op_type"), a.get("dtype")) != (b.get("op_type"), b.get("dtype")):
                raise UsageError(f"{r['_path']}: tensor {a['name']!r} is {b.get('op_type')} {b.get('dtype')} there but "
                                 f"{a.get('op_type')} {a.get('dtype')} in {first['_path']}: not the same model")
    merged_tensors = []
    for i, base in enumerate(first["tensors"]):
        m, h = Moments(), Histogram()
        binned = [bool(r["tensors"][i].get("histogram")) for r in reports]
        for r, has in zip(reports, binned):
            t = r["tensors"][i]
            if not has and any(binned) and (t.get("moments") or {}).get("count"):  # percentiles of part of the data
                raise UsageError(f"{r['_path']}: tensor {quote(base['name'])} has values but no histogram, which the "
                                 "other shards have: a damaged report")
            if t.get("moments"):
                m = m.merge(Moments.from_dict(t["moments"]))
            if t.get("histogram"):
                h = h.merge(Histogram.from_dict(t["histogram"]))
        out = {k: v for k, v in base.items() if k not in ("moments", "histogram")}
        # the shapes of the shards where the tensor ran: one where it did not (an If branch not taken) holds the shape
        # the model declares (a '?' batch dimension), not a runtime one; all of them where it ran nowhere
        ran = [r["tensors"][i] for r in reports if r["tensors"][i].get("status") != "not run"]
        out["shape"] = _merged_shape([t.get("shape") for t in (ran or [r["tensors"][i] for r in reports])])
        if all(r["tensors"][i].get("moments") is None for r in reports):
            # no statistics in any shard (a string tensor, one the runtime cannot return): as each shard says, not
            # the merge of nothing, which read "not run" with a count of 0
            out["moments"] = out["histogram"] = None
            merged_tensors.append(out)
            continue
        st = m.stats()
        out.update(st.to_dict())
        if "status" in out:  # of the merged count: a branch one shard never took may have run in another
            out["status"] = values_status(st.count, out["shape"], out.get("not_observed"))
            if out["status"] == "not run":  # no values in any shard: NaN and Inf not counted (null), as layers says
                out["nan"] = out["inf"] = None
        out["p0.01"] = h.percentile(0.01, st.min, st.max) if h.total else None
        out["p99.99"] = h.percentile(99.99, st.min, st.max) if h.total else None
        out["moments"] = m.to_dict()
        out["histogram"] = h.to_dict()
        merged_tensors.append(out)
    result = common_fields(reports, ("tensors", "_path", "notes", "sample_digests"))
    result["batches"] = sum(int(r["batches"]) for r in reports)
    # sources sorted so that the merged bytes do not depend on the order of the arguments
    result["merged_from"] = sorted(Path(r["_path"]).name for r in reports)
    result["sample_digests"], overlap = sample_overlap(reports)
    result["notes"] = sorted({n for r in reports for n in r.get("notes", []) if isinstance(n, str)}) + overlap
    result["tensors"] = merged_tensors
    return result
