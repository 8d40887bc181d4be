"""A plain, fast table for long reports: fixed column widths computed once, one styled line per row.

Rich's Table measures and wraps every cell, which takes 1.7 s for the 440 rows of a PP-OCR model; here
cells are already cut to width, so a row is one f-string. ``FastTable`` is a Rich renderable (print it
with ``console.print``): colour follows the console, so it disappears on a plain pipe.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from onnxprobe.text import clean


@dataclass
class FastTable:
    headers: list[str]
    widths: list[int]
    justify: list[str]  # "left" | "right" per column
    rows: list[tuple[list[str], str | None]] = field(default_factory=list)  # (cells, style)
    gap: int = 2

    def add_row(self, cells: list[str], style: str | None = None) -> None:
        self.rows.append((cells, style))

    def _line(self, cells: list[str]) -> str:
        parts = []
        for c, w, j in zip(cells, self.widths, self.justify):
            c = clean(c)
            c = c if len(c) <= w else c[: max(w - 1, 0)] + "…"
            parts.append(c.rjust(w) if j == "right" else c.ljust(w))
        return (" " * self.gap).join(parts).rstrip()

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(self._line(self.headers), style="bold", no_wrap=True)
        yield Text("─" * (sum(self.widths) + self.gap * (len(self.widths) - 1)), style="dim", no_wrap=True)
        for cells, style in self.rows:
            yield Text(self._line(cells), style=style or "", no_wrap=True)
