"""Shortening tensor and node names for a table column, keeping what tells rows apart.

Exporters write names as paths (``/m/encoder/layer.3/attention/self/query/MatMul_output_0``). Cutting the
middle of the string (``/m/encoder/l…self/query/MatMul_output_0``) loses the layer number, the one thing a
reader needs. Here a name is shortened by whole path parts: the last part (the op and output) always
stays, then the parts with a number in them (``layer.3``, ``blocks.142``), then the parts nearest the end,
then the first part where it still fits (``model/…/tail``: which model or block); each run of dropped parts reads ``…``. Names of one column are shortened together, so two names that
differ only in a dropped part get that part back. The full names are in the JSON and in ``--wide``.
Names come as a table shows them, their control characters already escaped (``Table.add_row``): they
are not escaped again, which would double the backslashes of the escapes.
"""

from __future__ import annotations

import os
import re

from onnxprobe.report import cells as cl
from onnxprobe.report.format import cut_middle as middle

ELLIPSIS = "…"
PAIR_ARROW = " ↔ "  # report.diff's 'A ↔ B' for a pair of two names
_DIGIT = re.compile(r"\d")


def _join(parts: list[str], keep: set[int]) -> str:
    out: list[str] = []
    gap = False
    for i, p in enumerate(parts):
        if i in keep:
            if gap:
                out.append(ELLIPSIS)
                gap = False
            out.append(p)
        else:
            gap = True
    if gap:
        out.append(ELLIPSIS)
    return "/".join(out)


def shorten_path(name: str, width: int, must: frozenset[int] = frozenset()) -> str:
    """``name`` in at most ``width`` terminal cells, by whole ``/`` parts where it has them (see the module
    doc); ``must``: indices of parts to keep before any other (the ones that tell two names apart)."""
    if width <= 0 or cl.cells(name) <= width:
        return name
    parts = name.split("/")
    last = len(parts) - 1
    if last < 2 or cl.cells(parts[last]) + 2 > width:  # not a path, or its last part alone does not fit
        return middle(name, width)
    keep = {last} | ({0} if parts[0] == "" else set())  # a leading "/" costs nothing
    # a pair's 'A ↔ B' (diff): the part with the arrow holds A's last part, without which the row reads as B
    # alone (or as a same-name pair): it stays with the last one
    arrow = next((i for i, p in enumerate(parts) if PAIR_ARROW in p), None)
    if arrow is not None and cl.cells(_join(parts, keep | {arrow})) <= width:
        keep |= {arrow}
    order = sorted(must - keep, reverse=True) + [i for i in range(1, last) if _DIGIT.search(parts[i]) and i not in must]
    for i in order:
        trial = keep | {i}
        if cl.cells(_join(parts, trial)) <= width:
            keep = trial
    for i in range(last - 1, 0, -1):  # then the parts next to the end, as long as they fit
        if i in keep:
            continue
        trial = keep | {i}
        if cl.cells(_join(parts, trial)) > width:
            break
        keep = trial
    first = 1 if parts[0] == "" else 0  # the first named part ('model' of '/model/…'), where there is room:
    if first not in keep and cl.cells(_join(parts, keep | {first})) <= width:  # the loop above stops at the
        keep = keep | {first}  # first part from the end that does not fit, short of this one
    short = _join(parts, keep)
    return short if cl.cells(short) <= width else middle(name, width)


def whole_parts(parts: list[str], short: str) -> bool:
    """``short`` is made of whole ``parts`` of its name, in order, and '…' for those left out: not a middle
    cut that happens to end in the last part ('…r/layer.0/atten…e/MatMul' reads no part of three)."""
    rest = iter(parts)
    return all(seg == ELLIPSIS or seg in rest for seg in short.split("/"))


def _common(lists: list[list[str]]) -> int:
    """How many leading items all the lists share."""
    n = 0
    while all(len(x) > n for x in lists) and len({x[n] for x in lists}) == 1:
        n += 1
    return n


def shorten_names(names: list[str], width: int) -> list[str]:
    """Each name in at most ``width`` cells (``shorten_path``); where different names would read
    the same, the first and last of the parts where each differs from the others (past what they all
    start and end with) are kept first; where they still read the same, the middle of the string is cut."""
    short = [shorten_path(n, width) for n in names]
    musts: dict[int, frozenset[int]] = {}  # what a row keeps grows: a part kept to tell it from one name stays when
    for _ in range(3):  # another clashes (query of layer.0 against value, then against query of layer.1)
        clashes = _clashes(names, short, lambda s: s) + _clashes(names, short, a_side)
        if not clashes:
            break
        for ix, side in clashes:
            split = [side(names[i]).split("/") for i in ix]
            head = _common([p for p in split])  # the parts all of them start with, and end with
            tail = _common([p[::-1] for p in split])
            for i, parts in zip(ix, split):
                inner = [k for k in range(head, len(parts) - tail)]  # where this one differs from the others
                musts[i] = musts.get(i, frozenset()) | (frozenset(inner[:1] + inner[-1:]) if inner else frozenset())
                short[i] = shorten_path(names[i], width, musts[i])
    readers: dict[str, list[int]] = {}
    for i, s in enumerate(short):
        readers.setdefault(s, []).append(i)
    for ix in readers.values():  # still the same: every name of the clash shows where it differs
        group = {names[i] for i in ix}
        if len(group) > 1:
            split_at = _split_points(group)
            cut = [around_difference(names[i], split_at[names[i]], width) for i in ix]
            if len(set(cut)) < len(group):  # no window tells them apart: both ends of the string
                cut = [middle(names[i], width) for i in ix]
            for i, c in zip(ix, cut):
                short[i] = c
    return short


def a_side(s: str) -> str | None:
    """A's name in a pair's 'A ↔ B' (None for a name of one tensor): two rows whose A names read alike read as the
    same tensor of A, whatever B's say (a diff has no node column to tell them apart)."""
    return s.split(PAIR_ARROW)[0] if PAIR_ARROW in s else None


def _clashes(names: list[str], short: list[str], side) -> list[tuple[list[int], object]]:
    """The groups of rows whose shortened names read alike by ``side`` (the whole name, or A's in a pair) while
    their names differ there, each with ``side``."""
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(short):
        key = side(s)
        if key is not None:
            groups.setdefault(key, []).append(i)
    return [(ix, side) for ix in groups.values() if len({side(names[i]) for i in ix}) > 1]


def _split_points(group: set[str]) -> dict[str, int]:
    """For each name of ``group``, how many leading characters it shares with its closest sibling. In
    sorted order the closest sibling of a name is beside it, so one sort does it: ``layers --all`` asks
    this of hundreds of names at once (a column's narrowest trial widths make them all read alike), where
    comparing every pair took a second."""
    ordered = sorted(group)
    shared = [len(os.path.commonprefix(pair)) for pair in zip(ordered, ordered[1:])]
    return {n: max(shared[k - 1] if k else 0, shared[k] if k < len(shared) else 0) for k, n in enumerate(ordered)}


def around_difference(name: str, first: int, width: int) -> str:
    """``name`` in ``width`` cells from a little before ``first`` (a character index), where it starts to
    differ from the names it would read alike with, its end kept: '…ment_1/attention/MatMul_output_0'."""
    start = max(0, first - 8)
    s = name[start:] if start == 0 else "…" + name[start:]
    if cl.cells(s) <= width or width <= 12:
        return cl.head(s, width)
    end = cl.tail(s, width // 3)
    return cl.head(s, width - 1 - cl.cells(end)) + "…" + end
