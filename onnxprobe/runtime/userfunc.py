"""A function from where the user says it is: ``FILE.py:FUNC`` (the PyTorch module of ``--vs-torch``,
the input pipeline of ``--inputs-from``). The file is imported as a module of its own; every way this
can go wrong (no such file, not Python, the import raises, no such function, the call raises) is one
line naming the flag, the file and the function."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from typing import Callable

from onnxprobe.errors import UsageError, error_about, first_line
from onnxprobe.fileio import input_file, protect
from onnxprobe.text import clean, quote


def user_code():
    """Around the user's code (the import of FILE.py, FUNC(), a module's forward, a pipeline's items): what
    it prints goes to stderr, so that stdout stays the report's (``--json -``, csv, a pipe into jq)."""
    return contextlib.redirect_stdout(sys.stderr)


def split_spec(spec) -> tuple[str, str] | None:
    """(FILE, FUNC) of ``FILE.py:FUNC``, split at its last ':' (a Windows path holds one); None without a
    ':' or a FILE. FUNC may be empty: ``load_function`` refuses it, but FILE is the user's file all the same
    (``api.protect_inputs`` keeps outputs off it)."""
    path, sep, func = str(spec).rpartition(":")
    return (path, func) if sep and path else None


def _error(flag: str | tuple[str, str], value: str, rest: str) -> UsageError:
    """A UsageError about ``value`` given to ``flag``: a flag as it is, or (API parameter, flag), which the
    message names as each reader knows it (``errors.error_about``)."""
    return error_about(UsageError, (*flag, value) if isinstance(flag, tuple) else f"{flag} {value}", rest)


def load_function(spec: str, flag: str | tuple[str, str], expects: str) -> tuple[Callable, str]:
    """(the function, its name) of ``FILE.py:FUNC``. ``expects`` says what FUNC should be, for the
    message when ``spec`` is not of that form. ``flag``: the flag, or (API parameter, flag)."""
    path, func = split_spec(spec) or ("", "")
    if not path or not func:
        raise _error(flag, quote(spec), f": expected FILE.py:FUNC, {expects}")
    p = input_file(path, "Python file", flag)
    if p.suffix != ".py":
        raise _error(flag, clean(path), ": not a Python file (.py)")
    what = "the Python file of " + (flag[1] if isinstance(flag, tuple) else flag)
    protect(p, what)
    name = f"onnxprobe_user_{abs(hash(str(p.resolve())))}"
    folder = str(p.resolve().parent)
    # its folder first on the module path, as `python FILE.py` puts it (a build file does `from model import Net`);
    # for the rest of the process, since FUNC(), a generator's items or a module's forward may import later
    if folder not in sys.path:
        sys.path.insert(0, folder)
    before = set(sys.modules)
    # the import writes no bytecode beside the file (__pycache__/FILE.cpython-3XX.pyc in the user's folder,
    # which onnxprobe was given to read), nor beside what the file imports while it runs (helpers beside it)
    write_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        mod_spec = importlib.util.spec_from_file_location(name, p)
        code = importlib.util.module_from_spec(mod_spec)
        sys.modules[name] = code
        with user_code():
            mod_spec.loader.exec_module(code)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the user's file may raise anything, sys.exit() too
        raise _error(flag, clean(path), f": importing it raised {raised(e)}") from None
    finally:
        sys.dont_write_bytecode = write_bytecode
        protect_imported(before, folder, what)
    fn = getattr(code, func, None)
    if fn is None or not callable(fn):
        raise _error(flag, clean(spec), f": {clean(path)} has no function {quote(func)}")
    return fn, func


def protect_imported(before: set[str], folder: str, what: str) -> None:
    """The modules imported since ``before`` from ``folder`` (or below it: the user's helpers beside the file, not
    installed packages) recorded as inputs, never to be written (``--json model.py`` would overwrite one)."""
    root = os.path.join(folder, "")
    for m in set(sys.modules) - before:
        f = getattr(sys.modules.get(m), "__file__", None)
        if isinstance(f, str) and os.path.realpath(f).startswith(root):
            protect(f, f"a module that {what} imports")


def call_function(fn: Callable, func: str, spec: str, flag: str | tuple[str, str]):
    """``fn()``, anything it raises as one line; what it imports from beside the user's file stays unwritten too."""
    before = set(sys.modules)
    try:
        with user_code():
            return fn()
    except (Exception, SystemExit) as e:  # noqa: BLE001 - a sys.exit() in it would end onnxprobe silently
        raise _error(flag, clean(spec), f": {clean(func)}() raised {raised(e)}") from None
    finally:
        file = getattr(getattr(fn, "__code__", None), "co_filename", None)
        if isinstance(file, str) and os.path.isfile(file):
            protect_imported(before, os.path.dirname(os.path.realpath(file)), f"the function {clean(func)}")


def raised(e: BaseException) -> str:
    """What a user's code raised, in words: 'ValueError: bad', 'SystemExit (sys.exit(3))'."""
    if isinstance(e, SystemExit):
        return f"SystemExit (sys.exit({e.code!r}))"
    return f"{type(e).__name__}: {first_line(e)}"
