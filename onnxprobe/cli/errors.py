"""The one place where exceptions become messages: one line on stderr and an exit code.

OnnxProbeError subclasses carry their exit code (2 for usage, 1 for model/runtime). Anything else is an
internal error, reported in one line too. ``ONNXPROBE_DEBUG=1`` re-raises, with the full traceback.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Callable

import typer


def debug_enabled() -> bool:
    return os.environ.get("ONNXPROBE_DEBUG", "") not in ("", "0")


def _say(msg: str) -> None:
    print(f"onnxprobe: error: {msg}", file=sys.stderr)


def handle_errors(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from onnxprobe.errors import OnnxProbeError, internal_error_text

        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except OnnxProbeError as e:
            if debug_enabled():
                raise
            _say(str(e))
            raise typer.Exit(e.exit_code) from None
        except KeyboardInterrupt:
            _say("interrupted")
            raise typer.Exit(130) from None
        except Exception as e:  # noqa: BLE001
            if debug_enabled():
                raise
            _say(internal_error_text(e))
            raise typer.Exit(1) from None

    return wrapper


def warn(messages: list[str]) -> None:
    for m in dict.fromkeys(messages):
        print(f"onnxprobe: note: {m}", file=sys.stderr)
