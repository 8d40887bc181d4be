"""The front ends of the debugging session: an interactive prompt (prompt_toolkit) and a script runner.
Both run lines through ``commands.execute`` and print what it returns; neither holds any logic.

Interactive: Tab completes command names, node names, tensor names, op types, options and files; the
history is kept in ``$ONNXPROBE_HISTORY`` (default ``~/.onnxprobe_history``); Ctrl-C cancels the running
command (an onnxruntime run stops within one node) or clears the line; Ctrl-D quits.

Script (``--script FILE``): one command per line, ``#`` comments and blank lines skipped, output on
stdout. A failing line prints ``onnxprobe: error: line N: ...`` on stderr and the script goes on; the
return value counts the failed lines.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import traceback
from pathlib import Path
from typing import Iterable

from rich.console import Console
from rich.text import Text

from onnxprobe.errors import OnnxProbeError, UsageError, cli_words, debug_enabled, first_line, internal_error_text, path_error_text
from onnxprobe.fileio import expand_home, input_file, protect, read_bounded, refuse_inputs
from onnxprobe.report.console import console, to_devnull
from onnxprobe.report.table import Verbatim
from onnxprobe.session import commands as C
from onnxprobe.session.inputs import session_notes
from onnxprobe.session.state import State
from onnxprobe.session.parse import typable
from onnxprobe.text import clean, one_line

HISTORY_ENV = "ONNXPROBE_HISTORY"
MAX_SCRIPT_BYTES = 16 * 2**20


def history_path() -> Path | None:
    """$ONNXPROBE_HISTORY (a leading ~ expanded), else ~/.onnxprobe_history; None where that needs a home
    folder and there is none (``fileio.home``): the history is then kept in memory."""
    return expand_home(os.environ.get(HISTORY_ENV) or "~/.onnxprobe_history")


def _error_text(e: BaseException) -> str:
    if isinstance(e, OnnxProbeError):  # a setting named as on the command line (--op, not "ops (--op)")
        return one_line(e.cli_message or first_line(e))
    if isinstance(e, OSError) and e.filename is not None:  # a path the system refuses
        return one_line(path_error_text(e))
    return one_line(internal_error_text(e))


def read_script(path: Path) -> list[str]:
    """The lines of a ``--script`` file (``-``: stdin). A file that is not text is refused in one line. A
    leading byte order mark (Windows editors write one) is dropped: it would be read as part of the first
    command's name."""
    if str(path) == "-":
        return _drop_bom(sys.stdin.read()).splitlines()
    input_file(path, "script file", "--script", pipe_ok=True)  # read once: `--script <(...)` works
    protect(path, "the running --script file")  # its `save` lines must not replace it
    data = read_bounded(path, MAX_SCRIPT_BYTES)
    if len(data) > MAX_SCRIPT_BYTES:
        raise UsageError(f"--script {path}: over {MAX_SCRIPT_BYTES >> 20} MiB; not a script of debugger commands")
    if b"\0" in data:
        raise UsageError(f"--script {path}: a binary file, not a text file of debugger commands")
    try:
        return _drop_bom(data.decode("utf-8")).splitlines()
    except UnicodeDecodeError:
        raise UsageError(f"--script {path}: not UTF-8 text; a script is a text file of debugger commands") from None


def _drop_bom(text: str) -> str:
    return text[1:] if text.startswith("\ufeff") else text


def show(console: Console, items: list) -> None:
    for item in items:
        if isinstance(item, Verbatim):  # csv, markdown, json: not wrapped, not cut
            console.print(item.rstrip("\n"), soft_wrap=True, highlight=False)
        elif console.is_terminal:
            console.print(item, soft_wrap=False, highlight=False)
        else:  # a file or a pipe: no line padded out to the width with spaces (Rich pads a table's last column)
            with console.capture() as cap:
                console.print(item, soft_wrap=False, highlight=False)
            console.file.write(TRAILING_SPACES.sub(r"\1", cap.get()))
            console.file.flush()


TRAILING_SPACES = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$", re.M)  # before the line's closing colour codes, if any


def banner(state: State) -> list:
    out = []
    for t in state.targets.values():
        idx = t.index
        line = Text()
        line.append("onnxprobe debug", style="bold")
        if len(state.targets) > 1:
            line.append(f" [{t.label}]")
        line.append(f" {t.model.source}: {len(idx.sites)} nodes, {len(idx.refs)} tensors")
        out.append(line)
        for n in session_notes(state.feed(t)[2]) + list(t.model.warnings):
            out.append(Text(f"note: {cli_words(n)}", style="dim"))
    out.append(Text("help lists the commands · Tab completes · Ctrl-C cancels · Ctrl-D quits", style="dim"))
    return out


# -- script mode -----------------------------------------------------------------------------------------


def run_script(state: State, lines: Iterable[str], out: Console, *, echo: bool = False) -> int:
    """Run lines one by one; returns the number of lines that failed: an error, or a verdict that fails or is an
    error (a `diff` whose outputs FAIL: its table says so, as `onnxprobe diff`'s does, and the exit code is 1 as
    its is). KeyboardInterrupt propagates, and so does the OSError of a stdout that takes nothing (not a pipe
    whose reader left)."""
    env = C.Env(state, out.width, prompt=False)
    failed = 0
    for n, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if echo:
            out.print(Text(f"> {text}", style="bold"), soft_wrap=False)
        env.width, env.verdict = out.width, None
        try:
            items = C.execute(env, text)
        except C.Quit:
            break
        except KeyboardInterrupt:
            raise
        except BrokenPipeError:
            to_devnull(sys.stdout)
            continue
        except Exception as e:  # noqa: BLE001 - every failure is one line, the script goes on
            if debug_enabled():
                traceback.print_exc()
            failed += 1
            sys.stdout.flush()
            print(f"onnxprobe: error: line {n}: {_error_text(e)}", file=sys.stderr, flush=True)
            continue
        try:  # a stdout that takes nothing (a full disk, closed) is no failure of the line: it ends the script,
            show(out, items)  # raised to the caller, as on any command (it read 'line N: internal error' each line)
        except BrokenPipeError:  # the reader of stdout has gone (| head): the rest goes nowhere, the script goes on
            to_devnull(sys.stdout)  # (its files are still written), with no error about output nobody reads
        failed += env.verdict in ("fail", "error")
    return failed


# -- interactive mode ------------------------------------------------------------------------------------


def make_completer(state: State):
    from prompt_toolkit.completion import Completer, Completion, PathCompleter
    from prompt_toolkit.document import Document

    paths = PathCompleter(expanduser=True)
    options = ["--op", "--name", "--all", "--range", "--include-constants"]

    class SessionCompleter(Completer):
        def get_completions(self, document, complete_event):
            text = document.text_before_cursor
            words = text.split()
            if text and not text[-1].isspace():
                current, before = words[-1], words[:-1]
            else:
                current, before = "", words
            if not before:
                yield from self._match(current, [(c, COMMANDS_META.get(c, "")) for c in C.command_names()])
                return
            name = C.ALIASES.get(before[0], before[0])
            cmd = C.COMMANDS.get(name)
            if cmd is None:
                return
            label = "a"
            for i, w in enumerate(before[:-1]):
                if w in ("--model", "-m"):
                    label = before[i + 1]
            t = state.targets.get(label, state.targets["a"])
            prev = before[-1] if len(before) > 1 else None
            if prev in ("--model", "-m"):
                yield from self._match(current, [(k, v.name) for k, v in state.targets.items()])
                return
            if prev == "--op":
                yield from self._match(current, self._ops(t))
                return
            if prev in ("--range",):
                yield from self._match(current, self._nodes(t), substring=True)
                return
            if prev == "--name":
                yield from self._match(current, self._tensors(t) + self._nodes(t), substring=True)
                return
            positional = []
            skip = False
            for w in before[1:]:
                if skip:
                    skip = False
                    continue
                if w in ("--model", "-m", "--op", "--name", "--range", "--bins", "--sort"):
                    skip = True
                    continue
                if not w.startswith("-"):
                    positional.append(w)
            kind = cmd.args[min(len(positional), len(cmd.args) - 1)] if cmd.args else None
            if current.startswith("-"):
                flags = re.findall(r"--[a-z][a-z-]*", cmd.usage)
                if kind == "selection":
                    flags = options + flags
                yield from self._match(current, [(f, "") for f in dict.fromkeys(flags)])
                return
            if kind is None:
                return
            if kind == "file" or (kind == "inputhow" and ("/" in current or current.startswith("."))):
                sub = Document(current, len(current))
                yield from paths.get_completions(sub, complete_event)
                return
            names = kind in ("node", "tensor", "savewhat", "nodepattern", "selection")
            yield from self._match(current, self._candidates(kind, t, current, before), substring=names)

        # candidates: (text, meta)
        def _candidates(self, kind: str, t, current: str, before: list[str]):
            if kind == "command":
                return [(c, "") for c in C.COMMANDS]
            if kind == "node":
                return self._nodes(t)
            if kind == "tensor":
                return self._here(t) + self._tensors(t)
            if kind == "input":
                return [(n, "input") for n in t.index.inputs]
            if kind == "inputhow":
                return [("random", "seeded random data")]
            if kind == "savewhat":
                return [("all", "every probed tensor")] + self._here(t) + self._tensors(t)
            if kind == "probesub":
                return [(s, "") for s in ("add", "rm", "list", "clear")]
            if kind == "device":
                return [(d, "") for d in ("auto", "cpu", "cuda")]
            if kind == "condition":
                return [(c, "") for c in ("nan", "inf", "nonfinite", "absmax>", "std<", "mean>", "max>", "min<")]
            if kind == "nodepattern":
                return [(f"op:{o}", m) for o, m in self._ops(t)] + self._nodes(t)
            if kind == "selection":
                if current.startswith("op:"):
                    return [(f"op:{o}", m) for o, m in self._ops(t)]
                if current.startswith("-"):
                    return [(o, "") for o in options + ["--model"]]
                return self._tensors(t) + self._nodes(t) + [("all", "every tensor")]
            return []

        def _here(self, t):
            """The tensors of the node at the cursor come first."""
            if t.cursor is None:
                return []
            site = t.index.sites[t.cursor]
            keys = [t.index.key_at(site.scope, n) for n in list(site.node.output) + list(site.node.input) if n]
            return [(n, "at the cursor") for n in keys if n in t.index.refs]

        def _ops(self, t):
            ops: dict[str, int] = {}
            for s in t.index.sites:
                ops[s.node.op_type] = ops.get(s.node.op_type, 0) + 1
            return [(o, f"×{n}") for o, n in sorted(ops.items())]

        def _nodes(self, t):
            """Each node by its path as listings show it ('If_8/then_branch/mul'), which every command takes:
            a body node's bare name can be one that sibling bodies share, which is refused as ambiguous."""
            return [(s.path, s.node.op_type) for s in t.index.sites]

        def _tensors(self, t):
            from onnxprobe.report.format import shape as fmt_shape

            out = []
            for n in t.index.order:
                r = t.index.refs[n]
                kind = t.index.kinds[n]
                meta = r.op_type if kind == "node" else ("input" if kind == "input" else "weight")
                out.append((n, f"{meta} {fmt_shape(r.shape)}"))
            return out

        def _match(self, current: str, candidates, substring: bool = False):
            """Names that start with what was typed, then (for node and tensor names) names that contain it."""
            cur = current.strip("'\"")
            low = cur.lower()
            seen = set()
            first, second = [], []
            for text, meta in candidates:
                if text in seen:
                    continue
                shown = clean(text)  # what was typed is a name as listed
                if shown.startswith(cur):
                    first.append((text, meta))
                    seen.add(text)
                elif substring and low and low in shown.lower():
                    second.append((text, meta))
                    seen.add(text)
            for text, meta in first + second:
                yield Completion(typable(text), start_position=-len(current), display=clean(text), display_meta=meta)

    return SessionCompleter()


COMMANDS_META = {name: c.help[:40] for name, c in C.COMMANDS.items()}


def _prompt_text(state: State) -> str:
    from onnxprobe.report.format import shorten

    t = state.targets.get(state.current, state.a)
    where = ""
    if t.cursor is not None:
        where = f" @{shorten(t.index.sites[t.cursor].name, 28)}"
    label = f"[{t.label}]" if len(state.targets) > 1 else ""
    return f"onnxprobe {shorten(state.a.name, 32)}{(' ' + label) if label else ''}{where}> "


def _history(path: Path | None, file_history, memory_history, err: Console):
    """The history file, where it can be one: an existing regular file, or a new one in an existing folder
    (no folders made), never a file this session reads (the model, its data, its inputs: appending
    history lines would corrupt them). Else (``path`` None too: no home folder) the history is kept in
    memory, and a note says why."""
    from onnxprobe.errors import UsageError

    if path is None:
        err.print(Text(f"note: no history file: no home folder for its '~' (HOME unset or not an absolute path; {HISTORY_ENV} "
                       "may name a file); history is kept for this session only", style="dim"))
        return memory_history()
    try:
        refuse_inputs(path)
        if path.exists() and not path.is_file():
            why = "it is not a regular file"
        elif not path.parent.is_dir():
            why = f"its folder {path.parent} does not exist"
        else:
            path.touch(exist_ok=True)
            return _kept(file_history, path, err)
    except UsageError:
        why = "it is a file this session reads"
    except OSError as e:
        why = e.strerror or "it cannot be written"
    err.print(Text(f"note: history file {clean(str(path))} not used ({why}); history is kept for this session only",
                   style="dim"))
    return memory_history()


def _kept(file_history, path: Path, err: Console):
    """``file_history`` on ``path``, whose writes may still fail (a full disk, a file that takes no
    appends, such as one under /proc): then one note, and the history stays in memory for the session
    (prompt_toolkit keeps every line it stores there too), where prompt_toolkit would print its traceback
    and could leave the prompt hung."""

    class Kept(file_history):
        failed = False

        def store_string(self, string: str) -> None:
            if self.failed:
                return
            try:
                super().store_string(string)
            except OSError as e:
                self.failed = True
                err.print(Text(f"note: history file {clean(str(path))} cannot be written ({e.strerror or e}); "
                               "history is kept for this session only", style="dim"))

    return Kept(str(path))


def _ctrl_c_interrupts() -> None:
    """Ctrl-C cancels a run, as ``help`` says, also when the session was started with SIGINT ignored: a shell
    without job control starts what it puts in the background (`cmd &`, a test runner's child) so, and Python
    then leaves it ignored. The session reads a terminal: the user at it means Ctrl-C (prompt_toolkit reads
    it at the prompt as a key either way)."""
    import signal

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def repl(state: State, *, out: Console | None = None, err: Console | None = None) -> None:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
    from prompt_toolkit.history import FileHistory, InMemoryHistory

    out = out or console(soft_wrap=False)
    err = err or console(stderr=True)
    path = history_path()
    history = _history(path, FileHistory, InMemoryHistory, err)
    session = PromptSession(history=history, completer=make_completer(state), complete_while_typing=False,
                            auto_suggest=AutoSuggestFromHistory(), enable_history_search=False)

    @contextlib.contextmanager
    def busy(message: str):
        with err.status(Text(message, style="dim"), spinner="dots"):
            yield

    state.busy = busy
    env = C.Env(state, out.width)
    _ctrl_c_interrupts()
    show(out, banner(state))
    while True:
        try:
            line = session.prompt(_prompt_text(state))
        except KeyboardInterrupt:
            continue  # Ctrl-C at the prompt clears the line
        except EOFError:
            break
        env.width = out.width
        try:
            show(out, C.execute(env, line))
        except C.Quit:
            break
        except KeyboardInterrupt:
            err.print(Text("cancelled", style="yellow"))
        except Exception as e:  # noqa: BLE001 - one line, and the session goes on
            if debug_enabled():
                err.print(Text(traceback.format_exc().rstrip(), style="dim"))
            err.print(Text(f"error: {_error_text(e)}", style="red"), soft_wrap=True)
