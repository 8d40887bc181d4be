"""The one-run diff's stacks of small pairs (``graph.stack_nodes``): which pairs share one (``groups``), the nodes
of each in the merged graph (``build``), the layout a cache entry holds (``fits``) and each pair's row read back
from a run (``rows``), for ``compare.fused`` to take as it takes a pair's own row.

A pair is stacked where it would otherwise leave the run raw (float32 tensors of at most 32 KiB) and its two
tensors have one shape (declared, or for the input shapes of a one-input diff: ``compare.fused.build``'s ``fixed``)
that STACK_MIN or more such pairs of the same criterion share: a deep model's thousands of small pairs then cost
about half a node each and no value on the host (memory that grew with their number: ``graph.stack_nodes``'
docstring). Fewer pairs of a shape stay raw, summed on the host in float64.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from onnxprobe.graph.pair_nodes import MAXIMA, SUMS
from onnxprobe.graph.stack_nodes import STACK_MIN, stack_row, stack_size, stack_terms
from onnxprobe.types import element_count

STACK_PREFIX = "onnxprobe.stack:"


def groups(candidates: list[tuple[int, tuple, float, int]]) -> list[tuple[tuple, float, list[int]]]:
    """The stacks of ``candidates`` ((pair, static shape, rtol, position in the graph) each), (shape, rtol, pairs)
    each: pairs of one shape and rtol, STACK_MIN or more of them, in graph order, cut into stacks of at most
    ``stack_size`` pairs of about equal sizes (so that each stack's members are made near each other and held for a
    short time)."""
    by: dict[tuple, list[tuple[int, int]]] = {}
    for k, shape, rtol, at in candidates:
        by.setdefault((tuple(shape), float(rtol)), []).append((at, k))
    out = []
    for (shape, rtol), members in by.items():
        if len(members) < STACK_MIN:
            continue
        members.sort()
        per = stack_size(element_count(shape))
        count = -(-len(members) // per)
        size = -(-len(members) // count)
        out += [(shape, rtol, [k for _, k in members[i:i + size]]) for i in range(0, len(members), size)]
    return out


def build(pb, stacks: list[tuple[tuple, float, list[int]]], tensors: Callable, cone_of: Callable, extras: bool,
          named: Callable) -> tuple[list[dict], list[str]]:
    """The nodes of ``stacks`` (``groups``) in ``pb``'s graph: (their records, their outputs). ``tensors(k)``: pair k's
    (A's tensor, B's) in the merged graph; ``cone_of(k)``: the name of B's node recomputed on A's inputs for pair
    k, or None (no introduced error measured in the graph); ``named(t, name)``: output ``t`` renamed ``name``. A
    record: {"pairs", "shape", "names": [[A's, B's(, the cone's)] per pair]}; its outputs STACK_PREFIX s .max /
    .arg / .sum, and i.max / i.arg / i.sum for the introduced errors of the pairs with a cone."""
    records, outputs = [], []
    for s, (shape, rtol, pairs) in enumerate(stacks):
        names = []
        for k in pairs:
            c = cone_of(k)
            names.append([*tensors(k)] if c is None else [*tensors(k), c])
        base = f"{STACK_PREFIX}{s}"
        row, a_stack = stack_row(pb, [n[0] for n in names], [n[1] for n in names], shape, rtol, f"onnxprobe.stack{s}",
                                 extras=extras)
        got = [(row.maxima, ".max"), (row.argmax, ".arg"), (row.sums, ".sum")]
        with_cone = [n for n in names if len(n) == 3]
        if with_cone:
            light, _ = stack_row(pb, [n[0] for n in with_cone], [n[2] for n in with_cone], shape, 0.0, f"onnxprobe.stack{s}i",
                                 light=True, extras=extras, a_stack=a_stack if len(with_cone) == len(names) else None)
            got += [(light.maxima, "i.max"), (light.argmax, "i.arg"), (light.sums, "i.sum")]
        outputs += [named(t, base + tag) for t, tag in got if t is not None]
        records.append({"pairs": list(pairs), "shape": [int(d) for d in shape], "names": names})
    return records, outputs


def fits(stacks, pairs: int, names: set[str] | None = None) -> bool:
    """Whether ``stacks`` is a list of records ``build`` could have written for ``pairs`` pairs (each pair in one
    stack at most; its tensors among ``names``, where given): a damaged entry is a miss, not an error at the run."""
    if not isinstance(stacks, list):
        return False
    seen: set[int] = set()
    for r in stacks:
        if not (isinstance(r, dict) and isinstance(r.get("pairs"), list) and isinstance(r.get("shape"), list)
                and isinstance(r.get("names"), list) and r["pairs"] and len(r["pairs"]) == len(r["names"])
                and all(isinstance(d, int) and d > 0 for d in r["shape"]) and r["shape"]):
            return False
        for k, ns in zip(r["pairs"], r["names"]):
            if not (isinstance(k, int) and 0 <= k < pairs and k not in seen and isinstance(ns, list) and 2 <= len(ns) <= 3
                    and all(isinstance(t, str) for t in ns) and (names is None or set(ns) <= names)):
                return False
            seen.add(k)
    return True


def rows(got: dict, stacks: list[dict], extras: bool) -> Iterator[tuple[int, dict, dict | None, tuple[int, ...]]]:
    """Each stacked pair's row as ``compare.fused`` reads a pair's (its ``PAIR_ROW`` values), with its introduced
    error's (None without a cone), and its shape: (pair, row, introduced row, shape). A stack whose outputs are
    missing or of another layout yields nothing (its pairs are left to the host)."""
    for s, r in enumerate(stacks):
        base, k_all, shape = f"{STACK_PREFIX}{s}", r["pairs"], tuple(r["shape"])
        full = _read(got, base, len(k_all), False, extras)
        if full is None:
            continue
        coned = [i for i, ns in enumerate(r["names"]) if len(ns) == 3]
        light = _read(got, base + "i", len(coned), True, extras) if coned else None
        intro = dict(zip(coned, light)) if light is not None else {}
        for i, k in enumerate(k_all):
            v = full[i]
            vi = intro.get(i)
            if vi is not None:
                vi["aa"] = v["aa"]  # A's tensor: the pair's
            yield k, v, vi, shape


def _read(got: dict, base: str, count: int, light: bool, extras: bool) -> list[dict] | None:
    terms = stack_terms(light, extras)
    mx, sums = got.get(f"{base}.max"), got.get(f"{base}.sum")
    arg = got.get(f"{base}.arg") if extras else None
    width = 1 if light else len(MAXIMA) - (0 if extras else 1)
    if (mx is None or sums is None or np.shape(mx) != (count, width) or np.shape(sums) != (count, len(terms))
            or (extras and (arg is None or np.shape(arg) != (count, 1)))):
        return None
    mx, sums = np.asarray(mx, np.float64).tolist(), np.asarray(sums, np.float64).tolist()
    args = np.asarray(arg).reshape(-1).tolist() if extras else [-1] * count
    out = []
    for m, t, a in zip(mx, sums, args):
        v = dict(zip(MAXIMA, m + [0.0] * (len(MAXIMA) - len(m))))
        v.update(dict.fromkeys(SUMS, 0.0))
        v.update(zip(terms, t))
        v["argmax"] = int(a)
        out.append(v)
    return out


__all__ = ["STACK_PREFIX", "groups", "build", "fits", "rows"]
