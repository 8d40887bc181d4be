"""Writing report files: JSON (stdout with '-'). Atomic, never over the user's model."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from onnxprobe.errors import cli_words
from onnxprobe.fileio import write_file
from onnxprobe.text import json_words

# numpy and onnx (through graph.io) are imported where they are used: the command line imports this module
# at start, and `--help` should not pay for them


def check_writable(path: str | os.PathLike, model: str | os.PathLike | None = None, model_is: str = "an input model",
                   flag: str | None = None) -> Path:
    from onnxprobe.fileio import check_output_path

    return check_output_path(path, source=model, source_is=model_is, flag=flag)


def json_text(data: dict) -> str:
    """A report as the command line writes it (``--json``, the debugger's too): notes that name settings
    in the command line's words (``errors.cli_words``; the API's result keeps the API's)."""
    return json.dumps(for_json(data), indent=2, allow_nan=False, default=json_default)


def for_json(data):
    """``json_words(in_cli_words(data))`` in one walk of ``data`` (each walked all of a diff's report, 15,000
    values on PP-OCRv4 det): a container as ``in_cli_words`` makes it, its values each ready; a text in the
    command line's words; anything else (numbers, numpy values, a tuple's subclass) as ``json_words`` says it."""
    if isinstance(data, dict):
        return {k: for_json(v) for k, v in data.items()}
    if isinstance(data, list):
        return [for_json(v) for v in data]
    if type(data) is tuple:
        return tuple(for_json(v) for v in data)
    if isinstance(data, str):
        return cli_words(data)
    return json_words(data)


_AS_THEY_ARE = (int, float, bool, type(None))  # what in_cli_words returns as it is: taken so without a call


def in_cli_words(data):
    """``data`` (dicts, lists, text) with every ``errors.said`` text as the command line says it. A number or None
    is taken as it is without a call (a diff of 12,000 pairs: 470,000 calls, most of them for numbers)."""
    if isinstance(data, dict):
        return {k: v if type(v) in _AS_THEY_ARE else in_cli_words(v) for k, v in data.items()}
    if isinstance(data, list):
        return [v if type(v) in _AS_THEY_ARE else in_cli_words(v) for v in data]
    if type(data) is tuple:  # as it was (a report's dict is drawn from as well as written)
        return tuple(in_cli_words(v) for v in data)
    return cli_words(data) if isinstance(data, str) else data


def write_json(data: dict, path: str | os.PathLike) -> None:
    text = json_text(data)
    if str(path) == "-":
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return
    write_file(path, lambda f: f.write(text.encode() + b"\n"))


def write_text(text: str, path: str | os.PathLike) -> None:
    """A text file (an HTML report), atomically, in UTF-8: a file name of other bytes in it (lone surrogates,
    '\\udcff') is written escaped, as the terminal shows it."""
    write_file(path, lambda f: f.write(text.encode("utf-8", "backslashreplace")))


def json_default(o):
    """numpy scalars and arrays as the Python values json writes."""
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
