"""The fields of a shard report that merge-stats and its tables read, checked up front: a damaged shard (a
key missing, a null, a value of another type) is one line naming the shard and the key, where each reader
that first met it failed its own way ("internal error: KeyError: 'device'"). The moments, histograms and
sums a merge computes from have their own checks (``stats.merge.check_report``, ``compare.merge_diff``), which
check a tensor's summary statistics (``LAYERS_STATS``) with them."""

from __future__ import annotations

from onnxprobe.errors import UsageError
from onnxprobe.text import NONFINITE_JSON, clip

# how a key may be given: present and not null; present, maybe null; maybe absent, not null; maybe either
REQUIRED, NULLABLE, OPTIONAL, LOOSE = "required", "nullable", "optional", "loose"

_KINDS = {
    "text": lambda v: isinstance(v, str),
    "count": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    "flag": lambda v: isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "measure": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) or v in NONFINITE_JSON,  # text.json_word's too
    "size": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0,
    "fraction": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1,
    "list": lambda v: isinstance(v, list),
    "dims": lambda v: isinstance(v, list) and all(x is None or (isinstance(x, int) and not isinstance(x, bool) and x >= 0)
                                                  for x in v),
    "texts": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "object": lambda v: isinstance(v, dict),
}
_SAID = {"text": "a string", "count": "a count", "flag": "true or false", "number": "a number", "list": "a list",
         "measure": 'a number (or "inf", "-inf", "nan")',
         "size": "a number >= 0", "fraction": "a fraction (0 to 1)",
         "dims": "a list of dimensions (counts, null where shards differ)",
         "texts": "a list of strings", "object": "an object"}

# a layers dataset report (``report.layers``): shards that ran differently list their devices when merged;
# a runtime other than onnxruntime has no opt level (null)
LAYERS_TOP = {"device": (("text", "texts"), REQUIRED), "opt_level": (("text", "list"), NULLABLE),
              "runtime": (("text", "texts"), OPTIONAL), "notes": (("texts",), OPTIONAL), "timing": (("object",), LOOSE)}
LAYERS_TENSOR = {"index": (("count",), REQUIRED), "node": (("text",), REQUIRED), "scope": (("text",), NULLABLE),
                 "is_output": (("flag",), REQUIRED), "shape": (("dims",), LOOSE), "not_observed": (("text",), LOOSE),
                 "kernel_ms": (("number",), LOOSE)}
# a tensor's summary statistics (``TensorStats.to_dict``, the percentiles, the status), which the merge writes
# anew from the moments and histograms (``stats.merge.check_report`` holds them to the moments); absent where
# the tensor was not observed, null where there is no such value (no finite value, a branch not run)
LAYERS_STATS = {"count": (("count",), LOOSE), "nan": (("count",), LOOSE), "inf": (("count",), LOOSE),
                "min": (("number",), LOOSE), "max": (("number",), LOOSE), "mean": (("number",), LOOSE),
                "std": (("size",), LOOSE), "abs_mean": (("size",), LOOSE), "zero_fraction": (("fraction",), LOOSE),
                "p0.01": (("number",), LOOSE), "p99.99": (("number",), LOOSE), "status": (("text",), LOOSE)}
TIMING = {"run_s": (("number",), REQUIRED), "session_s": (("number",), REQUIRED)}

# a dataset diff report (``report.diff``); the pairs' own fields are checked by ``compare.merge_diff``
DIFF_TOP = {"a": (("text",), REQUIRED), "b": (("text",), REQUIRED), "unmatched_a": (("list",), REQUIRED),
            "unmatched_b": (("list",), REQUIRED), "fp32_sensitivity": (("list",), REQUIRED), "notes": (("texts",), OPTIONAL),
            "grad": (("object",), LOOSE), "executor": (("object",), LOOSE), "uncompared": (("list",), REQUIRED)}
DIFF_PAIR = {"op_type": (("text",), REQUIRED), "strategy": (("text",), REQUIRED), "shape": (("dims",), NULLABLE),
             "scope": (("text",), LOOSE),
             "module": (("text",), LOOSE), "tolerance": (("object",), REQUIRED)}
UNMATCHED = {"name": (("text",), REQUIRED), "reason": (("text",), REQUIRED), "is_output": (("flag",), REQUIRED),
             "cause": (("text",), NULLABLE), "selected": (("flag",), OPTIONAL)}
# a cause group of what was left uncompared (``compare.uncompared``): the merge counts the unmatched ones again
CAUSE_GROUP = {"cause": (("text",), REQUIRED), "why": (("text",), REQUIRED), "pairs": (("count",), REQUIRED),
               "in_a": (("count",), REQUIRED), "in_b": (("count",), REQUIRED), "examples": (("texts",), REQUIRED),
               "detail": (("text",), OPTIONAL)}
SENSITIVITY = {"layer": (("text",), REQUIRED), "op_type": (("text",), REQUIRED), "output": (("text",), REQUIRED),
               "introduced_sqnr_db": (("measure",), NULLABLE), "output_sqnr_db": (("measure",), NULLABLE),
               "output_sqnr_db_fp32_layer": (("measure",), NULLABLE), "gain_db": (("measure",), REQUIRED)}


def check_fields(obj: dict, spec: dict, where: str) -> None:
    """A UsageError naming ``where`` and the first key of ``spec`` that ``obj`` lacks or holds wrongly."""
    for key, (kinds, need) in spec.items():
        if key not in obj:
            if need in (REQUIRED, NULLABLE):
                raise UsageError(f"{where}: '{key}' missing: a damaged report")
            continue
        v = obj[key]
        if v is None and need in (NULLABLE, LOOSE):
            continue
        if not any(_KINDS[k](v) for k in kinds):
            said = " or ".join(_SAID[k] for k in kinds)
            shown = isinstance(v, list) or (isinstance(v, (int, float)) and not isinstance(v, bool))  # the value: -1, 1e+300
            got = "null" if v is None else f"{clip(repr(v), 40)}" if shown else type(v).__name__
            raise UsageError(f"{where}: '{key}' is {got}, not {said}: a damaged report")


def check_layers_fields(d: dict, label: str) -> None:
    check_fields(d, LAYERS_TOP, label)
    if d.get("timing"):
        check_fields(d["timing"], TIMING, f"{label}: timing")
    for i, t in enumerate(d["tensors"]):
        check_fields(t, LAYERS_TENSOR, f"{label}: tensors[{i}] ({t['name']!r})")


def check_diff_fields(d: dict, label: str) -> None:
    check_fields(d, DIFF_TOP, label)
    for i, p in enumerate(d["pairs"]):
        check_fields(p, DIFF_PAIR, f"{label}: pairs[{i}] ({p['a']!r})")
    for k in ("unmatched_a", "unmatched_b"):
        for i, u in enumerate(d[k]):
            if not isinstance(u, dict):
                raise UsageError(f"{label}: {k}[{i}] is not an object: a damaged report")
            check_fields(u, UNMATCHED, f"{label}: {k}[{i}]")
    for k, spec in (("fp32_sensitivity", SENSITIVITY), ("uncompared", CAUSE_GROUP)):
        for i, x in enumerate(d[k]):
            if not isinstance(x, dict):
                raise UsageError(f"{label}: {k}[{i}] is not an object: a damaged report")
            check_fields(x, spec, f"{label}: {k}[{i}]")
            if k == "uncompared" and not x["examples"]:  # a cause is said with its first example
                raise UsageError(f"{label}: {k}[{i}]: 'examples' is empty: a damaged report")
