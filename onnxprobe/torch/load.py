"""Getting a PyTorch module from where the user says it is: ``FILE.py:FUNC``, where ``FUNC()`` returns an
``nn.Module`` or ``(module, example_args)``. torch is imported here and in the rest of onnxprobe/torch/
only, and only when a command asks for it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from onnxprobe.errors import MissingExtra, UsageError, first_line
from onnxprobe.text import clean


def require_torch(what: str = "--vs-torch"):
    """The torch module, or a MissingExtra naming the extra to install."""
    try:
        import torch
    except ImportError:
        raise MissingExtra(what, "torch", "PyTorch") from None
    return torch


def load_module(spec: str) -> tuple[object, tuple | None]:
    """(module, example_args or None) from ``FILE.py:FUNC``. The module is put in eval mode, as exports are."""
    torch = require_torch()
    path, sep, func = str(spec).rpartition(":")
    if not sep or not path or not func:
        raise UsageError(f"--vs-torch {clean(spec)!r}: expected FILE.py:FUNC, a function that returns an nn.Module "
                         "or (module, example_args)")
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"--vs-torch {clean(path)}: no such file")
    if p.suffix != ".py":
        raise UsageError(f"--vs-torch {clean(path)}: not a Python file (.py)")
    name = f"onnxprobe_user_{abs(hash(str(p.resolve())))}"
    try:
        mod_spec = importlib.util.spec_from_file_location(name, p)
        code = importlib.util.module_from_spec(mod_spec)
        sys.modules[name] = code
        mod_spec.loader.exec_module(code)
    except Exception as e:  # noqa: BLE001 - the user's file may raise anything
        raise UsageError(f"--vs-torch {clean(path)}: importing it raised {type(e).__name__}: {first_line(e)}") from None
    fn = getattr(code, func, None)
    if fn is None or not callable(fn):
        raise UsageError(f"--vs-torch {clean(spec)}: {clean(path)} has no function {clean(func)!r}")
    try:
        got = fn()
    except Exception as e:  # noqa: BLE001
        raise UsageError(f"--vs-torch {clean(spec)}: {clean(func)}() raised {type(e).__name__}: {first_line(e)}") from None
    module, args = (got[0], got[1]) if isinstance(got, tuple) and len(got) == 2 else (got, None)
    if not isinstance(module, torch.nn.Module):
        raise UsageError(f"--vs-torch {clean(spec)}: {clean(func)}() returned {type(module).__name__}, not an nn.Module "
                         "(or a tuple (module, example_args))")
    if args is not None and not isinstance(args, (tuple, list)):
        args = (args,)
    return module, (tuple(args) if args is not None else None)
