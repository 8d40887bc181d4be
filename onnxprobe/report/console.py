"""The output sinks: data to stdout, diagnostics (warnings, progress, errors) to stderr.

Colour follows the terminal: on a plain pipe, or with NO_COLOR set, Rich prints plain text. When stdout
is not a terminal the table width is $COLUMNS or 120, so piped tables keep their layout.

Every console here is a ``SafeConsole``: what it writes has every control character of the text escaped
(``\\x1b`` shows as the four characters ``\\x1b``), except the line breaks the layout itself makes, and no
string is read as Rich markup; so a name, doc string or path from a model cannot move the cursor, recolour
the terminal or pass for a line of onnxprobe's own output. Rich's own control sequences (progress bars,
colours) are kept.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Iterable

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.text import Text

from onnxprobe.report.wrap import phrase_wrap
from onnxprobe.text import clean

_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff]")


def to_devnull(stream) -> None:
    """What is left to write to ``stream`` goes to /dev/null (its reader has gone: ``| head``)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # a stream without a descriptor (tests' capture)
        pass


class SafeConsole(Console):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("markup", False)
        kwargs.setdefault("highlight", False)
        kwargs.setdefault("emoji", False)
        if os.environ.get("NO_COLOR", "") != "":  # no-color.org: set and not empty; Rich's own NO_COLOR drops
            kwargs.setdefault("color_system", None)  # the colours and keeps bold and dim: plain text, as on a pipe
        super().__init__(*args, **kwargs)

    def print(self, *objects, **kwargs) -> None:
        """As Rich prints, but a ``Text`` (a report's header, footer, notes) is broken into lines of the width
        between its phrases, then its words outside parentheses... (``report.wrap.phrase_wrap``), never after
        the last word that fits, mid-phrase ('(use --opt-level⏎extended ...)'), nor with a trailing space;
        unless soft wrapping, where the terminal folds the line. A Text marked ``no_wrap`` too: Rich's print
        lets its own no_wrap option (False) win over the Text's, and word-wrapped those lines all the same."""
        soft = kwargs.get("soft_wrap")
        if not (self.soft_wrap if soft is None else soft):
            width = kwargs.get("width") or self.width
            objects = tuple(phrase_wrap(o, width) if isinstance(o, Text) else o for o in objects)
        super().print(*objects, **kwargs)

    def print_lines(self, lines: Iterable[tuple[str, str | None]]) -> None:
        """Lines laid out already, (text, style) each (``report.table.Table.lines``). Without colour (a
        plain pipe, NO_COLOR), the lines that fit the width are written as they are, which is what
        Rich prints for them, byte for byte, without its segment rendering (~40 ms for a 400-row table,
        of a 1.5 s command); other lines, and every line in colour, go through Rich (styles, cell widths
        of wide characters, and a line wider than the width folded onto the next: see ``Lines``)."""
        if self.color_system is not None or self.is_jupyter or self.record:
            self.print(Lines(list(lines)))
            return
        width, buf = self.width, []
        for text, style in lines:
            # a line within the width in cells (Rich's count: an ellipsis or a rule's box-drawing character
            # is one cell, a CJK character two) is printed by Rich as it is
            if (len(text) <= width if text.isascii() else cell_len(text) <= width):
                buf.append((clean(text) if _CONTROL.search(text) or "\n" in text else text) + "\n")
                continue
            self._write_now(buf)
            self.print(Lines([(text, style)]))
        self._write_now(buf)

    def _write_now(self, buf: list[str]) -> None:
        if not buf:
            return
        out = "".join(buf)
        buf.clear()
        try:
            self.file.write(out)
            self.file.flush()
        except BrokenPipeError:
            self.on_broken_pipe()

    def on_broken_pipe(self) -> None:
        """The reader has gone (``| head``): the rest goes to /dev/null and the command goes on to its own
        end and exit code (Rich's own exits with 1 at once: a passing diff read as a failing one)."""
        self.quiet = True
        to_devnull(self.file)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        safe = (Segment(clean(text) if _CONTROL.search(text) else text, style, control) if not control
                else Segment(text, style, control) for text, style, control in buffer)
        return super()._render_buffer(safe)


class Lines:
    """Laid-out lines as one Rich renderable (as ``report.table.Table`` renders its own). The layout keeps
    every line within the width in cells; one that is wider all the same is wrapped, not cropped: Rich
    cropped such lines silently, whole columns (NaN, Inf) and parts of names gone."""

    def __init__(self, lines: list[tuple[str, str | None]]):
        self.lines = lines

    def __rich_console__(self, console, options):
        for text, style in self.lines:
            yield Text(text, style=style or "", overflow="fold")


WIDE = 100_000  # the width of --wide output: no line is cut or wrapped


def stdout_console(wide: bool = False) -> Console:
    width = None
    if wide:
        width = WIDE
    elif not sys.stdout.isatty():
        width = env_width()
    elif os.environ.get("TERM", "").lower() in ("dumb", "unknown"):
        # Rich takes such a terminal as 80 x 25 whatever it is, unless given both of its dimensions
        try:
            size = os.get_terminal_size(sys.stdout.fileno())
            return SafeConsole(width=env_width(size.columns), height=size.lines, soft_wrap=False)
        except (OSError, ValueError):
            pass
    return SafeConsole(width=width, soft_wrap=False)


def env_width(default: int = 120) -> int:
    """$COLUMNS when it is a number of columns (at least 20 are used: a narrower terminal still gets a
    table), else ``default`` (unset, 0, not a number, absurdly large)."""
    text = os.environ.get("COLUMNS", "").strip()
    return max(int(text), 20) if text.isdigit() and len(text) < 7 and int(text) > 0 else default


def stderr_console() -> Console:
    return SafeConsole(stderr=True)


def console(**kwargs) -> Console:
    """A SafeConsole with these options (the debugger's prompt front end)."""
    return SafeConsole(**kwargs)


def phrased(text: Text, width: int) -> Text:
    """``text`` (a footer: phrases joined by ' · ') with its lines broken between phrases where they would
    pass ``width``, so that no phrase is cut in two ("run 891 µs (session⏎4.86 ms)"); a phrase longer than
    the line is broken between its words (``report.wrap.phrase_wrap``, as every ``Text`` a SafeConsole
    prints). Styles are kept."""
    return phrase_wrap(text, width)
