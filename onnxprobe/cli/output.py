"""Where a command's report goes: JSON to a file or stdout (--json), and the table unless --json -."""

from __future__ import annotations

from pathlib import Path
from typing import Callable


def check_outputs(model: Path, *paths: Path | None) -> None:
    """Fail before any work when an output path is unusable (missing folder, the model itself)."""
    from onnxprobe.report import io as report_io

    for p in paths:
        if p is not None and str(p) != "-":
            report_io.check_writable(p, model)


def emit(data: dict, json_path: Path | None, render: Callable[[dict], None]) -> None:
    from onnxprobe.report import io as report_io

    if json_path is not None:
        report_io.write_json(data, json_path)
    if json_path is None or str(json_path) != "-":
        render(data)
