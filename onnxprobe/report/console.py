"""The two output sinks: data to stdout, diagnostics (warnings, progress, errors) to stderr.

Colour follows the terminal: on a plain pipe, or with NO_COLOR set, Rich prints plain text. When stdout
is not a terminal the table width is $COLUMNS or 120, so piped tables keep their layout.
"""

from __future__ import annotations

import os
import sys

from rich.console import Console


def stdout_console() -> Console:
    width = None
    if not sys.stdout.isatty():
        width = int(os.environ.get("COLUMNS", "120") or 120)
    return Console(width=width, soft_wrap=False, highlight=False)


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)
