"""Exporting a module for ``export_and_diff``: ``torch.onnx.export`` with either exporter, the inputs
named after ``forward()``'s parameters. The dynamo exporter needs onnxscript (the ``torch`` extra)."""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
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
        raise ExecutionError(f"torch.onnx.export ({'dynamo' if dynamo else 'legacy'}) failed: "
                             f"{type(e).__name__}: {first_line(e)[:300]}") from None
    return Path(path)
