"""The ``grad`` report: a JSON-ready dict and a Rich table of gradients (one row per weight, input or
activation gradient), in the layout of the ``layers`` table plus the norm, |grad| / |tensor| and, after
``--check``, the finite-difference error."""

from __future__ import annotations

import math

from rich.text import Text

from onnxprobe import __version__
from onnxprobe.report.console import phrased
from onnxprobe.report.format import (json_float, json_shape, json_word, num, num_or_word, op, safe, shape, spread_digits,
                                     type_digits)
from onnxprobe.report.columns import UNJUDGED
from onnxprobe.report.table import Column, Table
from onnxprobe.text import clean, duration, some

SCHEMA_VERSION = 1
KIND = {"weight": "w", "activation": "a", "input": "i"}


def _num(v):
    """A norm, a ratio, a check's error for JSON: null where there is none, a non-finite one said ("inf", "nan":
    ``json_word``, as the loss's value), not null."""
    return None if v is None else json_word(float(v))


def grad_dict(result) -> dict:
    rows = []
    for r in result.rows:
        ref = r.target.ref
        d = {
            "index": ref.index, "tensor": ref.name, "kind": r.target.kind, "node": ref.node, "op_type": ref.op_type,
            "gradient": r.grad, "shape": list(r.shape) if r.shape is not None else json_shape(ref.shape), "dtype": ref.dtype,
            "norm": _num(r.norm), "value_norm": _num(r.value_norm), "ratio": _num(r.ratio),
        }
        if r.stats is not None:
            d.update(r.stats.to_dict())  # (norm and ratio above as the row gives them: NaN or Inf where it holds one)
        if r.check is not None:
            d["check"] = {k: (_num(v) if isinstance(v, float) else v) for k, v in r.check.items()}
        if r.unjudged:  # the loss is constant in it: rounding noise, shown but not judged
            d["unjudged"] = r.unjudged
        rows.append(d)
    info, gp = result.info, result.plan
    # with a check: its outcome, as diff's JSON says its own (the command's error line is the reason)
    verdict = result.verdict() if hasattr(result, "verdict") else None
    return {
        "schema_version": SCHEMA_VERSION, "onnxprobe_version": __version__, "model": gp.source,
        "loss": {"kind": gp.loss.kind, "output": gp.loss.output, "value": json_word(result.loss),
                 **({"of": "probabilities"} if gp.loss.probabilities else {})},  # -log p of a Softmax's output
        "device": info.device, "providers": info.providers, "opt_level": info.opt_level,
        "timing": {"session_s": round(info.session_seconds, 6), "forward_backward_s": round(info.run_seconds, 6)},
        "graph": {"forward_nodes": gp.backward.n_forward, "backward_nodes": gp.backward.n_backward},
        "check": result.check_mode,
        # why the loss is a constant of the model (no input or weight reaches it: GradPlan.constant_output), else null
        "constant_output": gp.constant_output,
        # with --check: why its verdict rests on nothing (the loss is constant), else null
        **({"constant_loss": result.constant_loss} if result.check_mode is not None else {}),
        **({"verdict": verdict[0], "verdict_reason": verdict[1]} if verdict is not None else {}),
        "notes": list(dict.fromkeys(list(result.notes) + list(gp.warnings))),
        "gradients": rows,
        **({"samples": result.samples, "reduce": result.reduce,
            "executor": result.executor.to_dict() if result.executor is not None else {"engine": "local"}}
           if getattr(result, "samples", None) is not None else {}),
    }


COLUMNS = [
    Column("index", "#", "right", head=True), Column("node", "node", name=True), Column("op", "op", head=True),
    Column("tensor", "tensor", name=True), Column("kind", "kind", head=True), Column("shape", "shape", head=True),
    Column("norm", "|grad|", "right"), Column("ratio", "|g|/|t|", "right"), Column("min", "min", "right"),
    Column("max", "max", "right"), Column("mean", "mean", "right"), Column("std", "std", "right"),
    Column("nan", "NaN", "right"), Column("inf", "Inf", "right"),
]
CHECK = Column("check", "check", "right")
# data of a checked run's rows (CSV, JSON), columns where --columns names them
CHECK_OK = Column("check_ok", "check_ok")  # with UNJUDGED (report.columns): a checked run's data columns


def _cells(r: dict) -> tuple[list[str], list]:
    # told apart where they differ past 4 digits (10000.496 .. 10000.504 read "10000 10001 10000"), as layers does
    digits = spread_digits(r.get("min"), r.get("max"), most=type_digits(r.get("dtype")))
    cells = [
        str(r["index"]) if r["index"] >= 0 else "", r["node"], op(r["op_type"]), r["tensor"],
        KIND.get(r["kind"], "?"), shape(r["shape"]), num_or_word(r["norm"]), num_or_word(r["ratio"], 3),
        num(r.get("min"), digits), num(r.get("max"), digits), num(r.get("mean"), digits), num(r.get("std")),
        str(r.get("nan", "-")), str(r.get("inf", "-")),
    ]
    values = [r["index"] if r["index"] >= 0 else None, r["node"], r["op_type"], r["tensor"], r["kind"], r["shape"],
              _value(r["norm"]), _value(r["ratio"]), r.get("min"), r.get("max"), r.get("mean"), r.get("std"), r.get("nan"), r.get("inf")]
    return cells, values


def _value(v):
    return float(v) if isinstance(v, str) else v  # the table's raw values keep NaN / Inf as floats


CHECK_RANK = {"FAIL": 0, "ok": 1, "noise": 2, "cannot check": 3, "-": 4}


def _check_word(r: dict) -> str:
    """The verdict a gradient row's check cell shows: noise (the loss is constant in it: not judged), - (not
    checked), cannot check (finite differences cannot resolve it), ok or FAIL."""
    c = r.get("check")
    return "noise" if r.get("unjudged") else "-" if c is None else "cannot check" if c["ok"] is None else "ok" if c["ok"] else "FAIL"


def grad_table(result) -> tuple[Table, Text]:
    """The gradients of a GradResult (or of its ``grad_dict``) as a table, and the footer."""
    d = result if isinstance(result, dict) else grad_dict(result)
    checked = d["check"] is not None
    # CSV and JSON rows carry the check's error as a number: its verdict beside it (``check_ok``), so that rows
    # alone tell which gradients failed (the table's cell says "2.4e-11 ok")
    # and why a row was not judged (``unjudged``: the loss is constant in it, or the check's reason for
    # 'cannot check'), as diff's rows say
    t = Table(COLUMNS + ([CHECK] if checked else []), data=(CHECK_OK.key, UNJUDGED.key) if checked else ())
    bad = failed = ok = noise = own = 0
    for r in d["gradients"]:
        cells, values = _cells(r)
        noise += bool(r.get("unjudged"))
        order = None
        if checked:
            c = r.get("check")
            word = _check_word(r)
            cells.append(word if word in ("noise", "-", "cannot check") else f"{num(json_float(c['error']), 2)} {word}")
            values.append(None if c is None else json_float(c["error"]))
            # the page sorts the check as it reads: FAIL, ok, noise, cannot check, - (then by the error), not by the
            # raw error, which tied the last three and put a FAIL of small error below the oks
            err = c.get("error") if c else None
            order = {"check": [CHECK_RANK[word], err if isinstance(err, (int, float)) and math.isfinite(err) else None]}
        nonfinite = bool(r.get("nan") or r.get("inf"))
        bad += nonfinite
        fail = checked and r.get("check") is not None and r["check"]["ok"] is False
        failed += fail
        good = bool(checked and r.get("check") is not None and r["check"]["ok"])
        # the loss's own input: its gradient is the loss's formula (dL/dy = 1 for a sum), not the model's backward
        # pass; the verdict leaves it out, and the footer counted it among the oks (10 ok beside "9 agree")
        own += good and r.get("tensor") == d["loss"].get("output")
        ok += good
        # why no verdict: the loss is constant in it, or finite differences cannot check it (``unresolved``)
        why = r.get("unjudged") or (r.get("check") or {}).get("unresolved")
        t.add_row(cells, values, "bold red" if nonfinite or fail else None,
                  [None if r.get("check") is None else r["check"]["ok"], why] if checked else None, order=order)
    n = len(t)
    footer = Text()
    footer.append(f"{n} gradient{'s' if n != 1 else ''}")
    footer.append(" · ")
    footer.append(f"{bad} with NaN/Inf", style="bold red" if bad else "green")
    if checked:
        footer.append(" · ")
        unchecked = n - ok - failed - noise  # empty gradients: nothing to compare
        footer.append(f"check ({d['check']}): {ok - own} ok, {failed} failed" + (f", {unchecked} not checked" if unchecked else "")
                      + (f", {noise} noise (not judged)" if noise else "")
                      + (f"; {safe(d['loss']['output'])}'s own gradient, the loss's formula, agrees" if own else ""),
                      style="bold red" if failed or not ok - own or d.get("constant_loss") else "green")
    loss = d["loss"]
    of = " of the probabilities" if loss.get("of") == "probabilities" else ""
    footer.append(f" · loss {loss['kind']}({safe(loss['output'])}){of} = {num_or_word(loss['value'])}")  # a model's name
    if d.get("samples") is not None:
        footer.append(f" ({d['reduce']} over {d['samples']} samples)")
    footer.append(f" · device {d['device']} · forward+backward {duration(d['timing']['forward_backward_s'])}")
    footer.append(f" · {d['graph']['backward_nodes']} backward nodes")
    footer.append("\nkinds: w weight, i input, a activation; |g|/|t|: gradient norm over the tensor's norm", style="dim")
    return t, footer


def grad_renderables(result, width: int = 120) -> list:
    table, footer = grad_table(result)
    return [table, phrased(footer, width)]


def export_summary(gp) -> str:
    """What ``grad --export`` wrote, in one line (after "wrote OUT: ", as every written file is said)."""
    bw = gp.backward
    inputs = [clean(i.name) for i in bw.model.graph.input if i.name not in {x.name for x in bw.model.graph.initializer}]
    outs = [clean(o.name) for o in bw.model.graph.output]
    return (f"loss {gp.loss.kind}({clean(gp.loss.output)}) and {len(bw.grads)} gradients, {bw.n_forward} forward + "
            f"{bw.n_backward} backward nodes; inputs: {', '.join(inputs)}; outputs: {some(outs, 8, str)}")
