"""Tensors one model computes inside what the other model computes as one node.

An exporter, a quantizer or an inliner writes one op as several (HardSwish as HardSigmoid and Mul, with
Q/DQ between them in a quantized model; LayerNormalization, Gelu or Softmax spelled out; an ONNX function
inlined), where the other model keeps the one node. The region's output pairs with that node's output and
its inputs with the node's inputs; the tensors strictly inside it have nothing to pair with, yet nothing is
missing: they are folded into that node, compared at its output (cause ``folded``, which
``compare.unmatched`` gives them where nothing more specific is known).
"""

from __future__ import annotations

from onnxprobe.match.ops import VALUE_PRESERVING, canonical

LIMIT = 1000  # tensors in one region at most (a walk that does not end at the node's inputs stops here)


def inside_one_node(obs: list, other: list, paired: dict[str, str], skip: set[int], side: str,
                    opaque: set[str] = frozenset()) -> dict[int, str]:
    """Unpaired tensors of ``obs`` (indices not in ``skip``) that lie strictly inside a region of ``obs``
    whose output is paired with the output of one node of ``other`` and whose inputs are paired with that
    node's inputs (``paired``: name in ``obs`` -> name in ``other``; graph inputs, ``input:NAME``, are
    their own partners): every tensor the region's output is computed from back to those inputs, when none
    of them is paired, each reads only those inputs and the region's own tensors, none is a graph output
    and none is read outside the region. Index -> the reason, naming ``side``'s node (``Observable.writer``:
    for a quantized value its float or QLinear* node, not the QuantizeLinear or DequantizeLinear around it).
    A region that is one tensor before a Relu (or Clip from 0) that the other model dropped into its
    quantization range (``range_folded``) says that instead. ``opaque``: names of ``other``'s observables
    whose node reads, through tensors ``other`` does not observe, one that ``other`` computes by a node of
    its own and compares nowhere (codes of no known scale): ``sources`` walk past it, yet the region is not
    one node there, so theirs give no reason."""
    by_name = {o.name: o for o in obs}
    index = {o.name: k for k, o in enumerate(obs)}
    other_by_name = {o.name: o for o in other}
    back = {b: a for a, b in paired.items()}
    readers: dict[str, set[str]] = {}
    for o in obs:
        for s in o.sources:
            readers.setdefault(s, set()).add(o.name)

    def behind(ins: set[str]) -> set[str]:
        """What ``ins`` hold the values of, through value-preserving moves (a Reshape's input and shape):
        ``Observable.sources`` of a node that reads such a move name those too."""
        out: set[str] = set()
        todo = [t for t in ins if t in by_name]
        while todo and len(out) < LIMIT:
            o = by_name[todo.pop()]
            if o.op_type in VALUE_PRESERVING:
                new = [s for s in o.sources if s not in out]
                out.update(new)
                todo.extend(t for t in new if t in by_name)
        return out - ins

    def region(end, ins: set[str]) -> set[str] | None:
        """The tensors ``end`` is computed from back to ``ins`` (all of which it reads), or None where the
        walk meets a paired tensor, another graph input or a tensor not observed."""
        inside: set[str] = set()
        reached: set[str] = set()
        before = behind(ins)
        todo = list(end.sources)
        while todo:
            s = todo.pop()
            if s in ins:
                reached.add(s)
                continue
            if s in inside or s in before:
                continue
            if s.startswith("input:") or s not in by_name or s in paired or len(inside) >= LIMIT:
                return None
            inside.add(s)
            todo.extend(by_name[s].sources)
        return inside if reached == ins else None

    out: dict[int, str] = {}
    for end in obs:
        node = other_by_name.get(paired.get(end.name, ""))
        if node is None or not node.sources or not end.sources or node.name in opaque:
            continue
        # what it reads, less what a Reshape (a move that keeps the values) it reads reads in turn, unpaired:
        # onnxruntime's Gemm fusion reshapes a 2-D Gemm's output back, which the Gelu after it reads through
        moved = {t for s in node.sources if (o := other_by_name.get(s)) is not None and o.op_type in VALUE_PRESERVING
                 for t in o.sources}
        ins = {s if s.startswith("input:") else back.get(s, "") for s in node.sources if s not in moved or s in back}
        if "" in ins:  # the node reads a tensor paired with nothing here
            continue
        inside = region(end, ins)
        if not inside:
            continue
        if any(by_name[t].is_output or not readers.get(t, set()) <= inside | {end.name} for t in inside):
            continue  # seen outside the region: not only a part of that node's computation
        op = node.effective_op or node.op_type
        name = node.writer or node.node
        why = (f"computed inside {side}'s {op} {name!r}, one node there (its output {node.name!r} "
               f"is paired with {end.name!r}): compared as that node's output there")
        (first, *more) = sorted(inside, key=lambda t: by_name[t].index)
        if not more and range_folded(by_name[first], end, node):
            why = (f"its {end.op_type} {end.name!r} is folded into {side}'s quantization range: compared there "
                   f"(with {side}'s {node.name!r}, the output of its {op} {name!r})")
        for t in (first, *more):
            k = index[t]
            if k not in skip and k not in out:
                out[k] = why
    return out


def range_folded(t, end, node) -> bool:
    """The region is ``t`` alone before a Relu (or Clip from 0) ``end`` that reads only it, and the other
    model's ``node`` (paired with ``end``) is a quantized value whose range starts at 0, written by ``t``'s op,
    not ``end``'s: the quantizer dropped the activation into that range (the value holds Relu(t)), so ``t`` is
    the node's own output before the activation, not a tensor inside a node."""
    return (t.relu == end.name and node.kind != "float" and node.floor_zero
            and canonical(node.effective_op) == canonical(t.effective_op) != canonical(end.effective_op))
