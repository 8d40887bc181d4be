"""The one output channel of the command line: data (tables, JSON) to stdout, diagnostics (notes,
errors, progress) to stderr. Every string shown passes through ``text.clean``/``text.one_line`` here or in
the renderers, so nothing from a model reaches the terminal raw; JSON keeps the exact strings."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Iterable

from onnxprobe.report import io as report_io
from onnxprobe.report.console import stdout_console
from onnxprobe.text import one_line


def check_outputs(model: Path, *paths: Path | None) -> None:
    """Fail before any work when an output path is unusable (missing folder, the model itself)."""
    for p in paths:
        if p is not None and str(p) != "-":
            report_io.check_writable(p, model)


def show(renderables: Iterable) -> None:
    console = stdout_console()
    for r in renderables:
        console.print(r)


def emit(data: dict, json_path: Path | None, render: Callable[[int], list]) -> None:
    """``--json FILE`` writes ``data``; the table (``render(width)``) goes to stdout unless ``--json -``."""
    if json_path is not None:
        report_io.write_json(data, json_path)
    if json_path is None or str(json_path) != "-":
        show(render(stdout_console().width))


def notes(messages: Iterable[str]) -> None:
    for m in dict.fromkeys(messages):
        print(f"onnxprobe: note: {one_line(m)}", file=sys.stderr)


def error(message: str) -> None:
    print(f"onnxprobe: error: {one_line(message)}", file=sys.stderr)


def stdout_width() -> int:
    return stdout_console().width


def show_err(renderables: Iterable) -> None:
    """Renderables on stderr (what a command wrote, when stdout carries its report)."""
    from onnxprobe.report.console import stderr_console

    console = stderr_console()
    for r in renderables:
        console.print(r)
