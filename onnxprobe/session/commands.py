"""The debugger's commands, all in one table (``COMMANDS``). Each is one small function
``fn(env, args) -> renderables`` with a usage line, one line of help, and the kinds of argument it takes
(which the REPL's Tab completion reads). Commands return what to show (strings, Rich Text/Table) and
never print; a bad command or argument raises a one-line ``UsageError``; ``quit`` raises ``Quit``.

``execute(env, line)`` runs one line. The interactive front end (``session.repl``) and ``--script``
mode both go through it, so a script exercises exactly what a user types.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
from rich.table import Table
from rich.text import Text

from onnxprobe import api
from onnxprobe.errors import UsageError
from onnxprobe.report.format import shape as fmt_shape, shorten
from onnxprobe.session import render
from onnxprobe.session.parse import describe_selection, format_slice, parse_selection, parse_slice, pop_option, split
from onnxprobe.session.state import State, Target, session_notes
from onnxprobe.stats.conditions import EXAMPLES, parse_condition
from onnxprobe.stats.tensor_stats import TensorStats


class Quit(Exception):
    """Raised by ``quit``: the front end ends the session."""


@dataclass
class Env:
    state: State
    width: int = 120


@dataclass(frozen=True)
class Command:
    name: str
    fn: Callable[[Env, list[str]], object]
    usage: str
    help: str
    group: str
    args: tuple[str, ...] = ()  # argument kinds for completion, by position; the last one repeats
    aliases: tuple[str, ...] = ()

    @property
    def short_usage(self) -> str:
        """The usage without its options: ``show TENSOR [SLICE] …``."""
        cut = self.usage.find(" [--")
        return self.usage if cut < 0 else self.usage[:cut] + " …"

    @property
    def details(self) -> str:
        import inspect

        return inspect.cleandoc(self.fn.__doc__ or "")


COMMANDS: dict[str, Command] = {}
ALIASES: dict[str, str] = {}
GROUPS = ("model", "inputs and probes", "running and looking", "finding and walking", "two models and gradients", "session")


def command(name: str, usage: str, help: str, group: str, args: tuple[str, ...] = (), aliases: tuple[str, ...] = ()):
    def register(fn):
        COMMANDS[name] = Command(name, fn, usage, help, group, args, aliases)
        for a in aliases:
            ALIASES[a] = name
        return fn

    return register


def lookup(name: str) -> Command:
    key = ALIASES.get(name, name)
    if key not in COMMANDS:
        close = difflib.get_close_matches(name, list(COMMANDS) + list(ALIASES), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UsageError(f"unknown command {name!r} (try help){hint}")
    return COMMANDS[key]


def execute(env: Env, line: str) -> list:
    """Run one command line; returns the renderables to show. Blank lines and ``# comments`` do nothing."""
    text = line.strip()
    if not text or text.startswith("#"):
        return []
    words = split(text)
    if not words:
        return []
    cmd = lookup(words[0])
    out = cmd.fn(env, words[1:])
    if out is None:
        return []
    if isinstance(out, (list, tuple)):
        return [Text(o) if isinstance(o, str) else o for o in out if o is not None]
    return [Text(out) if isinstance(out, str) else out]


# -- helpers ---------------------------------------------------------------------------------------------


def _bad(cmd: str, msg: str) -> UsageError:
    return UsageError(f"{cmd}: {msg} (usage: {COMMANDS[cmd].usage})")


def _no_more(cmd: str, args: list[str]) -> None:
    if args:
        raise _bad(cmd, f"unexpected argument {args[0]!r}")


def _target(env: Env, args: list[str], default: str | None = None) -> Target:
    return env.state.target(pop_option(args, "--model", "-m") or default)


def _tag(env: Env, t: Target) -> str:
    return f"[{t.label}] " if len(env.state.targets) > 1 else ""


def _fresh(env: Env, t: Target) -> bool:
    """Whether the cached results belong to the current inputs and device."""
    return t.results.key == env.state.run_key(t)


def _bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def _ms(s: float) -> str:
    return f"{s * 1000:.3g} ms" if s < 1 else f"{s:.3g} s"


def resolve_tensor(t: Target, text: str) -> tuple[str, str | None]:
    """A tensor name; a node name or #index stands for the node's first output. Returns (name, note)."""
    idx = t.index
    if text in idx.refs:
        return text, None
    site = None
    if text in idx.by_name:
        site = idx.by_name[text]
    elif text.startswith("#") and text[1:].isdigit():
        site = idx.node(text)
    if site is not None:
        outs = [o for o in site.node.output if o in idx.refs]
        if outs:
            return outs[0], f"node {site.name}: showing its output {outs[0]}" if len(outs) > 1 else None
    close = difflib.get_close_matches(text, list(idx.refs), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else " (Tab completes names)"
    raise UsageError(f"no tensor named {text!r}{hint}")


def _link(t: Target, name: str, role: str) -> str:
    idx = t.index
    kind = idx.kinds.get(name, "outer")
    if role == "in":
        if kind == "input":
            return "graph input"
        if kind == "initializer":
            return "weight"
        if kind == "outer":
            return "outer scope"
        r = idx.refs[name]
        return f"← {r.node}"
    cons = [s.name for s in idx.consumers.get(name, ())]
    out = "model output" if name in idx.outputs else ""
    if cons:
        more = f" +{len(cons) - 2}" if len(cons) > 2 else ""
        out = (out + " · " if out else "") + "→ " + ", ".join(cons[:2]) + more
    return out or "(unused)"


def _row(env: Env, t: Target, role: str, name: str, direction: str) -> dict:
    fresh = _fresh(env, t)
    ref = t.index.refs.get(name)
    shp = t.results.shapes.get(name) if fresh else None
    return {
        "role": role, "name": name,
        "shape": shp if shp is not None else (ref.shape if ref else None), "known": shp is not None,
        "dtype": ref.dtype if ref else None,
        "stats": t.results.stats.get(name) if fresh else None,
        "link": _link(t, name, direction),
    }


def node_view(env: Env, t: Target, index: int, title: str | None = None) -> list:
    info = t.index.node_info(index)
    head = Text()
    head.append(_tag(env, t))
    head.append(f"#{info.index}/{len(t.index.sites) - 1} ", style="dim")
    head.append(info.name, style="bold")
    head.append(f"  {info.op_type}", style="cyan")
    if info.domain not in ("", "ai.onnx"):
        head.append(f" ({info.domain})", style="dim")
    if info.scope:
        head.append(f"  in {'/'.join(info.scope)}", style="dim")
    if title:
        head = Text.assemble(Text(title + "\n"), head)
    rows = []
    for i, ti in enumerate(info.inputs):
        if ti is None:
            rows.append({"role": f"in {i}", "name": "(omitted)", "shape": None, "dtype": "", "stats": None, "link": ""})
        else:
            rows.append(_row(env, t, f"in {i}", ti.ref.name, "in"))
    for i, ti in enumerate(info.outputs):
        if ti is not None:
            rows.append(_row(env, t, f"out {i}", ti.ref.name, "out"))
    out: list = [head, render.tensor_table(rows, env.width)]
    if info.attributes:
        attrs = Text("attributes: ", style="dim")
        for i, (k, v) in enumerate(info.attributes):
            if i:
                attrs.append(", ")
            attrs.append(f"{k}=", style="dim")
            attrs.append(v)
        out.append(attrs)
    return out


def _display_ref(t: Target, name: str):
    ref = t.index.refs[name]
    kind = t.index.kinds.get(name)
    if kind == "input":
        return dataclasses.replace(ref, node="(input)")
    if kind == "initializer":
        return dataclasses.replace(ref, node="(weight)")
    return ref


def _layers_view(env: Env, t: Target, names: list[str]):
    from onnxprobe.api import LayersResult
    from onnxprobe.types import Probe, ProbePlan, RunInfo

    r = t.results
    info = r.info or RunInfo(device=env.state.resolved_device, providers=[], opt_level=env.state.opt_level,
                             session_seconds=0.0, run_seconds=0.0)
    plan = ProbePlan(None, [Probe(ref=_display_ref(t, n)) for n in names], t.model.source, [])
    return LayersResult(plan=plan, info=info, stats={n: r.stats.get(n) for n in names if r.stats.get(n) is not None},
                        shapes={n: r.shapes[n] for n in names if n in r.shapes}, notes=[])


def _parse_int(cmd: str, text: str, what: str = "N") -> int:
    try:
        return int(text)
    except ValueError:
        raise _bad(cmd, f"{what} must be an integer, got {text!r}") from None


# -- the model -------------------------------------------------------------------------------------------


@command("info", "info [--model a|b]", "the model: format, opsets, ops, inputs, outputs, weights; the session's settings", "model")
def cmd_info(env: Env, args: list[str]):
    """Without --model, every loaded model is described."""
    label = pop_option(args, "--model", "-m")
    _no_more("info", args)
    st = env.state
    targets = [st.target(label)] if label else list(st.targets.values())
    out: list = []
    for t in targets:
        d = api.model_info(t.model)
        ops = ", ".join(f"{k} ×{v}" for k, v in list(d["ops"].items())[:12]) + (" …" if len(d["ops"]) > 12 else "")

        feed = st.feed(t)[0]
        runtime = t.results.shapes if _fresh(env, t) else {}

        def io(items, inputs: bool) -> Text:
            x = Text()
            for i, it in enumerate(items):
                if i:
                    x.append("\n")
                x.append(it["name"], style="bold")
                declared = fmt_shape(it["shape"])
                actual = fmt_shape(feed[it["name"]].shape) if inputs and it["name"] in feed else (
                    fmt_shape(runtime[it["name"]]) if it["name"] in runtime else None)
                x.append(f" {it['dtype'] or '?'} [{actual or declared}]")
                if actual and actual != declared:
                    x.append(f" (declared [{declared}])", style="dim")
                if inputs:
                    x.append(f"  ← {st.inputs.source(it['name'])}", style="dim")
            return x

        pairs = [
            ("model", f"{d['path']}" + (f"   (--model {t.label})" if len(st.targets) > 1 else "")),
            ("producer", d["producer"] or "-"),
            ("format", f"IR {d['ir_version']} · " + ", ".join(f"{k} {v}" for k, v in d["opsets"].items())),
            ("graph", f"{d['nodes']} nodes" + (f" ({d['nodes_in_subgraphs']} in subgraphs)" if d["nodes_in_subgraphs"] else "")
             + f" · {d['initializers']} weight{'s' if d['initializers'] != 1 else ''} ({_bytes(d['initializer_bytes'])})"),
            ("ops", ops or "-"),
            ("inputs", io(d["inputs"], True)),
            ("outputs", io(d["outputs"], False)),
            ("session", f"device {st.device}" + (f" ({st.resolved_device})" if st.device == "auto" else "")
             + f" · opt-level {st.opt_level} · seed {st.inputs.seed} · {len(t.probes)} probes · "
             + f"{len(t.results.stats)} tensors cached"),
        ]
        for w in d["warnings"]:
            pairs.append(("note", w))
        out.append(render.kv_table(pairs))
    return out


@command("nodes", "nodes [GLOB|op:TYPE] [--model a|b]", "list nodes in topological order, by name glob or op type", "model",
         args=("nodepattern",))
def cmd_nodes(env: Env, args: list[str]):
    """Examples: `nodes`, `nodes 'conv*'`, `nodes op:Softmax`, `nodes op:Q*`."""
    t = _target(env, args)
    if len(args) > 1:
        raise _bad("nodes", "give one GLOB or op:TYPE")
    sites = t.index.find_nodes(args[0] if args else None)
    if not sites:
        raise UsageError(f"nodes: nothing matches {args[0]!r} (a name glob such as 'conv*', or op:TYPE)")
    rows = []
    for s in sites:
        ins = ", ".join(i for i in s.node.input if i)
        outs = ", ".join(o for o in s.node.output if o)
        rows.append([str(s.index), ("/".join(s.scope) + "/" if s.scope else "") + s.name, s.node.op_type, ins, outs])
    need = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(["#", "node", "op", "inputs", "outputs"])]
    rest = max(env.width - need[0] - need[2] - 8, 30)
    node_w = min(need[1], rest * 2 // 5)
    in_w = min(need[3], max((rest - node_w) // 2, rest - node_w - need[4]))
    out_w = max(min(need[4], rest - node_w - in_w), 6)
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), show_edge=False, header_style="bold")
    for h, w, j in (("#", need[0], "right"), ("node", node_w, "left"), ("op", need[2], "left"), ("inputs", in_w, "left"), ("outputs", out_w, "left")):
        table.add_column(h, justify=j, no_wrap=True, overflow="ellipsis", min_width=w, max_width=w)
    for r in rows:
        table.add_row(r[0], shorten(r[1], node_w), r[2], shorten(r[3], in_w), shorten(r[4], out_w))
    foot = Text(f"{_tag(env, t)}{len(sites)} of {len(t.index.sites)} nodes", style="dim")
    return [table, foot]


@command("node", "node [NAME|#INDEX] [--model a|b]", "one node: inputs, outputs, attributes, shapes, producers and consumers", "model",
         args=("node",))
def cmd_node(env: Env, args: list[str]):
    """Without a name: the node at the cursor (see goto/step/back). Statistics appear once computed
    (run, stats, goto)."""
    t = _target(env, args, env.state.current)
    if len(args) > 1:
        raise _bad("node", "give one node name")
    if args:
        i = node_index(t, args[0])
    elif t.cursor is not None:
        i = t.cursor
    else:
        raise _bad("node", "which node? give a name (Tab completes) or move the cursor with goto")
    return node_view(env, t, i)


# -- inputs and probes -----------------------------------------------------------------------------------


def _inputs_table(env: Env, t: Target) -> list:
    feed, _, notes = env.state.feed(t)
    rows = []
    for s in env.state.specs(t):
        v = feed[s.name]
        st = TensorStats.from_array(v) if v.dtype.kind in "biuf" else None
        rows.append({"role": "", "name": s.name, "shape": tuple(v.shape), "known": True, "dtype": str(v.dtype),
                     "stats": st, "link": env.state.inputs.source(s.name)})
    table = render.tensor_table(rows, env.width)
    table.columns[0].header = ""
    table.columns[-1].header = "source"
    out: list = [table]
    out += [Text(f"note: {n}", style="dim") for n in session_notes(notes)]
    return out


@command("inputs", "inputs [FILE.npz] [--model a|b]", "list the inputs and where they come from; or load them all from an .npz", "inputs and probes",
         args=("file",))
def cmd_inputs(env: Env, args: list[str]):
    """`inputs batch.npz` sets every input found in the file (keyed by input name)."""
    t = _target(env, args)
    if len(args) > 1:
        raise _bad("inputs", "give at most one .npz file")
    out: list = []
    if args:
        from onnxprobe.runtime.feeds import read_npz

        arrays = read_npz(args[0])
        env.state.set_all_inputs(arrays)
        out.append(f"inputs from {args[0]}: {', '.join(arrays)}")
    return out + _inputs_table(env, t)


@command("input", "input NAME random [DIMS]|FILE|VALUE", "set one input: seeded random data (optionally of shape DIMS), a .npy/.pb file, or a value",
         "inputs and probes", args=("input", "inputhow"))
def cmd_input(env: Env, args: list[str]):
    """Examples: `input x random`, `input x random 1x3x48x320`, `input x x.npy`, `input sr 16000`,
    `input ids [[1, 2, 3]]`. Without a value: shows the input."""
    st = env.state
    if not args:
        raise _bad("input", "which input? (`inputs` lists them)")
    name, rest = args[0], args[1:]
    shape = None
    if rest:
        if rest[0] == "random":
            if len(rest) > 2:
                raise _bad("input", "random takes at most one DIMS, e.g. 1x3x224x224")
            if len(rest) == 2:
                from onnxprobe.runtime.feeds import parse_shape_overrides

                shape = parse_shape_overrides([f"{name}={rest[1]}"])[name]
            st.set_input(name, "random", shape)
        else:
            st.set_input(name, " ".join(rest))
    feed, _, _ = st.feed(st.a if name in st.feed(st.a)[0] else st.target("b"))
    if name not in feed:
        raise UsageError(f"unknown input name {name!r}")
    v = feed[name]
    line = Text()
    line.append(f"input {name}", style="bold")
    line.append(f" ← {st.inputs.source(name)}: {v.dtype} [{fmt_shape(v.shape)}]  ")
    line.append_text(render.stats_line(TensorStats.from_array(v) if v.dtype.kind in "biuf" else None, compact=True))
    notes = [n for t in st.targets.values() for n in session_notes(st.feed(t)[2]) if n.startswith(f"input {name}:")]
    return [line] + [Text(f"note: {n}", style="dim") for n in dict.fromkeys(notes)]


@command("seed", "seed [N]", "the seed of the random inputs (without N: show it)", "inputs and probes")
def cmd_seed(env: Env, args: list[str]):
    st = env.state
    if len(args) > 1:
        raise _bad("seed", "give one integer")
    if args:
        st.set_seed(_parse_int("seed", args[0]))
    rnd = [s.name for s in st.specs(st.a) if s.name not in st.inputs.files and s.name not in st.inputs.arrays]
    return f"seed {st.inputs.seed}" + (f" (random inputs: {', '.join(rnd)})" if rnd else " (no random inputs)")


@command("probe", "probe add|rm|list|clear [SELECTION] [--model a|b]",
         "choose the tensors run/stats/save look at, with the selection language of `layers`", "inputs and probes",
         args=("probesub", "selection"))
def cmd_probe(env: Env, args: list[str]):
    """SELECTION: --op TYPE (or op:TYPE), --name GLOB (or just GLOB), --all (or all), --range A:B
    (or range:A:B), --include-constants. The session starts with the default probes of `layers`
    (Conv/Gemm/MatMul/attention outputs and the model outputs), or what --op/--name/--all chose."""
    t = _target(env, args)
    sub = args[0] if args else "list"
    rest = args[1:]
    st = env.state
    if sub == "add":
        if not rest:
            raise _bad("probe", "probe add needs a selection, e.g. `probe add op:Relu` or `probe add 'conv*'`")
        sel = parse_selection(rest)
        new = st.probe_add(t, sel)
        return f"{_tag(env, t)}added {len(new)} probe{'s' if len(new) != 1 else ''} for {describe_selection(sel)} ({len(t.probes)} in all)"
    if sub in ("rm", "remove", "del"):
        if not rest:
            raise _bad("probe", "probe rm needs a selection")
        gone = st.probe_rm(t, parse_selection(rest))
        return f"{_tag(env, t)}removed {len(gone)} probe{'s' if len(gone) != 1 else ''} ({len(t.probes)} left)"
    if sub == "clear":
        _no_more("probe", rest)
        n = st.probe_clear(t)
        return f"{_tag(env, t)}removed all {n} probes (run and stats now cover the model outputs only)"
    if sub == "list":
        if rest:
            names = [n for n in st.select(t, parse_selection(rest)) if n in set(t.probes)]
        else:
            names = list(t.probes)
        if not names:
            return f"{_tag(env, t)}no probes (probe add SELECTION)"
        table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), header_style="bold")
        for h in ("#", "node", "op", "tensor", "shape", "dtype"):
            table.add_column(h, justify="right" if h == "#" else "left", no_wrap=True, overflow="ellipsis")
        w = max(env.width // 3, 20)
        for n in names:
            r = _display_ref(t, n)
            table.add_row(str(r.index), shorten(r.node, w), r.op_type, shorten(n, w), fmt_shape(r.shape), r.dtype or "?")
        return [table, Text(f"{_tag(env, t)}{len(names)} probes", style="dim")]
    raise _bad("probe", f"unknown subcommand {sub!r}; use add, rm, list or clear")


MAX_OUTPUT_LINES = 8


# -- running and looking ---------------------------------------------------------------------------------


@command("run", "run [--model a|b]", "run the model(s) with the probes; re-runs only what changed (inputs, probes, device)",
         "running and looking")
def cmd_run(env: Env, args: list[str]):
    """Prints what ran and why, and the model outputs. `stats` shows the probes' table."""
    label = pop_option(args, "--model", "-m")
    _no_more("run", args)
    st = env.state
    out: list = []
    for t in ([st.target(label)] if label else list(st.targets.values())):
        rep = st.run(t)
        tag = _tag(env, t)
        if not rep.ran:
            out.append(Text(f"{tag}up to date: the results for these inputs and this device are cached ({rep.cached} tensors)"))
        else:
            i = rep.info
            timing = f" in {_ms(i.run_seconds)}" + (f" (session {_ms(i.session_seconds)})" if i and i.session_seconds else "") if i else ""
            cached = f", {rep.cached} cached" if rep.cached else ""
            n = len(rep.computed)
            out.append(Text(f"{tag}ran {n} tensor{'s' if n != 1 else ''}{cached} ({rep.reason}){timing} on {st.resolved_device}"))
        names = list(t.probes) + [o for o in t.index.outputs if o not in set(t.probes)]
        bad = [n for n in names if (s := t.results.stats.get(n)) is not None and s.has_nonfinite]
        if bad:
            out.append(Text(f"{tag}{len(bad)} probed tensor{'s' if len(bad) != 1 else ''} with NaN/Inf, first {bad[0]} "
                            f"(node {t.index.refs[bad[0]].node}); `where nan` finds the first of all tensors", style="bold red"))
        outs = [o for o in t.index.outputs if o in t.index.refs]
        for o in outs[:MAX_OUTPUT_LINES]:
            line = Text(f"{tag}output ")
            line.append(o, style="bold")
            line.append(f" [{fmt_shape(t.results.shapes.get(o))}]  ")
            line.append_text(render.stats_line(t.results.stats.get(o), compact=True))
            out.append(line)
        if len(outs) > MAX_OUTPUT_LINES:
            out.append(Text(f"{tag}… and {len(outs) - MAX_OUTPUT_LINES} more outputs (stats lists them)", style="dim"))
        for n in t.results.notes:
            out.append(Text(f"note: {n}", style="dim"))
    return out


@command("stats", "stats [SELECTION] [--model a|b]", "the `layers` table of the probes, or of a selection (computed if needed)",
         "running and looking", args=("selection",))
def cmd_stats(env: Env, args: list[str]):
    """Examples: `stats`, `stats op:Softmax`, `stats --all`, `stats 'conv*' --model b`."""
    from onnxprobe.report.layers import layers_table

    t = _target(env, args)
    st = env.state
    if args:
        names = st.select(t, parse_selection(args))
    else:
        names = list(t.probes) + [o for o in t.index.outputs if o in t.index.refs and o not in set(t.probes)]
        names = sorted(names, key=t.index.position.__getitem__)
    if not names:
        return "no probes (probe add SELECTION, or stats SELECTION)"
    st.ensure_stats(t, names)
    table, footer = layers_table(_layers_view(env, t, names), env.width)
    if len(st.targets) > 1:
        footer = Text.assemble(Text(f"[{t.label}] {t.name} · "), footer)
    return [table, footer]


@command("show", "show TENSOR [SLICE] [--bins N] [--log] [--full] [--model a|b]",
         "a tensor's statistics, a numpy-style slice of its values and a histogram", "running and looking",
         args=("tensor", "slice"))
def cmd_show(env: Env, args: list[str]):
    """SLICE is numpy-style: `[0]`, `[0, :3, 5:10:2]`, `[..., -1]`. TENSOR may also be a node name
    (its first output); without TENSOR, the output of the node at the cursor. Long values are
    summarised with '...' as numpy does; --full prints every value. --log draws the histogram's bars on
    a log scale (for skewed values such as a softmax)."""
    t = _target(env, args, env.state.current)
    full = pop_option(args, "--full", flag=True)
    log = bool(pop_option(args, "--log", flag=True))
    bins = pop_option(args, "--bins")
    nbins = _parse_int("show", bins, "--bins") if bins else 16
    if not 1 <= nbins <= 200:
        raise _bad("show", "--bins must be between 1 and 200")
    if not args:
        if t.cursor is None:
            raise _bad("show", "which tensor? (Tab completes names)")
        outs = [o for o in t.index.sites[t.cursor].node.output if o]
        if not outs:
            raise _bad("show", "the node at the cursor has no output")
        args = [outs[0]]
    name, note = resolve_tensor(t, args[0])
    index = parse_slice(" ".join(args[1:])) if len(args) > 1 else None
    value = env.state.ensure_values(t, [name])[name]
    if index is not None:
        try:
            part = value[index]
        except (IndexError, TypeError, ValueError) as e:
            raise UsageError(f"slice {format_slice(index)} of a tensor of shape [{fmt_shape(value.shape)}]: {e}") from None
    else:
        part = value
    ref = t.index.refs[name]
    kind = t.index.kinds[name]
    head = Text(_tag(env, t))
    head.append(name, style="bold")
    origin = {"input": "graph input", "initializer": "weight"}.get(kind, f"from node {ref.node} ({ref.op_type})")
    head.append(f"  {origin} · {value.dtype} [{fmt_shape(value.shape)}]", style="dim")
    out: list = [head]
    if note:
        out.append(Text(note, style="dim"))
    numeric = value.dtype.kind in "biuf"
    out.append(render.stats_line(TensorStats.from_array(value) if numeric else None))
    label = "values" + (f"{format_slice(index)} → [{fmt_shape(np.shape(part))}]" if index is not None else "")
    out.append(Text(label + ":", style="bold"))
    threshold = sys.maxsize if full else (256 if index is not None else 64)
    with np.printoptions(threshold=threshold, edgeitems=3, linewidth=max(env.width - 2, 40), precision=5):
        out.append(Text(np.array2string(np.asarray(part), separator=" ") if np.ndim(part) else repr(np.asarray(part).item())))
    if numeric and value.size:
        out.append(Text("histogram" + (" (whole tensor)" if index is not None else "") + ":", style="bold"))
        out.append(render.histogram(value, bins=nbins, width=max(min(env.width - 40, 50), 10), log=log))
    return out


@command("save", "save TENSOR|all FILE [--model a|b]", "write a tensor (.npy, .npz or .pb), or every probed tensor (all: .npz)",
         "running and looking", args=("savewhat", "file"))
def cmd_save(env: Env, args: list[str]):
    """`save all acts.npz` writes the probes and model outputs, keyed by tensor name (like `layers --save`)."""
    from onnxprobe.report import io as report_io

    t = _target(env, args)
    if len(args) != 2:
        raise _bad("save", "give what to save and a file")
    what, path = args
    for m in env.state.targets.values():
        report_io.check_writable(path, m.model.source)
    suffix = Path(path).suffix.lower()
    if what == "all":
        if suffix != ".npz":
            raise _bad("save", "save all writes an .npz file")
        names = list(t.probes) + [o for o in t.index.outputs if o in t.index.refs and o not in set(t.probes)]
        arrays = env.state.ensure_values(t, names)
        _atomic(path, lambda f: np.savez(f, **arrays))
        total = sum(a.nbytes for a in arrays.values())
        return f"saved {len(arrays)} tensors ({_bytes(total)}) to {path}"
    name, _ = resolve_tensor(t, what)
    value = env.state.ensure_values(t, [name])[name]
    if suffix == ".npz":
        _atomic(path, lambda f: np.savez(f, **{name: value}))
    elif suffix in (".npy", ""):
        path = path if suffix or (Path(path).exists() and not Path(path).is_file()) else path + ".npy"
        _atomic(path, lambda f: np.save(f, value, allow_pickle=False))
    elif suffix == ".pb":
        from onnx import numpy_helper

        data = numpy_helper.from_array(value, name).SerializeToString()
        _atomic(path, lambda f: f.write(data))
    else:
        raise _bad("save", f"unknown file type {suffix!r}; use .npy, .npz or .pb")
    return f"saved {name} [{fmt_shape(value.shape)}] {value.dtype} to {path}"


def _atomic(path: str, write) -> None:
    """Write through a temporary file and a rename, so a failure never leaves half a file; an existing
    non-regular file (/dev/null, a pipe) is written in place, never replaced."""
    import tempfile

    p = Path(path)
    if p.exists() and not p.is_file():
        with open(p, "wb") as f:
            write(f)
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent if str(p.parent) else ".")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; a saved tensor is an ordinary file
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# -- finding and walking ---------------------------------------------------------------------------------


@command("where", "where nan|inf|nonfinite|STAT<X|STAT>X [--next] [--weights] [--model a|b]",
         "the first tensor, in topological order, where a condition holds, and the node that produced it",
         "finding and walking", args=("condition",))
def cmd_where(env: Env, args: list[str]):
    """STAT: absmax, min, max, mean, std, abs_mean, zero_fraction, nan, inf, count; OP: < <= > >= == !=.
    Examples: `where nan`, `where absmax>1e4`, `where std<1e-6`. The cursor moves to the producing node
    (then `back` walks upstream); `where COND --next` searches after the cursor. The search covers the
    graph inputs and every activation; --weights adds initializers, Constant outputs and what is
    computed from them alone. Statistics of every tensor are computed once per inputs/device."""
    t = _target(env, args, env.state.current)
    nxt = pop_option(args, "--next", flag=True)
    weights = bool(pop_option(args, "--weights", flag=True))
    if not args:
        raise _bad("where", f"give a condition, e.g. {EXAMPLES}")
    text = " ".join(args)
    cond = parse_condition(text)
    after = t.cursor if nxt and t.cursor is not None else None
    hit = env.state.where(t, cond, after=after, weights=weights)
    tag = _tag(env, t)
    scope = f" after node #{after}" if after is not None else ""
    if hit is None:
        n = len(env.state.where_domain(t, weights=weights, after=after))
        extra = "" if weights else "; --weights searches the weights too"
        return f"{tag}no tensor{scope} where {cond.text} ({n} tensors searched{extra})"
    ref, stats = hit
    kind = t.index.kinds[ref.name]
    pos = t.index.position[ref.name]
    msg = Text(f"{tag}first tensor{scope} where {cond.text}: ")
    msg.append(ref.name, style="bold")
    msg.append(f" (tensor {pos} in topological order), ")
    if kind == "node":
        msg.append("produced by node ")
        msg.append(ref.node, style="bold")
        msg.append(f" ({ref.op_type}, #{ref.index})")
        site = ref.index
    else:
        cons = t.index.consumers.get(ref.name, [])
        msg.append("a graph input" if kind == "input" else "a weight")
        if cons:
            msg.append(f", read first by node {cons[0].name} ({cons[0].node.op_type}, #{cons[0].index})")
        site = cons[0].index if cons else None
    msg.append(f": {cond.describe(stats)}")
    out: list = [msg]
    if site is not None:
        env.state.goto(t, site)
        env.state.ensure_walk_window(t, site)
        out += node_view(env, t, site)
    return out


def node_index(t: Target, key: str) -> int:
    """A node by name or #index; a tensor name stands for the node that produced it (for a graph input
    or a weight: the first node that reads it)."""
    try:
        return t.index.node(key).index
    except UsageError:
        if key in t.index.refs:
            kind = t.index.kinds[key]
            if kind == "node":
                return t.index.refs[key].index
            cons = t.index.consumers.get(key)
            if cons:
                return cons[0].index
        if key.lstrip("#-").isdigit():
            raise
        close = difflib.get_close_matches(key, list(t.index.by_name) + list(t.index.refs), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else " (Tab completes names; `nodes` lists them)"
        raise UsageError(f"no node or tensor named {key!r}{hint}") from None


def _walk(env: Env, t: Target, i: int) -> list:
    env.state.ensure_walk_window(t, i)
    return node_view(env, t, i)


@command("goto", "goto NODE|#INDEX|TENSOR [--model a|b]", "move the cursor to a node and show its inputs and outputs", "finding and walking",
         args=("node",))
def cmd_goto(env: Env, args: list[str]):
    """A tensor name goes to the node that produced it (for a graph input or a weight, the first node
    that reads it)."""
    t = _target(env, args, env.state.current)
    if len(args) != 1:
        raise _bad("goto", "give one node name or #index (Tab completes names)")
    return _walk(env, t, env.state.goto(t, node_index(t, args[0])))


@command("step", "step [N] [--weights] [--model a|b]", "move the cursor N nodes forward in topological order (default 1)", "finding and walking")
def cmd_step(env: Env, args: list[str]):
    """Nodes that only compute weights (Constant nodes, and nodes fed by constants alone) are passed
    over; --weights stops at them too. `goto` reaches any node."""
    t = _target(env, args, env.state.current)
    weights = bool(pop_option(args, "--weights", flag=True))
    n = _parse_int("step", args.pop(0)) if args else 1
    _no_more("step", args)
    return _walk(env, t, env.state.step(t, n, weights=weights))


@command("back", "back [N] [--weights] [--model a|b]", "move the cursor N nodes back in topological order (default 1)", "finding and walking")
def cmd_back(env: Env, args: list[str]):
    """Like step, backwards: weight-only nodes are passed over unless --weights."""
    t = _target(env, args, env.state.current)
    weights = bool(pop_option(args, "--weights", flag=True))
    n = _parse_int("back", args.pop(0)) if args else 1
    _no_more("back", args)
    return _walk(env, t, env.state.step(t, -n, weights=weights))


# -- two models and gradients ----------------------------------------------------------------------------


def _hook(name: str):
    """An API function another part of onnxprobe provides, or None while it does not exist yet."""
    return getattr(api, name, None)


@command("diff", "diff [SELECTION] [--sort topo|introduced|accumulated]", "compare the two models tensor by tensor, as `onnxprobe diff` does",
         "two models and gradients", args=("selection",))
def cmd_diff(env: Env, args: list[str]):
    """Needs `onnxprobe debug MODEL OTHER`: model a is compared with model b (the reference) on the
    session's inputs and device. The result is cached until inputs or device change."""
    if "b" not in env.state.targets:
        raise UsageError("diff needs a second model: start with `onnxprobe debug MODEL OTHER`")
    fn = _hook("diff")
    if fn is None:
        return "not available yet: diff needs onnxprobe.api.diff (matching two models, issue 3)"
    from onnxprobe.session import hooks

    return hooks.diff(env, args, fn)


@command("match", "match TENSOR", "which tensor of the other model matches TENSOR, by which strategy and why", "two models and gradients",
         args=("tensor",))
def cmd_match(env: Env, args: list[str]):
    """TENSOR may be a name in either model. Uses the pairing `diff` makes (computed if needed)."""
    if "b" not in env.state.targets:
        raise UsageError("match needs a second model: start with `onnxprobe debug MODEL OTHER`")
    fn = _hook("diff")  # its matching pairs every tensor, with strategy and reason
    if fn is None:
        return "not available yet: match needs onnxprobe.api.diff (matching two models, issue 3)"
    from onnxprobe.session import hooks

    return hooks.match(env, args, fn)


@command("grad", "grad [SELECTION] [--loss sum|mean|mse|cross-entropy] [--output NAME] [--target F|--labels F|--output-grad F] [--wrt GLOB]",
         "attach a loss and the backward graph; gradients then work in show, stats, where and the walk",
         "two models and gradients", args=("selection",))
def cmd_grad(env: Env, args: list[str]):
    """As `onnxprobe grad` does: the loss of --output (default: the first output), gradients of the weights
    and of the selected activations (default: the probes of `layers`); --wrt GLOB names the tensors
    to differentiate directly (graph inputs too).
    The gradients are named TENSOR_grad and join the probes. Run `grad` again after changing the inputs'
    shapes. Needs onnxprobe.api.grad_plan (issue 5)."""
    fn = _hook("grad_plan")
    if fn is None:
        return "not available yet: grad needs onnxprobe.api.grad_plan(model, spec, selection, feed=...) (autodiff, issue 5)"
    from onnxprobe.session import hooks

    return hooks.grad(env, args, fn)


# -- session ---------------------------------------------------------------------------------------------


@command("device", "device [auto|cpu|cuda]", "the device runs use (without an argument: show it)", "session", args=("device",))
def cmd_device(env: Env, args: list[str]):
    st = env.state
    if len(args) > 1:
        raise _bad("device", "give one of auto, cpu, cuda")
    if args:
        st.set_device(args[0])
    extra = f" ({st.resolved_device})" if st.device == "auto" else ""
    return f"device {st.device}{extra}"


@command("help", "help [COMMAND]", "the commands, or one command in detail", "session", args=("command",), aliases=("?",))
def cmd_help(env: Env, args: list[str]):
    if len(args) > 1:
        raise _bad("help", "give one command")
    if args:
        c = lookup(args[0])
        out = Text()
        out.append(c.usage, style="bold")
        out.append(f"\n  {c.help}")
        if c.details:
            out.append("\n\n" + textwrap.indent(c.details, "  "))
        if c.aliases:
            out.append(f"\n\n  also: {', '.join(c.aliases)}", style="dim")
        return out
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), show_header=False)
    w = max(len(c.short_usage) for c in COMMANDS.values()) + 2
    table.add_column(no_wrap=True, min_width=w, max_width=w)
    table.add_column(ratio=1)
    for g in GROUPS:
        table.add_row(Text(g, style="bold underline"), "")
        for c in COMMANDS.values():
            if c.group == g:
                table.add_row(Text("  " + c.short_usage, style="bold"), c.help)
    foot = Text("help COMMAND for its options and details. Tab completes commands, node and tensor names; "
                "Ctrl-C cancels a command; Ctrl-D quits.", style="dim")
    return [table, foot]


@command("quit", "quit", "end the session (Ctrl-D too)", "session", aliases=("exit", "q"))
def cmd_quit(env: Env, args: list[str]):
    raise Quit()


def command_names() -> Iterable[str]:
    return list(COMMANDS) + list(ALIASES)
