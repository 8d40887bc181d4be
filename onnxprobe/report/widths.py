"""Column widths for ``report.table``'s layouts: what a column needs to show every cell whole, the width a
run of columns spans, the narrowest width at which a name column's names stay readable (told apart,
paths shortened by whole parts), and how name columns share the room the other columns leave."""

from __future__ import annotations

from onnxprobe.report import cells as cl
from onnxprobe.report.names import a_side, shorten_names, whole_parts
from onnxprobe.report.wrap import GAP


def readable(names: list[str], short: list[str]) -> bool:
    """Shortened names that still tell the rows apart (and A's names of pairs, 'A ↔ B', each other), paths shortened
    by whole parts that kept their last, and names that are no path (``last_hidden_state``: a last part of their own)
    whole."""
    if len(set(short)) != len(set(names)):
        return False
    told: dict[str, set[str]] = {}  # a pair's 'A ↔ B': A's names told apart too (two rows reading as one tensor of A)
    for n, sh in zip(names, short):
        if (a := a_side(n)) is not None:
            told.setdefault(a_side(sh) or sh, set()).add(a)
    if any(len(v) > 1 for v in told.values()):
        return False
    for n, sh in zip(names, short):  # cells, escaped already
        parts = n.split("/")
        if sh != n and (len(parts) <= 2 or not sh.endswith("/" + parts[-1]) or not whole_parts(parts, sh)):
            return False
    return True


def _may_read_at_one(names: list[str]) -> bool:
    """Whether names shortened to one cell (``shorten_names`` keeps each within its width) may be ``readable``;
    False only where that is sure: ASCII names of which one is longer than a cell and no path ending in '/'
    (it then comes back cut, and a cut of one cell ends in no '/' and its last part). Shortening a column of
    180 names to one cell (each then clashes with every other, and is told apart by its own cut) took 2 ms."""
    return not all(n.isascii() for n in names) or all(len(n) <= 1 or (n.count("/") >= 2 and n.endswith("/"))
                                                     for n in names)


def readable_width(names: list[str], need: int) -> int:
    """The narrowest width at which a name column stays ``readable`` (its need when none is)."""
    lo, hi = 1, need
    if not names or (_may_read_at_one(names) and readable(names, shorten_names(names, 1))):
        return min(need, 1)
    # no narrower width can be readable: a name shown whole needs its length, a path shortened needs its
    # last part after "…/", and a name that is no path cannot be shortened (fewer shortenings to try)
    lo = min(hi, max(cl.cells(c) if len(p) <= 2 else min(cl.cells(c), cl.cells(p[-1]) + 2)
                     for c, p in ((c, c.split("/")) for c in names)))
    while lo < hi:  # readable once wide enough: the narrowest such width
        mid = (lo + hi) // 2
        if readable(names, shorten_names(names, mid)):
            hi = mid
        else:
            lo = mid + 1
    return hi


def line_groups(columns: list[int], need: list[int], width: int) -> list[list[int]]:
    """The columns in order, cut into lines of at most ``width``."""
    groups: list[list[int]] = [[]]
    for i in columns:
        if groups[-1] and span([need[j] for j in groups[-1] + [i]]) > width:
            groups.append([])
        groups[-1].append(i)
    return groups


def need_of(heads: list[str], rows: list[list[str]]) -> list[int]:
    """The cells each column needs to show its header and every one of its cells whole."""
    return [max([cl.cells(h)] + [cl.cells(row[i]) for row in rows]) for i, h in enumerate(heads)]


def span(widths: list[int]) -> int:
    return sum(widths) + GAP * max(len(widths) - 1, 0)


def share(need: list[int], names: list[int], room: int, floors: dict[int, int]) -> list[int] | None:
    """Widths where the name columns share ``room``, each at least its floor, or None."""
    widths = list(need)
    if not names:
        return None
    mins = {i: min(need[i], floors[i]) for i in names}
    if room < sum(mins.values()):
        return None
    for i in names:
        widths[i] = mins[i]
    left = room - sum(mins.values())
    while left > 0:  # grow the ones still short of their need, evenly
        short = [i for i in names if widths[i] < need[i]]
        if not short:
            break
        step = max(left // len(short), 1)
        for i in short:
            add = min(step, need[i] - widths[i], left)
            widths[i] += add
            left -= add
            if left <= 0:
                break
    return widths
