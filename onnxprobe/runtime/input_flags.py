"""The input flags as text: ``--shape NAME=DIMS`` (``parse_shape_overrides``, ``parse_dims``), ``--input NAME=FILE``
(``parse_input_files``) and any repeatable flag's values as the API may give them (``flag_items``). No model
is read here; ``runtime.feeds`` makes the feeds from what these return."""

from __future__ import annotations

from onnxprobe.errors import UsageError, error_about, setting_error
from onnxprobe.text import clean, controls, quote

SHAPE, INPUT = ("shape", "--shape"), ("input_", "--input")


def flag_items(items, flag: str | tuple[str, str], example: str) -> list[str]:
    """A repeatable flag's values as the API may give them: None, one string, or a list of strings (a bare
    string was iterated character by character; a list of numbers failed deep inside). ``flag``: the
    setting, (API parameter, flag), or the flag alone."""
    if items is None:
        return []
    if isinstance(items, str):
        return [items]
    if isinstance(items, (list, tuple)) and all(isinstance(i, str) for i in items):
        return list(items)
    raise error_about(UsageError, flag, f": expected strings such as {example!r}, got {controls(repr(items))[:80]}")


def parse_shape_overrides(items: list[str] | None) -> dict[str, tuple[int, ...]]:
    """--shape NAME=DIMS items (1x3x224x224; ',' separates too) -> {name: dims}, or a UsageError naming the
    item."""
    out: dict[str, tuple[int, ...]] = {}
    for item in flag_items(items, SHAPE, "image=1x3x224x224"):
        name, sep, dims = item.rpartition("=")
        if not sep or not name:
            raise setting_error(UsageError, SHAPE, f"{quote(item)}: expected NAME=DIMS, e.g. image=1x3x224x224")
        shape = parse_dims(dims, (*SHAPE, quote(item)))
        if name in out and out[name] != shape:
            raise setting_error(UsageError, SHAPE, f"{clean(name)}: given twice with different dimensions")
        out[name] = shape
    return out


def parse_dims(dims: str, what: str | tuple[str, ...]) -> tuple[int, ...]:
    """'1x3x224x224' (',' separates too; '' is a scalar) -> dims, or a UsageError that starts with ``what``:
    the setting and its value (``errors.error_about``) or the debugger's command the user wrote."""
    try:
        shape = tuple(int(d) for d in dims.replace(",", "x").split("x")) if dims.strip() else ()
    except ValueError:
        raise error_about(UsageError, what, ": dimensions must be integers separated by 'x' (or ','), e.g. 1x3x224x224") from None
    if any(d < 0 for d in shape):
        raise error_about(UsageError, what, ": dimensions must be non-negative")
    return shape


def parse_input_files(items: list[str] | None) -> dict[str, str]:
    """--input NAME=FILE items -> {name: file} (.npy, .pb, or a literal value: ``input_spec`` reads them)."""
    out: dict[str, str] = {}
    for item in flag_items(items, INPUT, "x=x.npy"):
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            several = " (a .npz holds several inputs: --inputs FILE.npz)" if item.lower().endswith(".npz") and not sep else ""
            raise setting_error(UsageError, INPUT, f"{quote(item)}: expected NAME=FILE (.npy or .pb) or NAME=VALUE (a number or JSON list)"
                             f"{several}")
        if out.get(name, path) != path:  # as --shape: the last one silently won
            raise setting_error(UsageError, INPUT, f"{clean(name)}: given twice ({quote(out[name])} and {quote(path)}); give one")
        out[name] = path
    return out
