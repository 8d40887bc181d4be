"""The one place where exceptions become messages: one line on stderr and an exit code.

OnnxProbeError subclasses carry their exit code (2 for usage, 1 for model/runtime). Anything else is an
internal error, reported in one line too. ``ONNXPROBE_DEBUG=1`` re-raises, with the full traceback.
"""

from __future__ import annotations

import functools
import warnings
from typing import Callable

import typer

from onnxprobe.cli.output import error, notes, reader_gone
from onnxprobe.errors import OnnxProbeError, debug_enabled, internal_error_text, path_error_text


def handle_errors(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            with warnings.catch_warnings():
                if not debug_enabled():
                    warnings.showwarning = _as_note
                return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except OnnxProbeError as e:
            if debug_enabled():
                raise
            error(e.cli_message or str(e), e.line_limit)  # a setting named by its flag alone
            raise typer.Exit(e.exit_code) from None
        except KeyboardInterrupt:
            error("interrupted")
            raise typer.Exit(130) from None
        except BrokenPipeError:  # stdout's reader left where no output channel writes (cli.output.writing_stdout)
            reader_gone()
            raise typer.Exit(141) from None  # as a process SIGPIPE ended: the shell's code for it
        except OSError as e:
            if debug_enabled():
                raise
            if e.filename is None:  # not about a path of the user's
                error(internal_error_text(e))
                raise typer.Exit(1) from None
            error(path_error_text(e))  # a path the system refuses (a name too long, a permission...)
            raise typer.Exit(2) from None
        except MemoryError:
            if debug_enabled():
                raise
            error("out of memory: the model or its tensors do not fit (try smaller --shape dimensions or --max-memory)")
            raise typer.Exit(1) from None
        except Exception as e:  # noqa: BLE001
            if debug_enabled():
                raise
            error(internal_error_text(e))
            raise typer.Exit(1) from None

    return wrapper


_noted: set[str] = set()


def _as_note(message, category, filename, lineno, file=None, line=None) -> None:
    """A Python warning (a library's: onnx's about an external data key it ignores...) as one note line,
    each text once, instead of Python's two lines with a source path (ONNXPROBE_DEBUG=1 keeps those)."""
    text = str(message)
    if text not in _noted:
        _noted.add(text)
        notes([text])
