"""Text that reaches a terminal: strings from models and paths made safe to show, long values shortened,
sizes and durations in words; and how a user's name pattern meets a model's names (``matches``). Pure
functions; JSON reports keep the exact strings.

Names, doc strings, metadata and file names come from files anyone can write: an ESC sequence in a node
name would reach the terminal as a command, and a newline would forge a line of output. ``clean`` escapes
every control character (and the Unicode controls that reorder text), the way Python's ``repr`` does, so
what is shown is what the file holds and nothing more.
"""

from __future__ import annotations

import fnmatch
import math
import re

# C0 and C1 controls, DEL, and the bidirectional / zero-width format characters that change how the
# rest of a line reads
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")  # U+2028/9: line breaks
# and the backslash, which ``clean`` doubles so that its escapes read back one way: a name 'a\\nb' (a backslash
# and n) and a name holding a newline printed alike, 'a\nb'
# lone surrogates too: a file name of bytes that are not UTF-8, which no UTF-8 stream can write
_UNSAFE_NAME = re.compile("[\\\\\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff]")
_ESCAPE = re.compile(r"\\(?:\\|n|t|r|x[0-9a-f]{2}|u[0-9a-f]{4})")
_LONG_WORD = re.compile(r"\S{121,}")
MAX_LINE = 1000


def _escape(m: re.Match) -> str:
    ch = m.group(0)
    if ch == "\\":
        return "\\\\"
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    if ch == "\r":
        return "\\r"
    o = ord(ch)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def clean(s: object) -> str:
    """``s`` as text with every control character escaped (``\\x1b``, ``\\n``...): safe on a terminal; and
    its backslashes doubled, so that ``unclean`` gives ``s`` back (a name is typed as it is listed)."""
    text = s if isinstance(s, str) else str(s)
    return _UNSAFE_NAME.sub(_escape, text) if _UNSAFE_NAME.search(text) else text


def unclean(text: str) -> str:
    """The string ``clean`` wrote ``text`` from: its escapes read back (``\\n`` a newline, ``\\\\`` one
    backslash); a backslash that starts no escape of ``clean``'s stays as it is."""
    if "\\" not in text:
        return text

    def back(m: re.Match) -> str:
        e = m.group(0)
        return {"\\\\": "\\", "\\n": "\n", "\\t": "\t", "\\r": "\r"}.get(e) or chr(int(e[2:], 16))

    return _ESCAPE.sub(back, text)


def as_typed(text: str, known) -> str:
    """The name ``text`` stands for among ``known`` (a set, a dict): the one listings print that way
    (``unclean``), so that a name holding a newline is typed as it is listed; else ``text`` itself. The listed
    spelling wins where both are names: a name of a backslash and an n is listed with its backslash doubled."""
    raw = unclean(text)
    return raw if raw != text and raw in known else text


def controls(text: str) -> str:
    """``text``'s control characters escaped, its backslashes left: a message, whose names ``quote`` or
    ``repr`` already escaped (``clean`` there would double their backslashes again)."""
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


def pieces(s: object) -> list[tuple[str, bool]]:
    """``s`` as runs of its own text and its control characters, each control as ``clean`` escapes it
    (``\\n``, ``\\x1b``, ``\\u202e``) and flagged True: for a page that shows a name as it is, its backslashes
    single, and marks each escape apart from the text, so that a newline reads apart from a backslash and an n
    (which ``clean`` tells apart by doubling the backslash, the terminal having no other mark)."""
    text = s if isinstance(s, str) else str(s)
    out: list[tuple[str, bool]] = []
    at = 0
    for m in _UNSAFE.finditer(text):
        if m.start() > at:
            out.append((text[at:m.start()], False))
        out.append((_escape(m), True))
        at = m.end()
    if at < len(text) or not out:
        out.append((text[at:], False))
    return out


def quote(s: object) -> str:
    """``s`` cleaned and in quotes, for a name inside a message. ``repr(clean(s))`` escaped every
    backslash that ``clean`` wrote a second time (``'\\x1b[31m'``)."""
    text = clean(s)
    q = '"' if "'" in text and '"' not in text else "'"
    return f"{q}{text}{q}"


def as_word(s: object) -> str:
    """A value the user gave, in a message as typed ("--device tpu: ..."): cleaned, and in quotes (``quote``)
    only where it would not read as one word (empty, spaces, quotes, backslashes, control characters)."""
    text = s if isinstance(s, str) else str(s)
    return text if text and text.isprintable() and not any(c in text for c in " '\"\\") else quote(text)


def some(names, shown: int = 3, form=repr, sep: str = ", ") -> str:
    """The first ``shown`` of ``names``, each in ``form``, joined by ``sep``, and how many more: "'a', 'b', 'c'
    and 4 more" (every list a message shows part of is said this one way)."""
    names = list(names)
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return sep.join(form(n) for n in names[:shown]) + more


def clip(s: str, width: int = 120, count: int | None = None) -> str:
    """Keep both ends of a long value: ``'abcdef…uvwxyz (10000 chars)'``; ``count``: the length said, where
    ``s`` holds more than the value (the quotes around a name)."""
    if len(s) <= width:
        return s
    keep = max(width - 20, 8)
    head, tail = keep * 2 // 3, keep - keep * 2 // 3
    return f"{s[:head]}…{s[-tail:]} ({len(s) if count is None else count} chars)"


_QUOTED = re.compile(r"(['\"])(.*)\1([^\w\s]*)", re.S)  # a word that is a quoted name ('x' or "x", then ":" or ")"...)


def _clip_word(word: str) -> str:
    """A long word of a message shortened, counting the characters of the name it holds, not its quotes."""
    m = _QUOTED.fullmatch(word)
    return clip(word, count=len(m.group(2)) if m else None)


def one_line(message: str, limit: int = MAX_LINE) -> str:
    """A message as one safe line: control characters escaped, very long words (a 10,000-character
    tensor name) shortened, and the whole line at most ``limit`` characters."""
    text = controls(message)
    if len(text) > limit // 2:
        text = _LONG_WORD.sub(lambda m: _clip_word(m.group(0)), text)
    return clip(text, limit) if len(text) > limit else text


def _scaled(n: float, base: float, units: tuple[str, ...]) -> str:
    """``n`` (in ``units[0]``) in the first of ``units``, each ``base`` times the one before, that it reads
    under ``base`` in: three significant digits, whole units from 100 on (1.02e+03 KiB read 1023 KiB in
    exponents), the unit picked after rounding, as ``duration`` does (1048575 B, 1023.999 KiB, read
    '1024 KiB'; 999,999,999 parameters '1e+03M'); the last unit takes any size."""
    for unit in units:
        text = f"{n:.3g}" if abs(n) < 100 else f"{n:.0f}"
        if abs(float(text)) < base or unit == units[-1]:
            return f"{text}{unit}"
        n /= base
    raise AssertionError("unreachable")  # pragma: no cover


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB', 1048000 -> '1023 KiB'."""
    if abs(n) < 1024:
        return f"{int(n)} B"
    return _scaled(n / 1024, 1024, (" KiB", " MiB", " GiB", " TiB"))


def human_count(n: int) -> str:
    """A count of things with thousands separators, and from a million on its size in words: '999,999',
    '12,345,678 (12.3M)', '7,240,000,000 (7.24B)'."""
    if abs(n) < 10**6:
        return f"{n:,}"
    return f"{n:,} ({_scaled(n / 10**6, 1000, ('M', 'B', 'T'))})"


def duration(seconds: float | None) -> str:
    """Seconds in the unit that fits: '840 µs', '12.3 ms', '4.56 s', '5 min 16 s', '1 h 02 min'."""
    if seconds is None:
        return "-"
    s = float(seconds)
    # each unit while the value, rounded as shown, stays under the next one's (999.7 µs reads 1 ms, not 1e+03 µs)
    for scale, unit, limit in ((1e6, "µs", 1000), (1e3, "ms", 1000), (1, "s", 60)):
        if float(f"{s * scale:.3g}") < limit:
            return f"{s * scale:.3g} {unit}"
    if round(s) < 3600:
        m, r = divmod(int(round(s)), 60)
        return f"{m} min {r:02d} s"
    h, r = divmod(int(round(s / 60)), 60)
    return f"{h} h {r:02d} min"


def matches(name: str, pattern: str) -> bool:
    """A model's ``name`` against a user's ``pattern`` (a glob, case-sensitive): the name itself matches, so
    that a tensor called ``x[0]`` or ``a*b`` is reached by its own name, glob characters and all. A pattern
    that holds ``clean``'s escapes (``\\n``, ``\\\\``) meets the names as listings print them, which tells a
    name holding a newline from one holding a backslash and an n."""
    if unclean(pattern) != pattern:  # it holds clean's escapes: a name as listings print it, one way
        name = clean(name)
    return name == pattern or fnmatch.fnmatchcase(name, pattern)


def one_glob_each(what: tuple[str, str], pattern: str, names, say) -> str | None:
    """The hint for a setting ``what`` = (API parameter, flag) that takes one glob each (``--name``, ``--wrt``: a
    name may hold a comma) given a comma-separated list (``conv1,relu*``) that matches nothing as a whole:
    when each of its parts matches one of ``names``, the globs to give instead, in the words of ``say``
    (``errors.Voice``: the API's tuple, the command line's repeated flags); else None."""
    import shlex

    parts = [p.strip() for p in pattern.split(",")]
    if len(parts) < 2 or not all(parts) or not all(any(matches(n, p) for n in names) for p in parts):
        return None
    return say.either(f"{what[0]} takes one glob each (names may hold commas): give {what[0]}={tuple(parts)!r}",
                      f"{what[1]} takes one glob (names may hold commas): repeat it, "
                      + " ".join(f"{what[1]} {shlex.quote(p)}" for p in parts))


# JSON has no NaN or Infinity (jq refuses them): every report says a non-finite number as one of these words
NONFINITE_JSON = ("nan", "inf", "-inf")


def json_word(v):
    """A float for JSON, where a non-finite value must be said, not dropped (a loss, a gradient norm, an SQNR
    of -inf, a max_rel of inf): the string "nan", "inf" or "-inf"; any other value as it is."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else "inf" if v > 0 else "-inf"
    return v


def json_words(data):
    """``data`` (dicts, lists, tuples; numpy floats and float arrays as lists) with every float that is not
    finite as ``json_word`` says it: what each report's own fields did not already say (a null they chose is
    None, and stays). The writers' last step, so that a field that missed it is a word in the report, not an
    'Out of range float values are not JSON compliant' internal error (diff --fp32-sensitivity's +inf gain)."""
    if isinstance(data, dict):
        return {k: json_words(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(json_words(v) for v in data) if type(data) in (list, tuple) else [json_words(v) for v in data]
    if isinstance(data, float):
        return json_word(data)
    kind = getattr(getattr(data, "dtype", None), "kind", None)
    if kind == "f" and hasattr(data, "tolist"):  # a numpy float or float array: Python floats, then words
        return json_words(data.tolist())
    return data


def json_float(v) -> float | None:
    """A number of a JSON report back as a float: a number, or a word of ``json_word`` ("inf" is math.inf);
    None for null (not measured) and anything else."""
    if isinstance(v, str):
        return float(v) if v in NONFINITE_JSON else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
