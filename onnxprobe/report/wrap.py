"""Text on lines of a width counted in terminal cells (``report.cells``): words broken at spaces, tensor
paths after a '/', items flowed GAP spaces apart. The table's stacked and record layouts and its notes
use them (``report.table``)."""

from __future__ import annotations

import re

from onnxprobe.report import cells as cl
from onnxprobe.report.cells import cells

GAP = 2  # spaces between two items of a line, as between two table columns


def wrap(text: str, width: int) -> list[str]:
    """``text`` on lines of at most ``width``, broken at spaces, and inside a word too long for a line
    after its '/' (a tensor path), anywhere only where a part is longer than the line."""
    lines, line = [], ""
    for word in text.split(" "):
        pieces = [word] if cl.cells(word) <= width else [p for part in re.split(r"(?<=/)", word)
                                                         for p in cl.chop(part, width) or [part]]
        for k, piece in enumerate(pieces):
            sep = "" if k or not line else " "
            if cl.cells(line) + len(sep) + cl.cells(piece) <= width:
                line += sep + piece
            else:
                if line:
                    lines.append(line)
                line = piece
    if line or not lines:
        lines.append(line)
    return lines


def fold(text: str, width: int, indent: str, label: str = "") -> list[str]:
    """``label`` then ``text`` on lines of at most ``width`` (the first indented by ``indent``, the others
    twice as much), ``text`` broken after a '/' or a space where it can be (a link cell: '→ Identity_8 ·
    Loop_9 body output'), anywhere where it cannot; the label is never broken (the debugger's 'from / to')."""
    lines, line = [], indent
    parts = re.split(r"(?<=[/ ])", text)
    parts[0] = label + parts[0]
    for part in parts:
        while part:
            room = width - cl.cells(line)
            if cl.cells(part) <= room:
                line, part = line + part, ""
            elif line.strip() and cl.cells(part) <= width - len(indent) * 2:
                lines.append(line.rstrip(" "))
                line = indent * 2
            else:  # at least one character, where a two-cell one meets a one-cell room
                take = cl.head(part, room) or part[0]
                line, part = line + take, part[len(take):]
                if part:
                    lines.append(line)
                    line = indent * 2
    if line.strip():
        lines.append(line)
    return lines


def flow(items: list[str], width: int, indent: str, hang: str = "") -> list[str]:
    """Items joined by GAP spaces, on as many lines (each starting with ``indent``, and the lines after the
    first with ``hang`` too) as the width needs."""
    lines: list[str] = []
    line = ""

    def lead() -> str:
        return indent + (hang if lines else "")

    for item in items:
        if len(lead()) + cl.cells(item) > width:  # too long for a line of its own: wrapped, then indented once more
            if line:
                lines.append(lead() + line)
                line = ""
            chunks = wrap(item, max(width - 2 * len(lead()), 1))
            first = lead()
            lines += [first + chunks[0]] + [first + (indent or hang) + c for c in chunks[1:]]
            continue
        if line and len(lead()) + cl.cells(line) + GAP + cl.cells(item) > width:
            lines.append(lead() + line)
            line = ""
        line += (" " * GAP if line else "") + item
    if line:
        lines.append(lead() + line)
    return lines


# --- lines of prose (a report's header, footer and notes): broken between phrases -------------------------
# Break points, best first: 0 between phrases (' · '); 1 a space outside parentheses, or after a '/' of a
# path there; 2 after a ';', ',' or ':' inside them; 3 another space inside them (or a path's '/'); 4 a
# space that holds two words together (a number and its unit, a flag and its value, an operator and what it
# compares), or a '/' of a word that is no path (NaN/Inf, --metric/--min-sqnr); 5 anywhere.
_UNITS = frozenset("dB ms µs ns s min h % B KiB MiB GiB kB MB GB pairs".split())
_OPERATORS = frozenset("< > <= >= = == != ≤ ≥ + - * × → ↔ ±".split())
_PHRASE = re.compile(r" +· +")
_SPACES = re.compile(r" +")
CHOP = 5


def _glued(prev: str, nxt: str) -> bool:
    """Whether the space between the words ``prev`` and ``nxt`` holds them together."""
    if prev in _OPERATORS or nxt in _OPERATORS:
        return True
    if prev[-1:].isdigit() and nxt.rstrip(",;:)") in _UNITS:
        return True
    return prev.startswith("--") and prev[-1:].isalnum() and "=" not in prev and not nxt.startswith(("-", "("))


def _is_path(word: str) -> bool:
    """A file or tensor path, broken after its '/' as a sentence at a space: '/m/layer.3/MatMul_output_0',
    'sample_models/cnn.onnx' (a word whose '/' reads 'or' or 'per', 'NaN/Inf', is not)."""
    word = word.strip("()[],;:'\"")
    return "/" in word and "/-" not in word and (word.startswith(("/", "./", "~/")) or "." in word.rsplit("/", 1)[-1])


def _breaks(line: str, start: int) -> list[tuple[int, int, int]]:
    """(level, start, end) of each break point of ``line`` from ``start``: a break there drops line[start:end]."""
    out = [(0, m.start(), m.end()) for m in _PHRASE.finditer(line, start)]
    taken = {k for _, a, b in out for k in range(a, b)}
    depth, depths = 0, []
    for ch in line:
        depths.append(depth)
        depth = depth + 1 if ch in "([" else max(depth - 1, 0) if ch in ")]" else depth
    words = [(m.start(), m.end()) for m in re.finditer(r"[^ ]+", line[start:])]
    words = [(a + start, b + start) for a, b in words]
    for (a0, b0), (a1, b1) in zip(words, words[1:]):
        if b0 in taken:
            continue
        prev, nxt = line[a0:b0], line[a1:b1]
        level = (4 if _glued(prev, nxt) else 1 if depths[b0] == 0 else 2 if prev[-1] in ";,:" else 3)
        out.append((level, b0, a1))
    for a, b in words:
        word = line[a:b]
        path = _is_path(word)
        for k in range(a, b - 1):
            if line[k] == "/":
                out.append(((1 if depths[k] == 0 else 3) if path else 4, k + 1, k + 1))
    out += [(CHOP, k, k) for k in range(start + 1, len(line))]
    return sorted(out, key=lambda x: (x[1], x[0]))


def phrase_spans(line: str, width: int) -> tuple[str, list[tuple[int, int]]]:
    """(indent, [(start, end)]): ``line`` (no newline) as lines of at most ``width`` cells, each
    line[start:end] after ``indent`` (the line's own leading spaces). A line is broken at its best break
    point that fits: between phrases, then words outside parentheses, then inside them... (``_breaks``); a
    part that does not fit a line of its own starts one (unless it is a path, which fills the line after
    a '/'), and is broken at its next best points."""
    indent = line[:len(line) - len(line.lstrip(" "))]
    if cells(line) <= width or not line.strip():
        return "", [(0, len(line))]
    width = max(width - cells(indent), 1)
    end = len(line.rstrip(" "))
    points = _breaks(line[:end], len(indent))
    lines: list[tuple[int, int]] = []
    cur: list[int] = []  # [start, end] of the line being filled

    def flow(a: int, b: int, level: int) -> None:
        if level > CHOP:
            return
        parts, at = [], a
        for lv, s, e in points:
            if lv == level and a < s and e < b and s >= at:
                parts.append((at, s))
                at = e
        parts.append((at, b))
        for pa, pb in parts:
            if cur and cells(line[cur[0]:pb]) <= width:
                cur[1] = pb
            elif cells(line[pa:pb]) <= width or pb - pa == 1:
                if cur:
                    lines.append((cur[0], cur[1]))
                cur[:] = [pa, pb]
            else:  # too long for a line: broken at its next best points, on a line of its own but for a path's parts
                if cur and level < 4 and not (level in (1, 3) and _is_path(line[pa:pb])):
                    lines.append((cur[0], cur[1]))
                    cur.clear()
                flow(pa, pb, level + 1)

    flow(len(indent), end, 0)
    if cur:
        lines.append((cur[0], cur[1]))
    return indent, lines


def phrase_lines(text: str, width: int) -> list[str]:
    """``text`` as lines of at most ``width`` cells, broken between phrases (``phrase_spans``)."""
    out = []
    for line in text.split("\n"):
        indent, spans = phrase_spans(line, width)
        out += [indent + line[a:b] for a, b in spans]
    return out


def phrase_wrap(text, width: int):
    """A Rich ``Text`` broken as ``phrase_lines`` breaks its string, its styles kept."""
    from rich.text import Text

    plain = text.plain
    if "\n" not in plain and cells(plain) <= width:
        return text
    out, offset = [], 0
    for line in plain.split("\n"):
        indent, spans = phrase_spans(line, width)
        for a, b in spans:
            piece = Text(indent) + text[offset + a:offset + b] if indent and a else text[offset + a:offset + b]
            out.append(piece)
        offset += len(line) + 1
    joined = Text("\n").join(out)
    joined.style, joined.justify, joined.overflow, joined.no_wrap, joined.end = (
        text.style, text.justify, text.overflow, text.no_wrap, text.end)
    return joined
