"""The command table (``COMMANDS``), how one line runs (``execute``), and the helpers every command uses."""

from __future__ import annotations

import dataclasses
import difflib
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable

from rich.text import Text

from onnxprobe import api
from onnxprobe.errors import GLOB_QUOTES, LIST_NODES, LIST_OPS, STATS_ONLY, UsageError, command_line_words, speaking, writing_as
from onnxprobe.report.format import safe
from onnxprobe.report.table import Verbatim
from onnxprobe.session import render
from onnxprobe.session.parse import SELECTION_OPTIONS, pop_all, pop_option, split, typable
from onnxprobe.session.state import State
from onnxprobe.session.targets import Target
from onnxprobe.text import as_typed, clean, quote, unclean


class Quit(Exception):
    """Raised by ``quit``: the front end ends the session."""


@dataclass
class Env:
    state: State
    width: int = 120
    prompt: bool = True  # read at the interactive prompt, where Tab completes names; False: a script's lines
    verdict: str | None = None  # the verdict of the last line's command that gives one (diff): a script's exit code


RENAMED_OPTIONS = {"grad": {"--output"}}  # old names the command answers with the new one

# the settings the debugger's own commands set, named in messages as those are typed (``errors.speaking``):
# flag -> (the command, its form of an input's NAME and VALUE). Given as flags when the debugger starts, they
# are said as flags; the flags its commands take (grad --loss, stats --columns) are flags here too.
WORDS = {"--seed": ("seed", "{value}"), "--device": ("device", "{value}"), "--inputs": ("inputs", "{value}"),
         "--input": ("input", "{name} {value}"), "--shape": ("input", "{name} random {value}"),
         "--int-range": ("`onnxprobe debug --int-range`", "{value}")}  # (no command of its own: set when it starts)
# advice that names a command-line command where the debugger has its own for it, in its words (``errors.speaking``)
ADVICE = {LIST_NODES: "`nodes`", LIST_OPS: "`nodes`", STATS_ONLY: "`stats` of them",
          GLOB_QUOTES: " (names are case-sensitive)"}  # its words are split as a shell's, never globbed: no quotes needed


# whether the command runs at the prompt (``Env.prompt``), whose Tab completes names: ``completing``'s
_AT_PROMPT: ContextVar[bool] = ContextVar("onnxprobe_at_prompt", default=True)


def completing(at_prompt: str, in_script: str) -> str:
    """Advice about names: ``at_prompt`` where the command runs at the prompt (Tab completes names there),
    ``in_script`` in a script's line, which has no Tab (the commands that list the names, or nothing)."""
    return at_prompt if _AT_PROMPT.get() else in_script


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
    def options(self) -> set[str]:
        """The ``--options`` the command takes: those its usage names (a SELECTION's among them)."""
        found = set(re.findall(r"--[a-z][a-z0-9-]*", self.usage))
        return found | SELECTION_OPTIONS if "SELECTION" in self.usage else found

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
    known = cmd.options | RENAMED_OPTIONS.get(cmd.name, set())
    unknown = next((w for w in words[1:] if w.startswith("--") and w.split("=", 1)[0] not in known), None)
    if unknown is not None:  # said here, not read as a tensor name, a condition or a file by the command
        raise bad(cmd.name, f"unknown option {unknown!r}")
    prompt = _AT_PROMPT.set(env.prompt)
    try:
        with speaking(WORDS, ADVICE), command_line_words():  # its tables' words, as its messages': the command line's
            out = cmd.fn(env, words[1:])
    finally:
        _AT_PROMPT.reset(prompt)
    if out is None:
        return []
    if isinstance(out, (list, tuple)):
        return [_renderable(o) for o in out if o is not None]
    return [_renderable(out)]


def _renderable(o):
    return Text(o) if isinstance(o, str) and not isinstance(o, Verbatim) else o


def pop_view(args: list[str], columns: list | None = None) -> dict:
    """--wide, --columns a,b, --format F of a table command, as ``report.table.present`` takes them."""
    from onnxprobe.report.table import check_view, column_keys

    wide = bool(pop_option(args, "--wide", flag=True))
    given = pop_all(args, "--columns")  # repeated or comma-separated, as on the command line
    cols = ",".join(given) if given else None
    fmt = pop_option(args, "--format") or "table"
    keys = column_keys(cols)
    check_view(fmt, keys, columns)
    return {"wide": wide, "columns": keys, "fmt": fmt}


def check_file(env: Env, cmd: str, path: str, flag: str = "") -> None:
    """A file command ``cmd`` writes (its ``flag``'s: ``--json``), checked before any work and over every loaded
    model (``check_writable``); a bad one said in the line the command line gives a flag's ("--json PATH: why"),
    led by the command: "save: PATH: why", "stats: --json PATH: why"."""
    from onnxprobe.report.io import check_writable

    for t in env.state.targets.values():
        check_writable(path, t.model.source, flag=f"{cmd}: {flag}" if flag else f"{cmd}:")


@contextmanager
def writing(cmd: str, flag: str = ""):
    """A write of command ``cmd`` (its ``flag``'s file) that fails after the checks (a folder that takes no new
    file, a full disk) is said as ``check_file`` says a bad path: led by the command."""
    with writing_as(f"{cmd}: {flag}" if flag else f"{cmd}:"):
        yield


def pop_json_view(env: Env, cmd: str, args: list[str], columns: list | None = None) -> tuple[str | None, dict]:
    """--json FILE|- and the view (``pop_view``) of command ``cmd`` whose report is also JSON, as on the command
    line: the whole report to FILE, or to stdout instead of the table (`-`), refused beside what it would silence
    (``check_json_stdout``) and over a loaded model (``check_file``). Returns (the path or None, the view)."""
    from onnxprobe.report.table import check_json_stdout

    json_path, fmt_given = pop_option(args, "--json"), "--format" in args
    view = pop_view(args, columns)
    check_json_stdout(json_path, view["fmt"], fmt_given, bool(view["columns"]), view["wide"])
    if json_path not in (None, "-"):
        check_file(env, cmd, json_path, "--json")
    return json_path, view


def with_json(cmd: str, report: Callable[[], dict], json_path: str | None, out: list, view: dict) -> list:
    """What command ``cmd`` of ``pop_json_view`` prints: for `--json -` the whole report (``report()``) alone, for jq
    (its notes are in it); else the renderables ``out`` as ``view`` asks, after writing the report to --json's file."""
    from onnxprobe.report.io import json_text, write_json
    from onnxprobe.report.table import present

    if json_path == "-":
        return [Verbatim(json_text(report()))]
    if json_path is not None:
        data = report()  # made first: a failure of its own is no failure to write
        with writing(cmd, "--json"):
            write_json(data, json_path)
        out = out + [Text(safe(f"wrote the whole report to {json_path}"), style="dim")]
    return present(out, **view)


# -- helpers ---------------------------------------------------------------------------------------------


def bad(cmd: str, msg: str) -> UsageError:
    return UsageError(f"{cmd}: {msg} (usage: {COMMANDS[cmd].usage})")


def no_more(cmd: str, args: list[str]) -> None:
    if args:
        raise bad(cmd, f"unexpected argument {args[0]!r}")


def target_of(env: Env, args: list[str], default: str | None = None) -> Target:
    return env.state.target(pop_option(args, "--model", "-m") or default)


def tag(env: Env, t: Target) -> str:
    return f"[{t.label}] " if len(env.state.targets) > 1 else ""


def fresh(env: Env, t: Target) -> bool:
    """Whether the cached results belong to the current inputs and device."""
    return t.results.key == env.state.run_key(t)


def close_name(typed: str, names) -> str | None:
    """The name of ``names`` closest to ``typed`` (as typed: a listing's spelling), in quotes and spelled as the
    listings print it, so that it can be typed back; None when none is close. (``quote`` cleans the name:
    a match among cleaned names was cleaned twice, its backslashes doubled twice.)"""
    spelled = {clean(n): n for n in names}
    close = difflib.get_close_matches(typed, spelled, n=1, cutoff=0.6)
    return typable(spelled[close[0]], bare=False) if close else None


def resolve_tensor(t: Target, text: str) -> tuple[str, str | None]:
    """A tensor name; a node name or #index stands for the node's first output. Returns (name, note)."""
    idx = t.index
    text = as_typed(as_typed(text, idx.refs), idx.by_name)  # or as listings print it (a newline as \n)
    if text in idx.refs:
        return text, None
    if idx.ambiguous(text):  # a name sibling bodies share: never one body's values for another's
        raise idx.ambiguous(text)
    site = None
    if text in idx.shared_nodes:  # a name several nodes bear is refused, as goto refuses it: not the first one's output
        idx.node(text)  # raises that error
    if text in idx.by_name:
        site = idx.by_name[text]
    elif text.startswith("#") and text[1:].isdigit():
        site = idx.node(text)
    if site is not None:
        outs = [k for o in site.node.output if o for k in [idx.key_at(site.scope, o)] if k in idx.refs]
        if outs:
            return outs[0], f"node {site.name}: showing its output {outs[0]}" if len(outs) > 1 else None
    for reader in idx.consumers.get(text, []):  # a Loop/Scan body's own input: no tensor of the model to show
        port = next((ti.port for ti in idx.node_info(reader.index).inputs
                     if ti is not None and ti.kind == "body input" and ti.ref.name == text), None)
        if port:
            raise UsageError(f"{quote(text)} ({port}) is a body's own input, read by node {reader.name}: it has no values "
                             f"of its own to take (`node {reader.name}` lists it; take what the body computes from it)")
    close = close_name(text, idx.refs)
    hint = f"; did you mean {close}?" if close else completing(" (Tab completes names)", " (`nodes` lists the nodes, "
                                                               "`node NAME` a node's tensors)")
    raise UsageError(f"no tensor named {quote(unclean(text))}{hint}")  # as typed: its escapes read once


def _link(t: Target, ti, role: str) -> str:
    """Where a node's input comes from / where its output goes. An If/Loop/Scan body's own input or output
    says what it is to the node (``ti.port``): not 'outer scope', nor '(unused)' for a value the body hands on."""
    idx = t.index
    name = ti.ref.key
    if role == "in":
        if ti.kind == "body input":
            return ti.port
        kind = idx.kinds.get(name, "outer")
        if kind == "input":
            return "graph input"
        if kind == "initializer":
            return "weight"
        if kind == "outer":
            return "outer scope"
        r = idx.refs[name]
        return f"← {r.node}"
    cons = [s.name for s in idx.consumers.get(name, ())]
    parts = ["model output"] if name in idx.outputs else []
    if cons:
        more = f" +{len(cons) - 2}" if len(cons) > 2 else ""
        parts.append("→ " + ", ".join(cons[:2]) + more)
    if ti.port:
        parts.append(ti.port)
    return " · ".join(parts) or "(unused)"


def _row(env: Env, t: Target, role: str, ti, direction: str) -> dict:
    current = fresh(env, t)
    name = ti.ref.key
    ref = t.index.refs.get(name) or ti.ref  # a body input is no tensor of the index: its declared type
    shp = t.results.shapes.get(name) if current else None
    return {
        "role": role, "name": name,
        "shape": shp if shp is not None else ref.shape, "known": shp is not None,
        # a sequence or an optional holds no dtype of its own: its whole type, as inspect says it
        "dtype": ref.dtype or t.index.type_text(name),
        "stats": (t.results.stats.get(name) or _fed_stats(env, t, name)) if current else None,
        "link": _link(t, ti, direction),
    }


def _fed_stats(env: Env, t: Target, name: str):
    """A graph input's statistics, from its feed: a run measures node outputs only, so a fed input read '-'
    until `where` fetched it."""
    if t.index.kinds.get(name) != "input" or t.index.refs.get(name) is None or t.index.refs[name].scope:
        return None
    value = env.state.feed(t)[0].get(name)
    if value is None or not api.has_statistics(value.dtype):
        return None
    st = api.TensorStats.from_array(value)
    t.results.stats[name] = st
    return st


def node_view(env: Env, t: Target, index: int, title: str | None = None) -> list:
    info = t.index.node_info(index)
    head = Text()
    head.append(tag(env, t))
    head.append(f"#{info.index}/{len(t.index.sites) - 1} ", style="dim")
    head.append(safe(info.name), style="bold")
    head.append(safe(f"  {info.op_type}"), style="cyan")
    if info.domain not in ("", "ai.onnx"):
        head.append(safe(f" ({info.domain})"), style="dim")
    if info.scope:
        head.append(safe(f"  in {'/'.join(info.scope)}"), style="dim")
    if title:
        head = Text.assemble(Text(title + "\n"), head)
    rows = []
    for i, ti in enumerate(info.inputs):
        if ti is None:
            rows.append({"role": f"in {i}", "name": "(omitted)", "shape": None, "dtype": "", "stats": None, "link": ""})
        else:
            rows.append(_row(env, t, f"in {i}", ti, "in"))
    for i, ti in enumerate(info.outputs):
        if ti is not None:
            rows.append(_row(env, t, f"out {i}", ti, "out"))
    out: list = [head, render.tensor_table(rows, env.width)]
    if info.attributes:
        attrs = Text("attributes: ", style="dim")
        for i, (k, v) in enumerate(info.attributes):
            if i:
                attrs.append(", ")
            attrs.append(safe(f"{k}="), style="dim")
            attrs.append(safe(v))
        out.append(attrs)
    return out


def display_ref(t: Target, name: str):
    ref = t.index.refs[name]
    kind = t.index.kinds.get(name)
    if kind == "input":
        return dataclasses.replace(ref, node="(input)")
    if kind == "initializer":
        return dataclasses.replace(ref, node="(weight)")
    return ref


def layers_rows(t: Target, names: list[str]) -> list:
    """(TensorRef as shown, TensorStats | None) of ``names`` from the cached results."""
    return [(display_ref(t, n), t.results.stats.get(n)) for n in names]


def layers_view(env: Env, t: Target, names: list[str]) -> dict:
    """The `layers` report of these tensors from the cached results (``report.layers.layers_table`` draws it)."""
    from onnxprobe.report.layers import tensor_rows

    r = t.results
    shapes = {n: r.shapes[n] for n in names if n in r.shapes}
    return {"tensors": tensor_rows(layers_rows(t, names), shapes), "device": r.info.device if r.info else env.state.resolved_device,
            "opt_level": env.state.opt_level, "timing": None}


def parse_int(cmd: str, text: str, what: str = "N") -> int:
    try:
        return int(text)
    except ValueError:
        raise bad(cmd, f"{what} must be an integer, got {text!r}") from None


def node_index(t: Target, key: str) -> int:
    """A node by name or #index; a tensor name stands for the node that produced it (for a graph input
    or a weight: the first node that reads it)."""
    try:
        return t.index.node(key).index
    except UsageError:
        key = as_typed(key, t.index.refs)
        if key in t.index.refs:
            kind = t.index.kinds[key]
            if kind == "node":
                return t.index.refs[key].index
            cons = t.index.consumers.get(key)
            if cons:
                return cons[0].index
        if key.lstrip("#-").isdigit() or key.strip() in t.index.shared_nodes:  # out of range; several nodes named so
            raise
        if t.index.ambiguous(key):
            raise t.index.ambiguous(key) from None
        close = close_name(key, [*t.index.by_name, *t.index.refs])
        hint = f"; did you mean {close}?" if close else completing(" (Tab completes names; `nodes` lists them)",
                                                                   " (`nodes` lists them)")
        raise UsageError(f"no node or tensor named {quote(unclean(key))}{hint}") from None
