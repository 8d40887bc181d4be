"""Exporting a module for ``export_and_diff``: ``torch.onnx.export`` with either exporter, the inputs
named after ``forward()``'s parameters. The dynamo exporter needs onnxscript (the ``torch`` extra)."""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path

from onnxprobe.errors import ExecutionError, MissingExtra, first_line
from onnxprobe.torch.load import eval_mode, require_torch


def input_names(module, args: tuple) -> list[str]:
    """forward()'s positional parameter names for ``args`` (``x``, ``input_ids``...), else input_K."""
    try:
        params = [p for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params[: len(args)]]
    return names + [f"input_{k}" for k in range(len(names), len(args))]


def export(module, args: tuple, path: Path, *, dynamo: bool = True, opset: int | None = None) -> Path:
    """Write ``module`` (in eval mode) exported on ``args`` to ``path``; the path written."""
    torch = require_torch()
    if dynamo and importlib.util.find_spec("onnxscript") is None:  # the dynamo exporter imports it
        raise MissingExtra("the dynamo exporter", "torch", "onnxscript")
    kwargs = {"opset_version": opset} if opset else {}
    try:
        with eval_mode(module), contextlib.redirect_stdout(sys.stderr):  # the exporter prints its progress: stdout stays the report's
            torch.onnx.export(module, tuple(args), str(path), dynamo=dynamo, input_names=input_names(module, args),
                              verbose=False, **kwargs)
    except Exception as e:  # noqa: BLE001 - the exporters raise many kinds
        other = "dynamo=False (the legacy exporter)" if dynamo else "dynamo=True (the torch.export-based exporter)"
        raise ExecutionError(f"torch.onnx.export ({'dynamo' if dynamo else 'legacy'}) failed: {cause(e)}; "
                             f"try {other}") from None
    return Path(path)


_SUMMARY = "## Exception summary"
_CALL = re.compile(r'The following call raised this error:\s*File "([^"]+)", line (\d+), in (\S+)\s*\n\s*(\S[^\n]*)')


def cause(e: BaseException) -> str:
    """One line naming why an export failed: the innermost exception of the chain (the dynamo exporter's
    first line is "Failed to export the model with torch.export. This is step 1/3 ... Next steps:"), else
    its message's "## Exception summary", and where in the user's forward() the exporter says it stopped."""
    inner, seen = e, {id(e)}
    while (nxt := inner.__cause__ or (None if inner.__suppress_context__ else inner.__context__)) is not None \
            and id(nxt) not in seen:
        seen.add(id(nxt))
        inner = nxt
    text = str(e)
    if inner is not e and str(inner).strip():
        why = f"{type(inner).__name__}: {first_line(inner)}"
    elif _SUMMARY in text:
        rest = [ln.strip() for ln in text.split(_SUMMARY, 1)[1].splitlines() if ln.strip()]
        why = re.sub(r"^<class '(?:[\w.]*\.)?(\w+)'>:", r"\1:", rest[0]) if rest else first_line(e)
    else:
        why = f"{type(e).__name__}: {first_line(e)}"
    at = _CALL.search(text) or _CALL.search(str(inner))
    where = f" (at {at.group(1)}:{at.group(2)} in {at.group(3)}: {at.group(4).strip()[:80]})" if at else ""
    return why[:300] + where
