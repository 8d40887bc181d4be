"""The ``layers`` report: a JSON-ready dict and a Rich table of probed tensors."""

from __future__ import annotations

import math

from rich.text import Text

from onnxprobe import __version__
from onnxprobe.report.columns import LAYERS_COLUMNS, LAYERS_PERCENTILE_COLUMNS, LAYERS_PROFILE_COLUMNS, LAYERS_STATUS
from onnxprobe.report.console import phrased
from onnxprobe.report.format import dtype, json_shape, no_values, num, op, shape, spread_digits, type_digits
from onnxprobe.report.table import Table
from onnxprobe.stats.status import values_status
from onnxprobe.text import duration

SCHEMA_VERSION = 1


def tensor_rows(rows, shapes: dict) -> list[dict]:
    """One JSON-ready dict per (TensorRef, TensorStats | None); non-finite statistics are null."""
    tensors = []
    for ref, st in rows:
        d = {
            "index": ref.index, "name": ref.name, "node": ref.node, "op_type": ref.op_type,
            "scope": "/".join(ref.scope) or None,
            # what results key it by: the name, or 'if1/then_branch/o' where sibling bodies share the name
            "key": ref.key,
            # None: the batches of a dataset disagree on its rank
            "shape": (None if shapes[ref.key] is None else list(shapes[ref.key])) if ref.key in shapes else json_shape(ref.shape),
            "dtype": ref.dtype, "is_output": ref.is_output,
        }
        if st is not None:
            d.update(st.to_dict())
        tensors.append(d)
    return tensors


def layers_dict(result) -> dict:
    """JSON-ready. Non-finite statistics are null."""
    return layers_report(result.rows(), result.shapes, result.info, result.plan.source,
                         list(result.notes) + list(result.plan.warnings), getattr(result, "unobserved", None) or {})


def layers_report(rows, shapes: dict, info, source: str, notes: list[str], unobserved: dict | None = None) -> dict:
    """``layers_dict`` from its parts: (TensorRef, TensorStats | None) ``rows``, their ``shapes``, the RunInfo of
    the run, the model's path and the notes (the debugger's `stats --json` has them from its cache)."""
    tensors = tensor_rows(rows, shapes)
    unobserved = unobserved or {}
    for t in tensors:
        if t["name"] in unobserved:
            t["not_observed"] = unobserved[t["name"]]  # the runtime cannot return it: why (fused, in a body...)
        t["status"] = values_status(t.get("count"), t["shape"], t.get("not_observed"))  # count 0 is not all-NaN
        if t["status"] == "not run":  # no values to count NaN or Inf among: null, as the table's '-' (not 0 0)
            t["nan"] = t["inf"] = None
    return {
        "schema_version": SCHEMA_VERSION, "onnxprobe_version": __version__,
        "model": source, "runtime": getattr(info, "runtime", "onnxruntime"), "device": info.device,
        "providers": info.providers,
        "opt_level": info.opt_level,
        "runtime_options": dict(getattr(info, "runtime_options", None) or {}),
        "precision": getattr(info, "precision", None),
        "timing": {"session_s": round(info.session_seconds, 6), "run_s": round(info.run_seconds, 6)},
        "notes": list(notes),
        "tensors": tensors,
    }


COLUMNS, PERCENTILE_COLUMNS, PROFILE_COLUMNS, STATUS = LAYERS_COLUMNS, LAYERS_PERCENTILE_COLUMNS, LAYERS_PROFILE_COLUMNS, LAYERS_STATUS


def dataset_dict(res) -> dict:
    """``layers --inputs-dir``: the layers dict, plus per tensor its percentiles and the exactly mergeable
    moments and histogram that ``merge-stats`` combines."""
    from onnxprobe.stats.merge import DATASET_SCHEMA

    d = layers_dict(res)
    d["schema_version"] = DATASET_SCHEMA
    d["model_id"], d["selection"] = res.model_id, res.selection
    d["batches"] = res.batches
    d["executor"] = res.executor.to_dict()
    d["sample_digests"] = res.executor.sample_digests()  # merge-stats: a sample two shards both hold
    d.pop("timing", None)
    for t in d["tensors"]:
        m, h = res.moments.get(t["key"]), res.histograms.get(t["key"])  # keyed as results are: one per branch
        st = m.stats() if m is not None else None
        t["p0.01"] = h.percentile(0.01, st.min, st.max) if h is not None and st is not None else None
        t["p99.99"] = h.percentile(99.99, st.min, st.max) if h is not None and st is not None else None
        t["moments"] = m.to_dict() if m is not None else None
        t["histogram"] = h.to_dict() if h is not None else None
    return d


SEPARATORS = tuple("_/.:-")


def integer_type(dt) -> bool:
    return isinstance(dt, str) and (dt.startswith(("int", "uint")) or dt == "bool")


def exact_int(v) -> str:
    """An integer tensor's extreme as the integer it is, where float64 holds it exactly (|v| < 2**53); the
    digits of ``num`` beyond that (int64's limits are not exact in the float64 statistics)."""
    if isinstance(v, int) and not isinstance(v, bool):  # int64/uint64 extremes summarised on the host: exact
        return str(v)
    if isinstance(v, (int, float)) and math.isfinite(v) and float(v).is_integer() and abs(v) < 2 ** 53:
        return str(int(v))
    return num(v)


def extreme_text(v, dtype, digits: int) -> str:
    """A tensor's min or max as a table writes it: an integer tensor's as the integer it is (``exact_int``: 32767,
    not 3.277e+04), a float's to ``digits``."""
    return exact_int(v) if integer_type(dtype) else num(v, digits)


def _cells(r: dict) -> tuple[list[str], list]:
    node = r["node"] if not r["scope"] else f"↳ {r['node']}"  # inside an If/Loop/Scan body (JSON has the scope)
    # by its key: 'if1/then_branch/o' where sibling bodies share 'o' (their nodes may share a name too: the bare
    # name read alike in two rows wherever the table had no room for the key), the bare name otherwise
    tensor = r.get("key") or r["name"]
    if r["node"] and tensor.startswith(r["node"]) and tensor[len(r["node"]):][:1] in SEPARATORS:
        # the node's name as a whole part of the tensor's: PyTorch's '/l/Conv' -> '/l/Conv_output_0' reads
        # '…_output_0' next to it; 'logx' of node 'log' stays 'logx'
        tensor = "…" + tensor[len(r["node"]):]
    ran = bool(r.get("count"))
    # told apart on offset data; a 64-bit constant to the digits of its value
    digits = spread_digits(r.get("min"), r.get("max"), most=type_digits(r.get("dtype")))
    extreme = (lambda v: extreme_text(v, r.get("dtype"), digits))  # noqa: E731
    # a tensor that did not run has no values to count NaN or Inf among: '-' (empty in CSV), not a clean 0 0
    idle = values_status(r.get("count"), r.get("shape")) == "not run"
    nan, inf = (None, None) if idle else (r.get("nan"), r.get("inf"))
    cells = [
        str(r["index"]), node, op(r["op_type"]), tensor, shape(r["shape"]), dtype(r["dtype"]),
        extreme(r.get("min")) if ran else (no_values(r.get("shape")) if r.get("count") == 0 else
                                           "not observed" if r.get("not_observed") else "-"),
        extreme(r.get("max")) if ran else "-", num(r.get("mean"), digits), num(r.get("std")),
        str(nan if nan is not None else "-"), str(inf if inf is not None else "-"),
    ]
    # CSV and JSON rows name a tensor by its key too
    values = [r["index"], r["node"], r["op_type"], r.get("key") or r["name"], r["shape"], r["dtype"], r.get("min"),
              r.get("max"), r.get("mean"), r.get("std"), nan, inf]
    if "p0.01" in r:
        # the digits of min and max; an integer tensor's as its extremes read (float64 put 2^63 beside a max of 2^63-1)
        cells += [extreme(r.get("p0.01")), extreme(r.get("p99.99"))]
        values += [r.get("p0.01"), r.get("p99.99")]
    return cells, values


def layers_table(d) -> tuple[Table, Text]:
    """The table for a layers or dataset dict (``layers_dict``, ``dataset_dict``, or merged JSON), or for
    a result object, which goes through ``layers_dict`` first."""
    if not isinstance(d, dict):
        d = layers_dict(d)
    percentiles = any("p0.01" in r for r in d["tensors"])
    profiled = any("kernel_ms" in r for r in d["tensors"])
    t = Table(COLUMNS + (PERCENTILE_COLUMNS if percentiles else []) + (PROFILE_COLUMNS if profiled else []), data=(STATUS.key,))
    bad = 0
    for r in d["tensors"]:
        cells, values = _cells(r)
        if percentiles and "p0.01" not in r:
            cells, values = cells + ["-", "-"], values + [None, None]
        if profiled:  # no kernel of its own: fused into another node's (the summary names it), or not run
            cells, values = cells + [num(r["kernel_ms"]) if r.get("kernel_ms") is not None else "-"], values + [r.get("kernel_ms")]
        nonfinite = bool(r.get("nan") or r.get("inf"))
        bad += nonfinite
        t.add_row(cells, values, "bold red" if nonfinite else ("bold" if r["is_output"] else None),
                  [values_status(r.get("count"), r.get("shape"), r.get("not_observed"))])
    n = len(t)
    timing = d.get("timing")
    footer = Text()
    footer.append(f"{n} tensor{'s' if n != 1 else ''}")
    footer.append(" · ")
    footer.append(f"{bad} with NaN/Inf", style="bold red" if bad else "green")
    if "batches" in d:
        footer.append(f" · {d['batches']} batch{'es' if d['batches'] != 1 else ''}")
    # merged shards that ran differently carry a list of the values (stats.merge.common_fields)
    said = (lambda v: ", ".join(map(str, v)) if isinstance(v, list) else v)
    runtime = said(d.get("runtime", "onnxruntime"))
    footer.append(f" · device {said(d['device'])} · opt-level {said(d['opt_level'])}" if runtime == "onnxruntime"
                  else f" · runtime {runtime} · device {said(d['device'])}")
    if d.get("precision"):  # what the runtime computed floats in where not the graph's own types (OpenVINO's bf16)
        footer.append(f" · precision {said(d['precision'])}")
    if timing:
        # (no session of its own, onnx.reference's run: none said, not "session 0 µs"; the debugger's line does the same)
        session = f" (session {duration(timing['session_s'])})" if timing.get("session_s") else ""
        footer.append(f" · run {duration(timing['run_s'])}{session}")
    return t, footer


def layers_renderables(data: dict, width: int = 120) -> list:
    """A layers or dataset dict as a table with its footer."""
    table, footer = layers_table(data)
    return [table, phrased(footer, width)]


