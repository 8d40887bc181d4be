"""Tails a Conv can take in: a BatchNormalization, a bias Add, a constant scale after a Conv.

A quantizer, onnxruntime's optimiser or an exporter folds such a tail into its Conv: that model has one
Conv tensor for both, which computes the tail's function. Matching by structure must pair it with the
other model's tail output, never with the bare Conv output before the tail (a renamed QDQ model against
its float original paired 31 of 45 tensors so: ``match.engine``).
"""

from __future__ import annotations

from dataclasses import replace

from onnxprobe.match.ops import canonical

AFFINE_TAILS = {"Add", "Sub", "Mul", "Div"}  # with a constant operand: a bias or a scale a Conv can take in
# the activations onnxruntime's FusedConv takes in (its 'activation' attribute)
FUSED_ACTIVATIONS = {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "Clip", "HardSigmoid"}


def with_tails(obs: list, producer: dict, consumers: dict, const: set[str]) -> list:
    """The main graph's float observables (``match.observe``) with ``bn_next`` and ``conv_bn`` set: a Conv
    output a per-channel tail reads (others may read it too: a side branch, a backward graph; that Conv
    took no tail in), and that tail's output (``producer``: tensor -> the site that writes it; ``consumers``:
    tensor -> the sites that read it; ``const``: tensors of weights only)."""
    def is_tail(tail, conv_out: str) -> bool:
        if tail.op_type == "BatchNormalization":
            return tail.input[0] == conv_out
        return tail.op_type in AFFINE_TAILS and len(tail.input) == 2 and all(i == conv_out or i in const for i in tail.input)

    def folds(conv_out: str) -> bool:
        site = producer.get(conv_out)
        if site is None or site.node.op_type != "Conv":
            return False
        return any(is_tail(r.node, conv_out) for r in consumers.get(conv_out, []))

    out = []
    for o in obs:
        if o.kind == "float" and o.op_type == "Conv" and folds(o.name):
            o = replace(o, bn_next=True)
        elif (o.kind == "float" and o.op_type in AFFINE_TAILS | {"BatchNormalization"} and o.name in producer
              and any(folds(i) for i in producer[o.name].node.input)):
            o = replace(o, conv_bn=True)
        out.append(o)
    return out


# ops that hand on their input's values as they are: a fusion passes through them (paddle2onnx writes an
# Identity between a bias Add and its Relu, which onnxruntime's pre-processing removes before it fuses)
COPIES = {"Identity", "Dropout"}


def node_words(o) -> str:
    """The node of observable ``o`` as a reason says it: its op and its listed name, that of the node that
    computes the value (a quantized Conv's Conv or QLinearConv), never the tensor's name."""
    return f"{o.effective_op or o.op_type} {(o.writer or o.node)!r}"


def tail_folded(side: str, conv: str, after: tuple[str, str] | None = None) -> str:
    """The reason of a Conv left unpaired because ``side``'s Conv ``conv`` (``node_words``) has its tail folded
    in (and, where ``after`` is given, (op, name) of the activation after the tail that it took in too)."""
    if after is None:
        return (f"a Conv its BatchNormalization, bias Add or scale follows, where {side}'s {conv} has it folded in: "
                "compared as the tail's output there")
    return (f"a Conv its BatchNormalization, bias Add or scale follows, where {side}'s {conv} has it folded in, with "
            f"the {after[0]} {after[1]!r} after it: compared as that {after[0]}'s output there")


def folded_elsewhere(obs: list, other: list, paired: dict[str, str], skip: set[int], side: str) -> dict[int, str]:
    """Unpaired tensors of ``obs`` (indices not in ``skip``) that ``other`` computes inside one of its Convs,
    under another name (``paired``: name -> the other model's name), so that they are folded there, not
    without counterpart: what ``obs`` computes in a Conv's chain (the Conv, its BatchNormalization, bias Add
    or scale, copies, up to an activation) before the first tensor of the chain that is paired, where that
    one is paired with a Conv of ``other``: onnxruntime's Conv+BatchNormalization fusion (the fused Conv
    named after the tail), its FusedConv (Conv+Relu, Conv+HardSigmoid, Conv+BatchNormalization+Relu at
    --opt-level extended), a quantized Conv that took in a bias Add and the Relu after it (pre-processing
    folds the Add, the quantizer drops the Relu into its range and names the Conv's output after it: in the
    QDQ form as in the QOperator one). Index -> the reason, naming ``side``'s Conv."""
    chains = _ConvChains(obs, other, paired, side)
    out = _folded_chains(chains, skip)
    _add_convs_whose_tails_folded(chains, skip, out)
    return out


class _ConvChains:
    """``obs``'s Conv chains against ``other`` (``folded_elsewhere``): the lookups built once, ``chain`` to walk
    one from a tensor, ``reason`` to say a member folded, ``end_conv`` for the Conv a tail's chain ends in."""

    def __init__(self, obs: list, other: list, paired: dict[str, str], side: str) -> None:
        self.obs, self.paired, self.side = obs, paired, side
        # a Conv of ``other`` that a tail of its own follows took nothing in (a --map onto a bare Conv output)
        self.folding = {o.name for o in other if canonical(o.effective_op) == "Conv" and not o.bn_next}
        self.fused = {o.name for o in other if o.op_type == "FusedConv"}
        self.other_by_name = {o.name: o for o in other}
        self.index = {id(o): k for k, o in enumerate(obs)}
        self.by_name = {o.name: o for o in obs}
        self.tails: dict[str, list[str]] = {}  # a tensor -> the Conv tails that read it
        self.readers: dict[str, list] = {}
        for o in obs:
            for s in set(o.sources):
                self.readers.setdefault(s, []).append(o)
            if o.conv_bn:
                for s in o.sources:
                    self.tails.setdefault(s, []).append(o.name)

    def reader(self, o):
        """``o``'s one reader (one behind a copy of it, which names both as its sources, reads the copy)."""
        rs = self.readers.get(o.name, [])
        copies = {r.name for r in rs if r.op_type in COPIES}
        rs = [r for r in rs if not copies.intersection(r.sources)]
        return rs[0] if len(rs) == 1 else None

    def chain(self, o) -> tuple[list, object] | None:
        """What follows ``o`` in a Conv's chain up to its first paired tensor: (the unpaired ones, that
        tensor); None where the chain ends first. Each step is the one reader: the Conv's tail (right after
        it), a copy, or an activation, the last a fusion takes in."""
        members, cur = [], o
        for _ in range(16):
            r = self.reader(cur)
            if r is None or not ((r.conv_bn and canonical(cur.effective_op) == "Conv") or r.op_type in COPIES
                                 or r.op_type in FUSED_ACTIVATIONS):
                return None
            if r.name in self.paired:
                return members, r
            if r.op_type in FUSED_ACTIVATIONS:
                return None
            members.append(r)
            cur = r
        return None

    def reason(self, m, end, conv: str) -> str:
        """Why chain member ``m``, whose chain ends in ``end`` (paired with ``other``'s ``conv``), is folded there."""
        side = self.side
        is_conv = canonical(m.effective_op) == "Conv"
        node = self.other_by_name[conv]
        if is_conv and m.bn_next:
            return tail_folded(side, node_words(node), None if end.conv_bn else (end.op_type, end.name))
        what = "a Conv" if is_conv else "a Conv's BatchNormalization, bias Add or scale" if m.conv_bn else f"a copy ({m.op_type}) in a Conv's chain"
        if conv in self.fused and end.op_type in FUSED_ACTIVATIONS:
            return (f"{what} whose activation {side}'s FusedConv {(node.writer or node.node)!r} takes in: compared as the "
                    "activation's output there")
        return (f"{what}, which {side}'s {node_words(node)} has folded in with the {end.op_type} {end.name!r} after it: "
                f"compared as that {end.op_type}'s output there")

    def end_conv(self, tail: str) -> str | None:
        """The other model's Conv that computes the chain after the tail ``tail`` (its activation's partner)."""
        found = self.chain(self.by_name[tail]) if tail in self.by_name else None
        return self.paired[found[1].name] if found and not found[0] else None


def _folded_chains(chains: _ConvChains, skip: set[int]) -> dict[int, str]:
    """Each chain from its Conv (or from a tail, where the Conv has other readers too) that ends in a tensor
    paired with a folding Conv of the other model: its members not in ``skip``, index -> the reason."""
    out = {}
    paired, index = chains.paired, chains.index
    for o in chains.obs:
        if not (canonical(o.effective_op) == "Conv" or o.conv_bn) or o.name in paired:
            continue
        found = chains.chain(o)
        if found is None or paired[found[1].name] not in chains.folding:
            continue
        members, end = found
        for m in [o, *members]:
            if index[id(m)] not in skip and index[id(m)] not in out:
                out[index[id(m)]] = chains.reason(m, end, paired[end.name])
    return out


def _add_convs_whose_tails_folded(chains: _ConvChains, skip: set[int], out: dict[int, str]) -> None:
    """Into ``out``: a Conv its tail and other nodes read (not in ``skip`` nor ``out``), whose tails are all
    folded into the other model's Convs."""
    for k, o in enumerate(chains.obs):
        if k in skip or k in out or not o.bn_next:
            continue
        there = [chains.paired.get(t) or chains.end_conv(t) for t in chains.tails.get(o.name, ())]
        if there and all(n in chains.folding for n in there):
            out[k] = tail_folded(chains.side, node_words(chains.other_by_name[there[0]]))
