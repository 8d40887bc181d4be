"""Writing a report's renderables to a console: the one loop behind what a command prints on stdout
(``cli.output``) and ``api.text`` (the same report as a string, for a notebook)."""

from __future__ import annotations

from typing import Iterable

from rich.console import Console

from onnxprobe.report.table import Table


def print_items(console: Console, items: Iterable) -> None:
    """``items`` (what ``report.table.present`` gives) on ``console``: csv, markdown or json rows (strings) as
    they are, a ``Table`` laid out at the console's width, anything else (a Rich Text) printed."""
    for r in items:
        if isinstance(r, str):
            console.file.write(r)
            console.file.flush()
        elif isinstance(r, Table):
            console.print_lines(r.lines(console.width))
        else:
            console.print(r)
