"""The one output channel of the command line: data (tables, JSON) to stdout, diagnostics (notes,
errors, progress) to stderr. Every string shown passes through ``text.clean``/``text.one_line`` here or in
the renderers, so nothing from a model reaches the terminal raw; JSON keeps the exact strings."""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
from pathlib import Path
from typing import Callable, Iterable

from onnxprobe.errors import cli_words, command_line_words, writing_as
from onnxprobe.report import io as report_io
from onnxprobe.report.table import Table, present
from onnxprobe.text import MAX_LINE, clean, one_line


# the flag whose file goes to this command's stdout (/dev/stdout on a pipe or a terminal), set by ``check_outputs``:
# the report then stays off stdout, as with --json - (the table after a model on one pipe made both unreadable)
STDOUT_FILE: contextvars.ContextVar[str | None] = contextvars.ContextVar("onnxprobe_stdout_file", default=None)


def check_outputs(model: Path, *paths: Path | None, files: dict[str, Path | None] | None = None,
                  model_is: str = "an input model") -> None:
    """Fail before any work when an output path is unusable (missing folder, the model itself);
    ``files``: flag -> path of outputs that must be real files (no '-' for stdout). An output that is this
    command's stdout (``STDOUT_FILE``) takes it alone: a second one there, or ``--json -``, is refused."""
    from onnxprobe.errors import UsageError

    for flag, p in (files or {}).items():
        if p is not None and str(p) == "-":
            raise UsageError(f"{flag} writes a file of its own: give a file name, not '-'")
    named = [*(("--json", p) for p in paths), *(files or {}).items()]
    for flag, p in named:
        if p is not None and str(p) != "-":  # a bad one said as every bad flag value is: "--json PATH: why"
            report_io.check_writable(p, model, model_is, flag=flag)
    _distinct([("--json", p) for p in paths] + list((files or {}).items()))
    on_stdout = [(f, p) for f, p in named if p is not None and (str(p) == "-" or _is_stdout(p))]
    if len(on_stdout) > 1:
        (f1, p1), (f2, p2) = on_stdout[:2]
        raise UsageError(f"{f2} {clean(str(p2))}: is standard output, where {f1} {clean(str(p1))} writes too; give each "
                         "output a file of its own")
    STDOUT_FILE.set(on_stdout[0][0] if on_stdout and str(on_stdout[0][1]) != "-" else None)


def _is_stdout(p: Path) -> bool:
    """Whether ``p`` is this process's stdout (/dev/stdout, /proc/self/fd/1, the terminal's own device)."""
    from onnxprobe.fileio import is_stream

    try:
        st = os.stat(p)
    except (OSError, ValueError):
        return False
    return is_stream(st, 1)


OUTPUT_FLAG = "-o/--output"  # mark's and extract's model to write, named as click names it
MODEL_OUTPUTS = ("--export", OUTPUT_FLAG)  # flags that write a model, whose big weights may go to OUT.data beside it


def _distinct(named: list[tuple[str, Path | None]]) -> None:
    """Two output flags naming one file (the second write would replace the first): a UsageError, before
    any work. A model output's OUT.data counts as its file too."""
    import os

    from onnxprobe.errors import UsageError
    from onnxprobe.text import clean

    seen: dict[str, str] = {}
    for flag, p in named:
        if p is None or str(p) == "-":
            continue
        real = os.path.realpath(p)
        for key, what in [(real, flag)] + ([(real + ".data", f"{flag}'s weights file")] if flag in MODEL_OUTPUTS else []):
            if key in seen:
                raise UsageError(f"{flag} {clean(str(p))}: {seen[key]} writes {'that file' if key == real else clean(key)} too; "
                                 f"give each output a file of its own")
            seen[key] = what


def write_html(path: Path | None, result, *, histograms: dict | None = None, inputs: list[str] | None = None,
               sort: str = "topo", profile=None, view=None) -> None:
    """--html: the self-contained HTML report of a ``layers``, ``diff`` or ``grad`` result (``api.html``), with
    every column the terminal's table shows (``view``: --columns may add some)."""
    if path is not None:
        from onnxprobe import api

        with command_line_words(), writing_as("--html"):  # a write that fails: "--html PATH: cannot write it"
            api.html(result, path, histograms=histograms, inputs=inputs, sort=sort, profile=profile,
                     columns=list(view.columns) if view is not None else None)
        wrote(path, "the HTML report")


def require_html(path: Path | None) -> None:
    """With --html, plotly must be installed: MissingExtra before any work."""
    if path is not None:
        from onnxprobe.report.html import require_plotly

        require_plotly()


def write_pictures(result, *, overlay: Path | None = None, netron: Path | None = None, model=None, sort: str = "topo") -> None:
    """--overlay (Model Explorer node data, ``api.overlay``) and --netron (a Netron attachment, ``api.netron``)
    of a ``layers``, ``diff`` or ``grad`` result; ``model``: the ModelProto the report is about (a grad
    result's; the others hold theirs)."""
    if overlay is None and netron is None:
        return
    from onnxprobe import api

    with command_line_words():
        if overlay is not None:
            data = api.overlay(result, model, sort=sort)
            with writing_as("--overlay"):
                report_io.write_json(data, overlay)
            wrote(overlay, "node data for Model Explorer")
        if netron is not None:
            data = api.netron(result, model, sort=sort)
            with writing_as("--netron"):
                report_io.write_json(data, netron)
            # Netron takes a file as an attachment only by its name (*.json); another is opened as a model
            named = "" if Path(netron).suffix.lower() == ".json" or not Path(netron).is_file() else (
                " (Netron opens an attachment only from a file named *.json: rename it so)")
            wrote(netron, "a Netron attachment" + named)


def wrote(path: Path | str | None, what: str) -> None:
    """The one line that says a file a command wrote beside its report (--json FILE, --save, --save-grads,
    --export, --html, --overlay, --netron): a note on stderr, "wrote FILE: what", as mark and extract say
    theirs beside a row format (``show_written``). Not for ``-`` (stdout itself)."""
    if path is not None and str(path) != "-":
        notes([f"wrote {clean(str(path))}: {what}"])


def reader_gone() -> None:
    """The reader of stdout has gone (``| head``): what is left goes to /dev/null, so that the command
    ends as it would have (its exit code, its files), with no error about output nobody reads."""
    from onnxprobe.report.console import to_devnull

    to_devnull(sys.stdout)


@contextlib.contextmanager
def writing_stdout():
    """Writes to stdout: a closed pipe is ``reader_gone``; a stdout that cannot take them (a full disk,
    /dev/full) is one clear error, not an internal one."""
    try:
        yield
    except BrokenPipeError:
        reader_gone()
    except OSError as e:
        if e.filename is not None:
            raise
        from onnxprobe.errors import OnnxProbeError

        raise OnnxProbeError(f"cannot write to standard output ({e.strerror or type(e).__name__})") from e


def show(renderables: Iterable, view=None) -> None:
    """Renderables on stdout, as ``view`` (cli.options.View: --wide, --columns, --format) asks; none where an output
    file took stdout (``STDOUT_FILE``)."""
    if STDOUT_FILE.get() is not None:
        return
    with writing_stdout():
        _show(renderables, view)


def _show(renderables: Iterable, view=None) -> None:
    wide = bool(view and view.wide)
    items = list(renderables)
    if view is not None:
        items = present(items, wide=view.wide, columns=list(view.columns), fmt=view.format)
    from onnxprobe.report.console import stdout_console
    from onnxprobe.report.render import print_items

    print_items(stdout_console(wide), items)


def show_written(renderables: list, view) -> None:
    """What a command that writes a model (mark, extract) shows: its table and the line saying what was
    written, on stdout as a table; with --format csv/markdown/json stdout carries the rows alone and the
    rest goes to stderr as notes (stderr's one kind of line)."""
    if view.format == "table" and STDOUT_FILE.get() is None:
        show(renderables, view)
        return
    show([r for r in renderables if isinstance(r, Table)], view)
    notes([" ".join(r.plain.split()) for r in renderables if not isinstance(r, Table)])


def emit(data: dict, json_path: Path | None, render: Callable[[int], list], view=None) -> None:
    """``--json FILE`` writes ``data``; the report (``render(width)``) goes to stdout unless ``--json -``
    (``view``: from ``cli.options.view_of`` with the same --json, which refuses --json - beside --format)."""
    if json_path is not None:
        with writing_stdout(), writing_as("--json"):
            report_io.write_json(data, json_path)
        wrote(json_path, "the report as JSON")
    if json_path is None or str(json_path) != "-":
        from onnxprobe.report.console import stdout_console

        with command_line_words():  # the table's words that name settings: the flags (errors.report_voice)
            show(render(stdout_console(bool(view and view.wide)).width), view)


def notes(messages: Iterable[str]) -> None:
    """One line per note; on a terminal, folded at its width between words (continuation lines
    indented), where the terminal itself would cut words in two. A pipe or file keeps one line per note,
    for grep."""
    width = _terminal_width(sys.stderr)
    for m in dict.fromkeys(messages):
        line = f"onnxprobe: note: {one_line(cli_words(m))}"  # a note that names settings: as the flags say them
        if width and len(line) > width:
            import textwrap

            line = "\n".join(textwrap.wrap(line, width, subsequent_indent="  ", break_on_hyphens=False))
        print(line, file=sys.stderr)


def _terminal_width(stream) -> int | None:
    """The width of the terminal ``stream`` writes to (COLUMNS first, as for the tables), or None."""
    try:
        if not stream.isatty():
            return None
        cols = os.environ.get("COLUMNS", "")
        return int(cols) if cols.isdigit() and int(cols) >= 20 else os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor (tests' capture)
        return None


def error(message: str, limit: int = MAX_LINE) -> None:
    """One line on stderr, in the command line's words (``errors.cli_words``: a verdict's reason said in two),
    clipped past ``limit`` characters (an error's ``line_limit``: a list to paste is longer)."""
    try:
        print(f"onnxprobe: error: {one_line(cli_words(message), limit)}", file=sys.stderr)
    except (OSError, ValueError):  # a stderr that takes nothing (a terminal that hung up: EIO): no one to read it
        pass


def exit_for(verdict: str, why: str) -> None:
    """A comparison's verdict as the exit code: 0 for pass; 1 for fail, and 1 for error after its reason."""
    if verdict == "error":
        error(why)
    if verdict != "pass":
        import typer

        raise typer.Exit(1)


def stdout_width() -> int:
    from onnxprobe.report.console import stdout_console

    return stdout_console().width


def show_err(renderables: Iterable) -> None:
    """Renderables on stderr (what a command wrote, when stdout carries its report)."""
    from onnxprobe.report.console import stderr_console

    console = stderr_console()
    for r in renderables:
        console.print(r)
