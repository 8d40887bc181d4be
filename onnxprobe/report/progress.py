"""Progress on stderr: a spinner while one run is going, a bar once there are several (chunks,
batches). Nothing is drawn when stderr is not a terminal."""

from __future__ import annotations

from rich.progress import BarColumn, MofNCompleteColumn, Progress as _Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from onnxprobe.report.console import stderr_console


class Progress:
    def __init__(self, label: str):
        self.label = label
        self.console = stderr_console()
        self.bar: _Progress | None = None
        self.task = None
        self.status = None

    def __enter__(self) -> "Progress":
        if self.console.is_terminal:
            self.status = self.console.status(f"{self.label}…", spinner="dots")
            self.status.__enter__()
        return self

    def update(self, done: int, total: int) -> None:
        if not self.console.is_terminal or total <= 1:
            return
        if self.bar is None:
            if self.status is not None:
                self.status.__exit__(None, None, None)
                self.status = None
            self.bar = _Progress(SpinnerColumn(), TextColumn(self.label), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=self.console, transient=True)
            self.bar.__enter__()
            self.task = self.bar.add_task(self.label, total=total)
        self.bar.update(self.task, completed=done, total=total)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)
        if self.status is not None:
            self.status.__exit__(*exc)
