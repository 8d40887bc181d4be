"""Refused candidates, said, and what reads them unpaired.

``match.engine.alike`` refuses two tensors of one op, shape and scope whose weights contradict: a weight of a
size the other reads none of (a 1x1 Conv against a 3x3 Conv of one output shape), or each reading a weight
both models hold that the other does not. That refusal is a fact about the data, and it carries downstream:
Relu(Conv1x1(x)) against Relu(Conv3x3(x)) aligns by op, order and shape, yet computes another function, and
its pair reported the Conv's error as the Relu's own ("error starts at" the Relu, a false intro dB).

``refuse`` (the matcher's last step) finds the unpaired tensors whose only likely counterparts were refused
so, gives each the reason (the unmatched entry said "no counterpart"), and unpairs the structural pairs that
read such a refused pair, their readers in turn. A pair by name is no proof either (``named_other``): one
name on a 1x1 and a 3x3 Conv's output, or on Relu(x) in A and Sigmoid(x) in B, is two functions of the data
and is undone too, and so are the pairs by name that read it. Pairs by quantizer key, node name (checked by
``match.engine`` for what they read) or --map stand, and so do two model outputs of one name: the user's or the exporter's word that the two are one
tensor (the verdict compares the outputs).
"""

from __future__ import annotations

from onnxprobe.match.observe import Observable
from onnxprobe.match.ops import canonical, other_functions


def contradicts(a: Observable, b: Observable, shared: set[str]) -> bool:
    """Whether ``a`` and ``b`` read other weights: each one of a size the other reads none of (a 1x1 Conv's
    against a 3x3's, whatever the values), or each one both models hold (``shared``, by value) that the
    other does not read. One reading a weight more is no contradiction (an exporter's zero bias)."""
    sa, sb = set(a.weight_sizes), set(b.weight_sizes)
    if sa - sb and sb - sa:
        return True
    wa, wb = shared.intersection(a.weights), shared.intersection(b.weights)
    return bool(wa - wb and wb - wa)


def contradiction(a: Observable, b: Observable, shared: set[str]) -> str | None:
    """Why ``a`` and ``b``, of one op and shape, read other weights (``contradicts``), or None."""
    if not contradicts(a, b, shared):
        return None
    sa, sb = set(a.weight_sizes), set(b.weight_sizes)
    if sa - sb and sb - sa:
        return (f"reads a weight of {_count(sa - sb)} elements where {b.name} reads one of "
                f"{_count(sb - sa)} (another layer, whatever the values)")
    return f"reads weights that both models hold and {b.name} does not read, and the other way round"


def named_other(a: Observable, b: Observable, shared: set[str], a_to_b: dict[str, str]) -> tuple[str, str] | None:
    """Why ``a`` and ``b``, paired by their one name, are other functions of the data (what each unmatched
    entry says of its candidate), or None: their weights contradict (``contradicts``), or the two nodes read
    the same tensors (``a_to_b``: A's paired names to B's) with ops that are never one function
    (``match.ops.other_functions``: Relu against Sigmoid; not MatMul against Gemm, Div against Mul, Relu
    against Clip, which two exports may write for one function: QA). Reading other tensors proves nothing: a Gelu that an optimiser fused keeps the name of
    the Mul it replaced, and reads what that Mul's chain read."""
    if a.is_output and b.is_output or b.kind != "float":  # a quantized B: its key is the quantizer's word
        return None
    if contradicts(a, b, shared):
        return contradiction(b, a, shared), contradiction(a, b, shared)
    if not other_functions(a.effective_op, b.effective_op):  # MatMul and Gemm, Div and Mul...: maybe one function
        return None
    read_a = {s if s.startswith("input:") else a_to_b.get(s) for s in a.sources}
    if not read_a or None in read_a or read_a != set(b.sources):
        return None
    return tuple(f"computes {y.effective_op} of the tensors this {x.effective_op} reads (another function of the data)"
                 for x, y in ((a, b), (b, a)))


def _count(sizes: set[int]) -> str:
    return " or ".join(f"{s:,}" for s in sorted(sizes))


def refuse(obs_a: list[Observable], obs_b: list[Observable], pairs: list, made: list[tuple[int, int]],
           used_a: set[int], used_b: set[int], shared: set[str], a_scope) -> tuple[dict[int, str], dict[int, str]]:
    """Reasons for A's and B's tensors left unpaired as other functions of the data (index -> reason); the
    structural pairs that read a refused pair are removed from ``pairs``/``made``/``used_a``/``used_b``
    in place. ``a_scope`` maps A's If-branch scope to B's names."""
    why_a: dict[int, str] = {}
    why_b: dict[int, str] = {}
    refused: dict[str, set[str]] = {}  # A's tensor -> B's tensors it is known to differ from
    groups: dict[tuple, list[int]] = {}
    for j, b in enumerate(obs_b):
        if j not in used_b and b.shape is not None and (b.weight_sizes or b.weights):
            groups.setdefault((canonical(b.effective_op), len(b.shape), b.scope), []).append(j)
    for i, a in enumerate(obs_a):
        if i in used_a or a.shape is None or not (a.weight_sizes or a.weights):
            continue
        best = None
        for j in groups.get((canonical(a.effective_op), len(a.shape), a_scope(a.scope)), ()):
            b = obs_b[j]
            if a.tails_after != b.tails_after or any(isinstance(x, int) and isinstance(y, int) and x != y for x, y in zip(a.shape, b.shape)):
                continue
            why = contradiction(a, b, shared)
            if why is None:
                continue
            refused.setdefault(a.name, set()).add(b.name)
            # the one said: nearest by relative position in the two models
            far = abs(a.index / max(len(obs_a), 1) - b.index / max(len(obs_b), 1))
            if best is None or far < best[0]:
                best = (far, j, why)
            if j not in why_b:
                why_b[j] = f"{canonical(a.effective_op)} candidate {a.name} in A: it {contradiction(b, a, shared) or why}"
        if best is not None:
            why_a[i] = f"{canonical(a.effective_op)} candidate {obs_b[best[1]].name} in B: it {best[2]}"
    if not refused:
        return why_a, why_b
    changed = True
    while changed:  # what reads a refused pair is refused in turn, downstream
        changed = False
        for k in range(len(pairs) - 1, -1, -1):
            p, (i, j) = pairs[k], made[k]
            if p.strategy != "structural" and (p.strategy != "name" or p.a.is_output and p.b.is_output):
                continue
            hit = next(((s, t) for s in p.a.sources for t in p.b.sources if t in refused.get(s, ())), None)
            if hit is None:
                continue
            pairs.pop(k)
            made.pop(k)
            used_a.discard(i)
            used_b.discard(j)
            refused.setdefault(p.a.name, set()).add(p.b.name)
            why_a[i] = (f"candidate {p.b.name} in B reads {hit[1]}, another function of the data than {hit[0]}, "
                        "which this reads")
            why_b[j] = (f"candidate {p.a.name} in A reads {hit[0]}, another function of the data than {hit[1]}, "
                        "which this reads")
            changed = True
    return why_a, why_b
