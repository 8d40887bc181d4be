"""The ``grad`` report: a JSON-ready dict and a Rich table of gradients (one row per weight, input or
activation gradient), in the layout of the ``layers`` table plus the norm, |grad| / |tensor| and, after
``--check``, the finite-difference error."""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text

from onnxprobe import __version__
from onnxprobe.report.format import num, op, safe, shape, shorten
from onnxprobe.text import duration

SCHEMA_VERSION = 1
KIND = {"weight": "w", "activation": "a", "input": "i"}


def _num(v):
    import math

    return v if v is not None and math.isfinite(v) else None


def grad_dict(result) -> dict:
    rows = []
    for r in result.rows:
        ref = r.target.ref
        d = {
            "index": ref.index, "tensor": ref.name, "kind": r.target.kind, "node": ref.node, "op_type": ref.op_type,
            "gradient": r.grad, "shape": _static(ref.shape), "dtype": ref.dtype,
            "norm": _num(r.norm), "value_norm": _num(r.value_norm), "ratio": _num(r.ratio),
        }
        if r.stats is not None:
            d.update(r.stats.to_dict())
        if r.check is not None:
            d["check"] = {k: (_num(v) if isinstance(v, float) else v) for k, v in r.check.items()}
        rows.append(d)
    info, gp = result.info, result.plan
    return {
        "schema_version": SCHEMA_VERSION, "onnxprobe_version": __version__, "model": gp.source,
        "loss": {"kind": gp.loss.kind, "output": gp.loss.output, "value": _num(result.loss)},
        "device": info.device, "providers": info.providers, "opt_level": info.opt_level,
        "timing": {"session_s": round(info.session_seconds, 6), "forward_backward_s": round(info.run_seconds, 6)},
        "graph": {"forward_nodes": gp.backward.n_forward, "backward_nodes": gp.backward.n_backward},
        "check": result.check_mode,
        "notes": list(dict.fromkeys(list(result.notes) + list(gp.warnings))),
        "gradients": rows,
        **({"samples": result.samples, "reduce": result.reduce,
            "executor": result.executor.to_dict() if result.executor is not None else {"engine": "local"}}
           if getattr(result, "samples", None) is not None else {}),
    }


def _static(s):
    if s is None:
        return None
    return [d if isinstance(d, int) else None for d in s]


HEADERS = [("#", "right"), ("node", "left"), ("op", "left"), ("tensor", "left"), ("", "left"), ("shape", "left"),
           ("|grad|", "right"), ("|g|/|t|", "right"), ("min", "right"), ("max", "right"), ("mean", "right"),
           ("std", "right"), ("NaN", "right"), ("Inf", "right")]
NODE, TENSOR = 1, 3


def _cells(r: dict) -> list[str]:
    return [
        str(r["index"]) if r["index"] >= 0 else "", r["node"], op(r["op_type"]), r["tensor"],
        KIND.get(r["kind"], "?"), shorten(shape(r["shape"]), 16), num(r["norm"]), num(r["ratio"], 3),
        num(r.get("min")), num(r.get("max")), num(r.get("mean")), num(r.get("std")),
        str(r.get("nan", "-")), str(r.get("inf", "-")),
    ]


def grad_table(result, width: int = 120) -> tuple[Table, Text]:
    d = grad_dict(result)
    checked = d["check"] is not None
    headers = HEADERS + ([("check", "right")] if checked else [])
    rows = []
    for r in d["gradients"]:
        cells = _cells(r)
        if checked:
            c = r.get("check")
            cells.append("-" if c is None else f"{num(c['error'], 2)} {'ok' if c['ok'] else 'FAIL'}")
        rows.append((cells, r))
    need = [max([len(h)] + [len(c[i]) for c, _ in rows]) for i, (h, _) in enumerate(headers)]
    rest = width - sum(w for i, w in enumerate(need) if i not in (NODE, TENSOR)) - 2 * (len(headers) - 1)
    rest = max(rest, 20)
    node_w = min(need[NODE], max(rest * 2 // 5, rest - need[TENSOR]))
    tensor_w = min(need[TENSOR], rest - node_w)
    widths = list(need)
    widths[NODE], widths[TENSOR] = node_w, tensor_w
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0), show_edge=False)
    for (h, just), w in zip(headers, widths):
        t.add_column(h, justify=just, no_wrap=True, overflow="ellipsis", min_width=w, max_width=w)
    bad = failed = 0
    for cells, r in rows:
        nonfinite = bool(r.get("nan") or r.get("inf"))
        bad += nonfinite
        cells[NODE] = shorten(cells[NODE], node_w)
        cells[TENSOR] = shorten(cells[TENSOR], tensor_w)
        fail = checked and r.get("check") is not None and not r["check"]["ok"]
        failed += fail
        t.add_row(*cells, style="bold red" if nonfinite or fail else None)
    n = len(rows)
    footer = Text()
    footer.append(f"{n} gradient{'s' if n != 1 else ''}")
    footer.append(" · ")
    footer.append(f"{bad} with NaN/Inf", style="bold red" if bad else "green")
    if checked:
        footer.append(" · ")
        footer.append(f"check ({d['check']}): {n - failed} ok, {failed} failed", style="bold red" if failed else "green")
    loss = d["loss"]
    footer.append(f" · loss {loss['kind']}({loss['output']}) = {num(loss['value'])}")
    if d.get("samples") is not None:
        footer.append(f" ({d['reduce']} over {d['samples']} samples)")
    footer.append(f" · device {d['device']} · forward+backward {duration(d['timing']['forward_backward_s'])}")
    footer.append(f" · {d['graph']['backward_nodes']} backward nodes")
    footer.append("\nkinds: w weight, i input, a activation; |g|/|t|: gradient norm over the tensor's norm", style="dim")
    return t, footer


def grad_renderables(result, width: int = 120) -> list:
    table, footer = grad_table(result, width)
    return [table, footer]


def export_renderables(gp, path) -> list:
    """What ``grad --export`` wrote, in three lines."""
    bw = gp.backward
    inputs = [i.name for i in bw.model.graph.input if i.name not in {x.name for x in bw.model.graph.initializer}]
    outs = [o.name for o in bw.model.graph.output]
    return [Text(safe(f"wrote {path}: loss {gp.loss.kind}({gp.loss.output}) and {len(bw.grads)} gradients, "
                      f"{bw.n_forward} forward + {bw.n_backward} backward nodes")),
            Text(safe(f"inputs: {', '.join(inputs)}")),
            Text(safe(f"outputs: {', '.join(outs[:8])}{' …' if len(outs) > 8 else ''}"))]
