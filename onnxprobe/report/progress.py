"""Progress on stderr whenever stderr is a terminal, whatever stdout is (a pipe, a file): a spinner while
one run is going, then a bar with counts (``3/7 runs``, ``12/40 gradients checked``), the time so far
and, once the work has taken more than ``ETA_AFTER`` seconds, the time left. Nothing is drawn when stderr
is not a terminal, so logs and pipes get no control sequences.

The label holds the model's file name: it is shown as text (never read as Rich markup, nor as a format
string), its control characters escaped. On a narrow terminal the bar, then the time left, then the time so
far are left out, and only then is the label shortened, so that the count stays on the line (Rich cropped
the line's end: the count went first)."""

from __future__ import annotations

import sys
from functools import cache

from onnxprobe.report.cells import cells
from onnxprobe.report.format import shorten
from onnxprobe.text import clean

ETA_AFTER = 2.0  # seconds of work before the time left is shown
BAR = 40  # Rich's own bar width, where there is room
BAR_MIN = 10  # a narrower bar tells nothing: left out instead
LABEL_MIN = 12  # a label shortened below this reads as nothing: left out instead
TIME, ETA = 7, 12  # '0:00:12', 'left 0:01:15'


@cache
def _eta_class():
    """``EtaColumn``, made when a bar is first drawn: rich.progress is imported only then (~10 ms that
    a command whose stderr is not a terminal never needs)."""
    from rich.progress import TimeRemainingColumn
    from rich.text import Text

    class EtaColumn(TimeRemainingColumn):
        """The time left, shown once the task has run for ETA_AFTER seconds (an estimate from the first
        second of a long job is noise)."""

        def render(self, task) -> Text:
            if (task.elapsed or 0.0) < ETA_AFTER:
                return Text("")
            left = super().render(task)
            return Text.assemble(("left ", "dim"), left)

    return EtaColumn


@cache
def _text_class():
    """``TextColumn`` formats its text with ``str.format`` and reads it as markup: a file name holding
    '{' or '[reverse]' broke or restyled the line. This one shows a ``Text`` as it is."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class FixedColumn(ProgressColumn):
        def __init__(self, text: Text):
            super().__init__()
            self.text = text

        def render(self, task) -> Text:
            return self.text

    return FixedColumn


def __getattr__(name: str):
    if name == "EtaColumn":
        return _eta_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def bar_layout(label: str, unit: str, total: int, width: int) -> tuple[str, int, bool, bool]:
    """(label as shown, bar width, time shown, time left shown) for a bar line within ``width`` cells
    (``label`` as given, ``unit`` as shown: a label is escaped here, once, as ``shorten`` escapes it).
    The spinner, count and unit always; the label says what is running and the count how far, so as the
    width narrows the bar (BAR to BAR_MIN cells, else none) goes first, then the time left, then the time
    so far, and only then is the label shortened (to all that is left, at least LABEL_MIN cells, else none).
    Rich puts one space between columns. (At 80 columns `grad --check`'s label read 'checking the g…ents of
    model.onnx' beside a time of 0:00:01; and where the label did not fit whole, the time was kept before it,
    so at 50 columns a terminal showed a cut label and a time that at 60 it left out.)"""
    room = width - 1  # a line that fills the last cell wraps on some terminals
    room -= 1 + 1 + (2 * len(str(total)) + 1) + 1 + cells(unit)  # spinner, count, unit
    shown = clean(label)
    if cells(shown) + 1 > room:  # no room for anything but the label, shortened
        return (shorten(label, room - 1) if room - 1 >= LABEL_MIN else ""), 0, False, False
    room -= cells(shown) + 1
    time = room >= TIME + 1
    room -= (TIME + 1) if time else 0
    eta = time and room >= ETA + 1
    room -= (ETA + 1) if eta else 0
    bar = min(BAR, room - 1) if eta and room - 1 >= BAR_MIN else 0
    return shown, bar, time, eta


class Progress:
    """``with Progress("probing model.onnx", "runs") as p: api.layers(..., progress=p.update)``.
    ``phase(label, unit)`` starts a new count (the checking after a forward/backward run)."""

    def __init__(self, label: str, unit: str = "runs"):
        # a file name: its control characters (a bell, an ESC) escaped where it is shown (``shorten``, ``bar_layout``),
        # once: ``clean`` doubles backslashes, so escaping an escaped label again showed b\\x07el for b<bell>el
        self.label = label
        self.unit = clean(unit)
        self._console = None  # Rich's, made when first needed: not at all where stderr is no terminal
        self.bar = None  # a rich.progress.Progress, once there is a count to show
        self.task = None
        self.status = None

    @property
    def console(self):
        if self._console is None:
            from onnxprobe.report.console import stderr_console

            self._console = stderr_console()
        return self._console

    @property
    def shown(self) -> bool:
        """Only on a real terminal: rich's is_terminal is also true under FORCE_COLOR (which asks for colour,
        not for a spinner's cursor codes in a CI log). stderr is looked at first, so that a command whose stderr
        is a pipe or a file never imports Rich for its progress (30-50 ms)."""
        isatty = getattr(sys.stderr if self._console is None else self.console.file, "isatty", None)
        try:
            return bool(isatty and isatty()) and self.console.is_terminal
        except ValueError:  # a closed file
            return False

    def __enter__(self) -> "Progress":
        if self.shown:
            room = max(self.console.width - 4, LABEL_MIN)  # the spinner, its space, the '…', a spare cell
            from rich.text import Text

            self.status = self.console.status(Text(shorten(self.label, room) + "…"), spinner="dots")
            self.status.__enter__()
        return self

    def phase(self, label: str, unit: str | None = None) -> None:
        """A new stage of the work: the spinner or bar so far is replaced."""
        self._close(None, None, None)
        self.label, self.unit = label, clean(unit) if unit else self.unit
        self.__enter__()

    def update(self, done: int, total: int) -> None:
        if not self.shown or total <= 1:
            return
        if self.bar is None:
            if self.status is not None:
                self.status.__exit__(None, None, None)
                self.status = None
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, SpinnerColumn, TimeElapsedColumn
            from rich.text import Text

            label, bar, time, eta = bar_layout(self.label, self.unit, total, self.console.width)
            fixed = _text_class()
            columns = [SpinnerColumn()] + ([fixed(Text(label))] if label else []) + ([BarColumn(bar)] if bar else [])
            columns += [MofNCompleteColumn(), fixed(Text(self.unit))] + ([TimeElapsedColumn()] if time else [])
            self.bar = Bar(*columns, *([_eta_class()()] if eta else []), console=self.console, transient=True)
            self.bar.__enter__()
            self.task = self.bar.add_task(clean(self.label), total=total)
        self.bar.update(self.task, completed=done, total=total)

    def _close(self, *exc) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)
            self.bar = None
        if self.status is not None:
            self.status.__exit__(*exc)
            self.status = None

    def __exit__(self, *exc) -> None:
        self._close(*exc)
