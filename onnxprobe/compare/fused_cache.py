"""The one-run diff's merged graph from the disk cache (``runtime.plan_cache``): what ``compare.fused.build`` built
for the same two models, pairs, criteria and input shapes, read back with its layout checked."""

from __future__ import annotations

from onnxprobe.compare import fused, fused_stacks
from onnxprobe.compare.fused import FusedGraph, merged_weights
from onnxprobe.compare.same_function import same_bytes
from onnxprobe.compare.sides import Side
from onnxprobe.graph import stack_nodes
from onnxprobe.match.engine import Pair
from onnxprobe.runtime import plan_cache
from onnxprobe.runtime.runners import base as base_runner

__all__ = ["build_cached", "same_pairs", "still_same"]


def build_cached(a: Side, b: Side, report: list[Pair], by_b: dict[str, Pair], rtol_of, introduced: bool,
                 input_shapes: dict | None = None, skip: frozenset[int] = frozenset(), extras: bool = True,
                 fixed: bool = False) -> FusedGraph:
    """``build``, or what it built before for the same two models (their skeletons: graphs, small
    constants, the dequantizations onnxprobe added), pairs, criteria and introduced flag, from the disk
    cache of ``runtime.plan_cache`` (``--no-cache`` skips it): the second diff of a pair of models does not
    build the merged graph again (on PP-OCRv4 det, 1.9 s of 9). A graph without ``extras`` has a key of
    its own (a full request is never served one)."""
    if not plan_cache.enabled(a.runner.config.cache and b.runner.config.cache):
        return fused.build(a, b, report, by_b, rtol_of, introduced, input_shapes, skip, extras, fixed)
    ma, mb = a.runner.model, b.runner.model
    k = plan_cache.key_of({"fused": [plan_cache.structure(ma), plan_cache.structure(mb)], "introduced": introduced,
                           "pairs": [[p.a.probe, p.b.probe, p.b.kind, rtol_of(p)] for p in report],
                           "known": sorted([x, q.a.probe] for x, q in by_b.items()), "small": list(base_runner.SMALL_PAIRS_ON_HOST),
                           "stacks": [*stack_nodes.STACK_LAYOUT, fixed],
                           "inputs": {n: list(v) for n, v in sorted((input_shapes or {}).items())}, "skip": sorted(skip),
                           **({} if extras else {"extras": False})})  # a full graph's key as before extras
    weights = merged_weights(a, b)
    hit = plan_cache.load_entry(k, weights, restore=False)
    got = _from_entry(hit, len(report), weights, extras) if hit is not None and hit[1].get("kind") == "fused" else None
    if got is not None:
        return got
    fg = fused.build(a, b, report, by_b, rtol_of, introduced, input_shapes, skip, extras, fixed)
    if fg.model is not None:
        plan_cache.store_entry(k, fg.model, {"kind": "fused", "outputs": fg.outputs, "aname": fg.aname,
                                             "bname": fg.bname, "raw": fg.raw, "notes": fg.notes, "same": sorted(fg.same),
                                             "same_weights": fg.same_weights, "stacks": fg.stacks,
                                             **({} if extras else {"extras": False})})
    return fg


def _from_entry(hit, pairs: int, weights: dict, extras: bool = True) -> FusedGraph | None:
    """The FusedGraph of a cache entry, or None (a miss) when the entry is not one ``build_cached`` could
    have written for ``pairs`` pairs: a damaged or edited entry is rebuilt, not a KeyError at the run."""
    model, meta = hit
    outputs, aname, bname, raw, notes, same, relied, stacks = (meta.get(f) for f in ("outputs", "aname", "bname", "raw", "notes",
                                                                                     "same", "same_weights", "stacks"))
    if meta.get("extras", True) is not extras:  # rows of another layout than the reader expects
        return None
    same = same_pairs(same, pairs)
    names = {o.name for o in model.graph.output}
    if not (plan_cache.strings(outputs) and set(outputs) <= names and plan_cache.strings(notes or [])
            and all(isinstance(m, dict) and all(isinstance(x, str) and isinstance(y, str) for x, y in m.items())
                    for m in (aname, bname))
            and isinstance(raw, dict) and all(q.isascii() and q.isdigit() and int(q) < pairs and plan_cache.strings(v) and 2 <= len(v) <= 3
                                              and set(v) <= names for q, v in raw.items())
            and same is not None and still_same(relied, weights) and fused_stacks.fits(stacks, pairs, _tensors(model))):
        return None
    return FusedGraph(model, outputs, aname, bname, {int(q): v for q, v in raw.items()}, weights, notes or [], extras,
                      same, relied, stacks)


def _tensors(model) -> set[str]:
    """The names of the main graph's inputs and node outputs (a stack's members: ``compare.fused_stacks.fits``)."""
    return {i.name for i in model.graph.input} | {o for n in model.graph.node for o in n.output}


def still_same(relied, weights: dict) -> bool:
    """Whether the stubs of equal bytes an entry's ``same`` pairs relied on (``FusedGraph.same_weights``: [B, A] names)
    still hold equal bytes in ``weights``, the models' own: the key holds the skeletons, not the big weights, and B
    re-exported with the same graph and another weight where it was A's must not read A's own computation there."""
    return (isinstance(relied, list) and all(isinstance(r, list) and len(r) == 2 and plan_cache.strings(r) for r in relied)
            and all(r[0] in weights and r[1] in weights and same_bytes(weights[r[0]], weights[r[1]]) for r in relied))


def same_pairs(same, pairs: int) -> frozenset[int] | None:
    """``FusedGraph.same`` as an entry stores it (a list of pair positions below ``pairs``), or None where it is not
    one (an entry of another version, edited or damaged: a miss)."""
    if not (isinstance(same, list) and all(type(k) is int and 0 <= k < pairs for k in same)):
        return None
    return frozenset(same)
