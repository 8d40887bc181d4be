"""Text on lines of a width counted in terminal cells (``report.cells``): words broken at spaces, tensor
paths after a '/', items flowed GAP spaces apart. The table's stacked and record layouts and its notes
use them (``report.table``)."""

from __future__ import annotations

import re

from onnxprobe.report import cells as cl

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
