"""The debugger's commands about running and looking: run, stats, show, save."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from rich.text import Text

from onnxprobe import api
from onnxprobe.errors import UsageError, cli_words
from onnxprobe.fileio import write_file
from onnxprobe.report.format import plural, safe, shape as fmt_shape
from onnxprobe.session import render
from onnxprobe.session.parse import format_slice, parse_selection, parse_slice, pop_all, pop_option
from onnxprobe.session.commands.table import (
    Env, bad, check_file, command, completing, layers_rows, layers_view, no_more, parse_int, pop_json_view, resolve_tensor, tag,
    target_of, with_json, writing,
)
from onnxprobe.text import clean, duration, human_bytes, quote

MAX_OUTPUT_LINES = 8


# -- running and looking ---------------------------------------------------------------------------------


@command("run", "run [--model a|b]", "run the model(s) with the probes; re-runs only what changed (inputs, probes, device)",
         "running and looking")
def cmd_run(env: Env, args: list[str]):
    """Prints what ran and why, and the model outputs. `stats` shows the probes' table.
    Examples: `run`, `run --model b`."""
    label = pop_option(args, "--model", "-m")
    no_more("run", args)
    st = env.state
    out: list = []
    for t in ([st.target(label)] if label else list(st.targets.values())):
        rep = st.run(t)
        label = tag(env, t)
        if not rep.ran:
            out.append(Text(f"{label}up to date: the results for these inputs and this device are cached ({plural(rep.cached, 'tensor')})"))
        else:
            i = rep.info
            timing = f" in {duration(i.run_seconds)}" + (f" (session {duration(i.session_seconds)})" if i and i.session_seconds else "") if i else ""
            cached = f", {rep.cached} cached" if rep.cached else ""
            n = len(rep.computed)
            out.append(Text(f"{label}ran {n} tensor{'s' if n != 1 else ''}{cached} ({rep.reason}){timing} on {st.resolved_device}"))
        names = list(t.probes) + [o for o in t.index.outputs if o not in set(t.probes)]
        bad = [n for n in names if (s := t.results.stats.get(n)) is not None and s.has_nonfinite]
        if bad:
            # the condition that finds what was found: `where nan` found nothing in tensors of Inf alone
            nan = any(t.results.stats[n].nan for n in bad)
            inf = any(t.results.stats[n].inf for n in bad)
            cond = "nonfinite" if nan and inf else "nan" if nan else "inf"
            out.append(Text(safe(f"{label}{len(bad)} probed tensor{'s' if len(bad) != 1 else ''} with NaN/Inf, first {bad[0]} "
                                 f"(node {t.index.refs[bad[0]].node}); `where {cond}` finds the first of all tensors"), style="bold red"))
        outs = [o for o in t.index.outputs if o in t.index.refs]
        for o in outs[:MAX_OUTPUT_LINES]:
            line = Text(f"{label}output ")
            line.append(safe(o), style="bold")
            line.append(f" [{fmt_shape(t.results.shapes.get(o))}]  ")
            line.append_text(render.stats_line(t.results.stats.get(o), compact=True, dtype=t.index.refs[o].dtype))
            out.append(line)
        if len(outs) > MAX_OUTPUT_LINES:
            out.append(Text(f"{label}… and {len(outs) - MAX_OUTPUT_LINES} more outputs (stats lists them)", style="dim"))
        for n in t.results.notes:
            out.append(Text(f"note: {cli_words(n)}", style="dim"))
    return out


@command("stats", "stats [SELECTION] [--model a|b] [--wide] [--columns a,b] [--format table|csv|markdown|json] [--json FILE|-]",
         "the `layers` table of the probes, or of a selection (computed if needed)",
         "running and looking", args=("selection",))
def cmd_stats(env: Env, args: list[str]):
    """--wide, --columns, --format (the table's rows: `--format json` for them as JSON) and --json (the whole
    report, as `layers --json` writes it; `-`: instead of the table) work as on the command line.
    Examples: `stats`, `stats op:Softmax`, `stats --all`, `stats 'conv*' --model b`,
    `stats --columns index,tensor,max --format csv`, `stats --json stats.json`."""
    from onnxprobe.report.console import phrased
    from onnxprobe.report.layers import COLUMNS, STATUS, layers_report, layers_table

    json_path, view = pop_json_view(env, "stats", args, COLUMNS + [STATUS])  # as layers' (status: CSV and JSON rows)
    t = target_of(env, args)
    st = env.state
    if args:
        names = st.select(t, parse_selection(args))
    else:
        names = list(t.probes) + [o for o in t.index.outputs if o in t.index.refs and o not in set(t.probes)]
        names = sorted(names, key=t.index.position.__getitem__)
    if not names:
        return "no probes (probe add SELECTION, or stats SELECTION)"
    st.ensure_stats(t, names)
    table, footer = layers_table(layers_view(env, t, names))
    if len(st.targets) > 1:
        footer = Text.assemble(Text(safe(f"[{t.label}] {t.name} · ")), footer)
    r = t.results

    def report() -> dict:  # as layers --json: the model, how it ran, the notes and every tensor
        info = r.info or api.RunInfo(st.resolved_device, [], st.opt_level, 0.0, 0.0)
        return layers_report(layers_rows(t, names), {n: r.shapes[n] for n in names if n in r.shapes}, info,
                             t.model.source, list(dict.fromkeys(r.notes + list(t.model.warnings))))

    return with_json("stats", report, json_path, [table, phrased(footer, env.width)], view)  # broken between phrases, as on the command line


@command("show", "show TENSOR [SLICE] [--bins N] [--log] [--full] [--model a|b]",
         "a tensor's statistics, a numpy-style slice of its values and a histogram", "running and looking",
         args=("tensor", "slice"))
def cmd_show(env: Env, args: list[str]):
    """SLICE is numpy-style: `[0]`, `[0, :3, 5:10:2]`, `[..., -1]`. TENSOR may also be a node name
    (its first output); without TENSOR, the output of the node at the cursor. Long values are
    summarised with '...' as numpy does; --full prints every value. --log draws the histogram's bars on
    a log scale (for skewed values such as a softmax).
    Examples: `show conv1_out`, `show conv1_out [0, :3] --bins 32`, `show probs --log`, `show --full`."""
    t = target_of(env, args, env.state.current)
    full = pop_option(args, "--full", flag=True)
    log = bool(pop_option(args, "--log", flag=True))
    bins = pop_option(args, "--bins")
    nbins = parse_int("show", bins, "--bins") if bins else 16
    if not 1 <= nbins <= 200:
        raise bad("show", "--bins must be between 1 and 200")
    if not args:
        if t.cursor is None:
            raise bad("show", completing("which tensor? (Tab completes names)", "which tensor? give its name, or goto a node"))
        outs = [o for o in t.index.sites[t.cursor].node.output if o]
        if not outs:
            raise bad("show", "the node at the cursor has no output")
        args = [outs[0]]
    name, note = resolve_tensor(t, args[0])
    index = parse_slice(" ".join(args[1:])) if len(args) > 1 else None
    value = env.state.ensure_values(t, [name])[name]
    if index is not None:
        try:
            part = value[index]
        except (IndexError, TypeError, ValueError) as e:
            # an integer past int64 reads to numpy as no integer at all ('only integers, slices ... are valid indices')
            huge = next((v for v in index if type(v) is int and not -2**63 <= v < 2**63), None)
            why = f"index {huge} is out of bounds" if huge is not None else str(e)
            raise UsageError(f"slice {format_slice(index)} of a tensor of shape [{fmt_shape(value.shape)}]: {why}") from None
    else:
        part = value
    ref = t.index.refs[name]
    kind = t.index.kinds[name]
    head = Text(tag(env, t))
    head.append(safe(name), style="bold")
    origin = {"input": "graph input", "initializer": "weight"}.get(kind, f"from node {ref.node} ({ref.op_type})")
    if kind == "initializer" and name in t.index.sparse:  # shown dense, zeros where it stores no value
        origin = f"sparse weight ({int(np.prod(t.index.sparse[name].values.dims))} of {value.size} values stored, shown dense)"
    dtype = "string" if value.dtype == object and ref.dtype == "string" else value.dtype  # onnxruntime's str objects
    if value.dtype.kind == "f" and ref.dtype and str(ref.dtype) != str(value.dtype):  # bfloat16, float8: numpy has none
        dtype = f"{ref.dtype} (read back as {value.dtype})"
    head.append(safe(f"  {origin} · {dtype} [{fmt_shape(value.shape)}]"), style="dim")
    out: list = [head]
    if note:
        out.append(Text(safe(note), style="dim"))
    numeric = value.dtype.kind in "biuf"
    out.append(render.stats_line(api.TensorStats.from_array(value) if numeric else None, dtype=value.dtype))
    label = "values" + (f"{format_slice(index)} → [{fmt_shape(np.shape(part))}]" if index is not None else "")
    out.append(Text(label + ":", style="bold"))
    threshold = sys.maxsize if full else (256 if index is not None else 64)
    shown = render.values(part, max(env.width - 2, 40), threshold) if np.ndim(part) else _one(np.asarray(part)[()])
    out.append(Text(shown))
    if numeric and value.size:
        out.append(Text("histogram" + (" (whole tensor)" if index is not None else "") + ":", style="bold"))
        out.append(render.histogram(value, bins=nbins, width=50, log=log, room=env.width, asked=bool(bins)))
    return out


def _one(v) -> str:
    """One element as numpy prints its type's value, the shortest text that reads back to it (float32 0.1
    is '0.1', not Python's float64 '0.10000000149011612'); a string or bytes value as its repr."""
    return str(v) if isinstance(v, np.generic) and v.dtype.kind in "biufc" else repr(v.item() if isinstance(v, np.generic) else v)


@command("save", "save TENSOR|all|html FILE [--model a|b] [--columns a,b]",
         "write a tensor (.npy, .npz or .pb), every probed tensor (all: .npz), or the HTML report (html)",
         "running and looking", args=("savewhat", "file"))
def cmd_save(env: Env, args: list[str]):
    """`save all acts.npz` writes the probes and model outputs, keyed by tensor name (like `layers --save`).
    `save html report.html` writes the self-contained HTML report (as `--html` does): of the last `diff`
    when there are two models and one was run on the current inputs (a `match` does not replace it), else
    of the probes' statistics (`stats`) of the model; its line says which. Its --columns, as `--html` with
    `--columns`: the page keeps every column and adds those asked for that the table shows only when asked.
    Examples: `save conv1_out c.npy`, `save all acts.npz`, `save html report.html --columns tensor,rmse,problem`."""
    from onnxprobe.report.table import column_keys

    chosen = "--model" in args or "-m" in args
    given = pop_all(args, "--columns")  # repeated or comma-separated, as on the command line
    columns = column_keys(",".join(given)) if given else None
    t = target_of(env, args)
    if len(args) > 2:  # a second file: said, not the usage of one with nothing given
        raise bad("save", f"one file: {quote(args[2])} is more than save takes (give what to save, then its file)")
    if len(args) != 2:
        raise bad("save", "give what to save and a file")
    what, path = args
    check_file(env, "save", path)
    suffix = Path(path).suffix.lower()
    if what == "html" and (suffix in (".html", ".htm") or "html" not in t.index.refs):
        from onnxprobe.session.commands.pictures import save_html

        with writing("save"):
            return save_html(env, t, path, diff=not chosen, columns=columns)
    if columns:
        raise bad("save", "--columns is for the HTML report (save html FILE --columns a,b)")
    if what == "all":
        if suffix != ".npz":
            raise bad("save", "save all writes an .npz file")
        names = list(t.probes) + [o for o in t.index.outputs if o in t.index.refs and o not in set(t.probes)]
        skipped = [n for n in names if n in t.index.no_tensors]  # a ZipMap's sequence: as layers --save skips it
        names = [n for n in names if n not in t.index.no_tensors]
        saved = {"tensors": 0, "bytes": 0}

        def runs():  # written as they come, as layers --save does: at most --max-memory of them alive at once
            for part in env.state.iter_values(t, names, skip_not_run=True):  # as layers --save: what ran
                saved["tensors"] += len(part)
                saved["bytes"] += sum(a.nbytes for a in part.values())
                yield part
                del part

        with writing("save"):
            api.save_npz(runs(), path)
        left = len(names) - saved["tensors"]
        idle = f"; {left} that did not run on these inputs (If branches not taken, loops of no iteration) left out" if left else ""
        idle += "".join(f"; {n} left out: {t.index.no_tensors[n]}, not a tensor" for n in skipped)
        return f"saved {plural(saved['tensors'], 'tensor')} ({human_bytes(saved['bytes'])}) to {path}{idle}"
    name, _ = resolve_tensor(t, what)
    value = env.state.ensure_values(t, [name])[name]
    kind = t.index.refs[name].dtype
    narrow = _narrow(kind)  # read back widened to float32: said so, and written in its own type to a .pb
    if suffix in (".npy", "") and value.dtype == object:  # onnxruntime's str objects: numpy unicode, as --save
        value = np.array(value.tolist(), dtype=np.str_)  # writes them (an object array np.save refused unpickled)
    if suffix == ".npz":
        with writing("save"):
            api.save_npz({name: value}, path)
    elif suffix in (".npy", ""):
        path = path if suffix or (Path(path).exists() and not Path(path).is_file()) else path + ".npy"
        with writing("save"):
            write_file(path, lambda f: np.save(f, value, allow_pickle=False))
    elif suffix == ".pb":
        from onnx import numpy_helper

        if narrow is not None and value.dtype == np.float32:  # read back widened: a TensorProto of its type again,
            value = value.astype(narrow)  # exactly (bfloat16, float8, int4)
        data = numpy_helper.from_array(value, name).SerializeToString()
        with writing("save"):
            write_file(path, lambda f: f.write(data))
    else:
        raise bad("save", f"unknown file type {suffix!r}; use .npy, .npz or .pb")
    said = (f"{kind} as float32" if narrow is not None and value.dtype == np.float32 else
            "string" if kind == "string" else kind if narrow is not None else value.dtype)
    return f"saved {clean(name)} [{fmt_shape(value.shape)}] {said} to {path}"


def _narrow(dtype: str | None):
    """ml_dtypes' type of an ONNX type numpy lacks (bfloat16, float8_e4m3fn, int4...), which onnxprobe reads back
    widened to float32; None for the others."""
    if not dtype or dtype in ("float16", "float32", "float64") or not dtype.startswith(("bfloat", "float", "int", "uint")):
        return None
    import ml_dtypes

    got = getattr(ml_dtypes, dtype, None)
    return got if isinstance(got, type) else None
