"""Progress on stderr whenever stderr is a terminal, whatever stdout is (a pipe, a file): a spinner while
one run is going, then a bar with counts (``3/7 runs``, ``12/40 gradients checked``), the time so far
and, once the work has taken more than ``ETA_AFTER`` seconds, the time left. Nothing is drawn when stderr
is not a terminal, so logs and pipes get no control sequences."""

from __future__ import annotations

from functools import cache

from rich.text import Text

from onnxprobe.report.console import stderr_console

ETA_AFTER = 2.0  # seconds of work before the time left is shown


@cache
def _eta_class():
    """``EtaColumn``, made when a bar is first drawn: rich.progress is imported only then (~10 ms that
    a command whose stderr is not a terminal never needs)."""
    from rich.progress import TimeRemainingColumn

    class EtaColumn(TimeRemainingColumn):
        """The time left, shown once the task has run for ETA_AFTER seconds (an estimate from the first
        second of a long job is noise)."""

        def render(self, task) -> Text:
            if (task.elapsed or 0.0) < ETA_AFTER:
                return Text("")
            left = super().render(task)
            return Text.assemble(("left ", "dim"), left)

    return EtaColumn


def __getattr__(name: str):
    if name == "EtaColumn":
        return _eta_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Progress:
    """``with Progress("probing model.onnx", "runs") as p: api.layers(..., progress=p.update)``.
    ``phase(label, unit)`` starts a new count (the checking after a forward/backward run)."""

    def __init__(self, label: str, unit: str = "runs"):
        self.label = label
        self.unit = unit
        self.console = stderr_console()
        self.bar = None  # a rich.progress.Progress, once there is a count to show
        self.task = None
        self.status = None

    @property
    def shown(self) -> bool:
        """Only on a real terminal: rich's is_terminal is also true under FORCE_COLOR (which asks for colour,
        not for a spinner's cursor codes in a CI log)."""
        isatty = getattr(self.console.file, "isatty", None)
        try:
            return bool(isatty and isatty()) and self.console.is_terminal
        except ValueError:  # a closed file
            return False

    def __enter__(self) -> "Progress":
        if self.shown:
            self.status = self.console.status(f"{self.label}…", spinner="dots")
            self.status.__enter__()
        return self

    def phase(self, label: str, unit: str | None = None) -> None:
        """A new stage of the work: the spinner or bar so far is replaced."""
        self._close(None, None, None)
        self.label, self.unit = label, unit or self.unit
        self.__enter__()

    def update(self, done: int, total: int) -> None:
        if not self.shown or total <= 1:
            return
        if self.bar is None:
            if self.status is not None:
                self.status.__exit__(None, None, None)
                self.status = None
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, SpinnerColumn, TextColumn, TimeElapsedColumn

            self.bar = Bar(SpinnerColumn(), TextColumn(self.label), BarColumn(), MofNCompleteColumn(),
                           TextColumn(self.unit), TimeElapsedColumn(), _eta_class()(), console=self.console, transient=True)
            self.bar.__enter__()
            self.task = self.bar.add_task(self.label, total=total)
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
