"""Parsing what the user types in a debugging session: command lines, selections, slices. Pure; every
problem is a one-line UsageError.

- ``split(line)``: shell-like words (quotes group, backslashes are kept, no globbing, no evaluation; a lone ``#``
  starts a comment).
- ``pop_option(args, "--model", "-m")``: takes ``--model b`` / ``--model=b`` / ``-m b`` out of the words.
- ``parse_selection(words)``: the selection language of ``layers``: ``--op TYPE``, ``--name GLOB``,
  ``--all``, ``--range A:B``, ``--include-constants``, and short forms ``op:TYPE[,TYPE]``, ``range:A:B``,
  ``all``, and a bare ``GLOB`` (same as ``--name GLOB``).
- ``parse_slice("[0, :3, 5:10:2]")``: a numpy-style index (ints, slices, ``...``, ``None``) without eval.
"""

from __future__ import annotations

import re

from onnxprobe.errors import UsageError
from onnxprobe.api import Selection
from onnxprobe.text import clean


def without_comment(line: str) -> str:
    """``line`` up to a comment: a ``#`` outside quotes that starts a word and stands alone (``#`` then a
    space or the end), as in ``run   # runs what changed``. ``#3`` (``node #3``) and ``a#b`` are words."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()) and (i + 1 == len(line) or line[i + 1].isspace()):
            return line[:i]
    return line


def split(line: str) -> list[str]:
    """The words of ``line``: quotes group (and go, ``'a b'c`` is one word ``a bc``), a backslash is a
    character like any other. Names are typed as listings print them (``a\\\\nb`` for a backslash and an n,
    ``a\\nb`` for a newline, ``text.as_typed``): shlex's posix mode took one backslash away first, so the
    listed name of one tensor selected another."""
    words: list[str] = []
    word: list[str] | None = None
    quote = None
    for ch in without_comment(line):
        if quote:
            if ch == quote:
                quote = None
            else:
                word.append(ch)
        elif ch in "'\"":
            quote, word = ch, word if word is not None else []
        elif ch.isspace():
            if word is not None:
                words.append("".join(word))
            word = None
        else:
            word = word if word is not None else []
            word.append(ch)
    if quote:
        raise UsageError("cannot read the command line: No closing quotation")
    if word is not None:
        words.append("".join(word))
    return words


def typable(name: str, bare: bool = True) -> str:
    """``name`` as ``split`` reads it back: as listed (``clean``: a newline as ``\\n``, a backslash doubled), bare where
    it holds no space, quote, ``#`` or ``;`` (and ``bare``: a completion; a message quotes every name), else in quotes
    that group it (a quote of the other kind inside them; both kinds: shell-like runs, ``'a '"'"'b'`` for ``a 'b``,
    as ``split`` joins them)."""
    text = clean(name)
    if bare and text and all(c not in text for c in " '\"#;"):
        return text
    if "'" not in text:
        return f"'{text}'"
    if '"' not in text:
        return f'"{text}"'
    return "'" + text.replace("'", "'\"'\"'") + "'"


def pop_option(args: list[str], *names: str, flag: bool = False) -> str | bool | None:
    """Remove an option from ``args`` (in place) and return its value (or True for a flag). One given twice
    with different values is refused, as on the command line (the last silently won); the same value twice
    is taken."""
    out: str | bool | None = None
    first: str | None = None
    i = 0
    while i < len(args):
        a = args[i]
        hit = next((n for n in names if a == n or (not flag and a.startswith(n + "="))), None)
        if hit is None:
            i += 1
            continue
        if flag:
            del args[i]
            out = True
            continue
        if a.startswith(hit + "="):
            value = a[len(hit) + 1:]
            del args[i]
        elif i + 1 < len(args):
            value = args[i + 1]
            del args[i:i + 2]
        else:
            raise UsageError(f"{hit} needs a value")
        if out is not None and value != out:
            raise UsageError(f"{first} given twice with different values ({out!r} and {value!r}); give it once")
        first, out = first or hit, value
    return out


def pop_all(args: list[str], name: str) -> list[str]:
    """Remove every ``NAME VALUE`` / ``NAME=VALUE`` from ``args`` (in place); their values, in order."""
    out: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == name:
            if i + 1 >= len(args):
                raise UsageError(f"{name} needs a value")
            out.append(args[i + 1])
            del args[i:i + 2]
        elif a.startswith(name + "="):
            out.append(a[len(name) + 1:])
            del args[i]
        else:
            i += 1
    return out


# the --options parse_selection reads (the debugger's command check takes them from here)
SELECTION_OPTIONS = frozenset({"--op", "--name", "--range", "--all", "--include-constants", "--constants"})


def parse_selection(words: list[str]) -> Selection:
    """Words -> Selection. An empty list gives the default selection (``Selection()``)."""
    ops: list[str] = []
    names: list[str] = []
    all_ = False
    consts = False
    rng: str | None = None
    it = iter(words)
    for w in it:
        if w in ("--op", "--name", "--range"):
            v = next(it, None)
            if v is None:
                raise UsageError(f"{w} needs a value")
            if w == "--op":
                ops.append(v)  # comma-separated op types: Selection splits them
            elif w == "--name":
                names.append(v)
            else:
                rng = v
        elif w.startswith(("--op=", "--name=", "--range=")):
            k, _, v = w.partition("=")
            if k == "--op":
                ops.append(v)
            elif k == "--name":
                names.append(v)
            else:
                rng = v
        elif w in ("--all", "all"):
            all_ = True
        elif w in ("--include-constants", "--constants"):
            consts = True
        elif w.startswith("op:"):
            if not w[3:]:
                raise UsageError("op: needs an op type, e.g. op:Conv")
            ops.append(w[3:])
        elif w.startswith("range:"):
            rng = w[6:]
        elif re.fullmatch(r"-?\d*:-?\d*", w) and w != ":":
            rng = w
        elif w.startswith("-") and not w.lstrip("-").replace(".", "").isdigit():
            raise UsageError(f"unknown selection option {w!r} (use --op TYPE, --name GLOB, --all, --range A:B, --include-constants)")
        else:
            names.append(w)
    return Selection(ops=tuple(ops), names=tuple(names), all=all_, range=rng, include_constants=consts)


def describe_selection(sel: Selection) -> str:
    parts = [f"op:{o}" for o in sel.ops] + list(sel.names)
    if sel.all:
        parts.append("all")
    if sel.range:
        parts.append(f"range:{sel.range}")
    if sel.include_constants:
        parts.append("--include-constants")
    return " ".join(parts) or "(default: Conv/Gemm/MatMul/attention outputs and the model outputs)"


_INT = r"[-+]?\d+"


def parse_slice(text: str) -> tuple:
    """'[0, :3, 5:10:2]' -> (0, slice(None, 3), slice(5, 10, 2)). Brackets are optional; '...' and
    'None' (a new axis) are allowed. Only integers: no expressions, nothing is evaluated."""
    t = text.strip()
    if t.startswith("["):
        if not t.endswith("]"):
            raise UsageError(f"slice {text!r}: missing ']'")
        t = t[1:-1]
    if not t.strip():
        return ()
    out: list = []
    for part in t.split(","):
        p = part.strip()
        if p == "...":
            out.append(Ellipsis)
        elif p in ("None", "newaxis", "np.newaxis"):
            out.append(None)
        elif ":" in p:
            bits = [b.strip() for b in p.split(":")]
            if len(bits) > 3 or any(b and not re.fullmatch(_INT, b) for b in bits):
                raise UsageError(f"slice {text!r}: {p!r} is not START:STOP:STEP with integers")
            vals = [int(b) if b else None for b in bits]
            if len(vals) == 3 and vals[2] == 0:
                raise UsageError(f"slice {text!r}: step cannot be 0")
            out.append(slice(*vals))
        elif re.fullmatch(_INT, p):
            out.append(int(p))
        else:
            raise UsageError(f"slice {text!r}: {p!r} is not an integer, START:STOP:STEP, '...' or None")
    if sum(1 for x in out if x is Ellipsis) > 1:
        raise UsageError(f"slice {text!r}: at most one '...'")
    return tuple(out)


def format_slice(index: tuple) -> str:
    def one(x) -> str:
        if x is Ellipsis:
            return "..."
        if x is None:
            return "None"
        if isinstance(x, slice):
            s = f"{'' if x.start is None else x.start}:{'' if x.stop is None else x.stop}"
            return s + (f":{x.step}" if x.step is not None else "")
        return str(x)

    return "[" + ", ".join(one(x) for x in index) + "]"
