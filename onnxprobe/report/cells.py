"""Text measured in terminal cells, not characters. A CJK character or an emoji takes two cells, so a
column laid out by ``len``/``ljust`` runs past its neighbours on the rows that hold one, and a line
counted within the width by characters is wider than the terminal, where Rich crops whole columns off
it. ``rich.cells`` measures: the count Rich itself renders by. ASCII text skips it (a table lays out
thousands of cells)."""

from __future__ import annotations

from rich.cells import cell_len


def cells(text: str) -> int:
    """How many terminal cells ``text`` takes."""
    return len(text) if text.isascii() else cell_len(text)


def head(text: str, n: int) -> str:
    """The longest start of ``text`` within ``n`` cells (a two-cell character that would straddle the
    edge is left out, not halved)."""
    if cells(text) <= n:
        return text
    if text.isascii():
        return text[:max(n, 0)]
    lo, hi = 0, len(text)  # the longest prefix that fits: cells only grow with the prefix
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if cell_len(text[:mid]) <= n:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def tail(text: str, n: int) -> str:
    """The longest end of ``text`` within ``n`` cells."""
    if cells(text) <= n:
        return text
    if n <= 0:
        return ""
    if text.isascii():
        return text[-n:]
    lo, hi = 0, len(text)  # the earliest start whose suffix fits
    while lo < hi:
        mid = (lo + hi) // 2
        if cell_len(text[mid:]) <= n:
            hi = mid
        else:
            lo = mid + 1
    return text[lo:]


def chop(text: str, n: int) -> list[str]:
    """``text`` cut into pieces of at most ``n`` cells (at least one character each, so a two-cell
    character on a one-cell line still moves on)."""
    pieces = []
    while text:
        piece = head(text, n) or text[0]
        pieces.append(piece)
        text = text[len(piece):]
    return pieces


def ljust(text: str, n: int) -> str:
    return text + " " * (n - cells(text))


def rjust(text: str, n: int) -> str:
    return " " * (n - cells(text)) + text
