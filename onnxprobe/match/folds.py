"""Tails a Conv can take in: a BatchNormalization, a bias Add, a constant scale after a Conv.

A quantizer, onnxruntime's optimiser or an exporter folds such a tail into its Conv: that model has one
Conv tensor for both, which computes the tail's function. Matching by structure must pair it with the
other model's tail output, never with the bare Conv output before the tail (a renamed QDQ model against
its float original paired 31 of 45 tensors so: ``match.engine``).
"""

from __future__ import annotations

from dataclasses import replace

from onnxprobe.match.ops import canonical

CONVS = ("Conv", "ConvTranspose")  # a per-output-channel tail folds into either's weights and bias
AFFINE_TAILS = {"Add", "Sub", "Mul", "Div"}  # with a constant operand: a bias or a scale a Conv can take in
# the activations onnxruntime's FusedConv takes in (its 'activation' attribute)
FUSED_ACTIVATIONS = {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "Clip", "HardSigmoid"}


def with_tails(obs: list, producer: dict, consumers: dict, const: set[str]) -> list:
    """The main graph's float observables (``match.observe``) with ``tails_after`` and ``conv_bn`` set: a Conv
    output that per-channel tails follow (others may read it too: a side branch, a backward graph; that Conv
    took no tail in) gets the number of tails of its chain, each one reading the one before (Conv, then
    BatchNormalization, then a scale Mul, then a bias Add; the longest where a tensor has several), and each
    of those tails ``conv_bn`` and the number that follow it. A model that folds the chain's first k tails into
    its Conv (onnxsim: BatchNormalization and scale, the bias Add left) has a Conv whose ``tails_after`` is the
    k-th tail's: the same function, told apart from the bare Conv output of the same name (``producer``:
    tensor -> the site that writes it; ``consumers``: tensor -> the sites that read it; ``const``: tensors of
    weights only)."""
    def is_tail(tail, before: str) -> bool:
        if tail.op_type == "BatchNormalization":
            return tail.input[0] == before
        return tail.op_type in AFFINE_TAILS and len(tail.input) == 2 and all(i == before or i in const for i in tail.input)

    def next_tails(t: str) -> list[str]:
        return [r.node.output[0] for r in consumers.get(t, []) if r.node.output and is_tail(r.node, t)]

    after: dict[str, int] = {}  # a Conv output or a tail's output -> the most tails that follow it, each reading the last
    tails: set[str] = set()
    for o in obs:
        site = producer.get(o.name)
        if o.kind != "float" or o.op_type not in CONVS or site is None or site.node.op_type != o.op_type:
            continue
        stack = [(o.name, False)]
        while stack:  # depth first, without recursion (a hostile chain of thousands of scales)
            t, done = stack.pop()
            if done:
                after[t] = max((1 + after[n] for n in next_tails(t)), default=0)
            elif t not in after:
                after[t] = 0  # (a cycle, in a broken graph, ends here)
                stack.append((t, True))
                for n in next_tails(t):
                    tails.add(n)
                    stack.append((n, False))
    out = []
    for o in obs:
        if o.kind == "float" and o.op_type in CONVS and after.get(o.name):
            o = replace(o, tails_after=after[o.name])
        elif o.kind == "float" and o.op_type in AFFINE_TAILS | {"BatchNormalization"} and o.name in tails:
            o = replace(o, conv_bn=True, tails_after=after.get(o.name, 0))
        out.append(o)
    return out


def is_conv(o) -> bool:
    """Whether observable ``o`` is a Conv's or a ConvTranspose's output (quantized or fused ones too)."""
    return canonical(o.effective_op) in CONVS


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

    def folds(self, conv: str | None, end) -> bool:
        """Whether ``other``'s ``conv``, paired with ``end``, is a Conv that took in the chain up to ``end``: as many
        tails follow it as follow ``end`` (one that more tails follow took less in: a --map onto a bare Conv output)."""
        o = self.other_by_name.get(conv) if conv is not None else None
        return o is not None and is_conv(o) and o.tails_after == end.tails_after

    def reader(self, o):
        """``o``'s one reader (one behind a copy of it, which names both as its sources, reads the copy)."""
        rs = self.readers.get(o.name, [])
        copies = {r.name for r in rs if r.op_type in COPIES}
        rs = [r for r in rs if not copies.intersection(r.sources)]
        return rs[0] if len(rs) == 1 else None

    def chain(self, o) -> tuple[list, object] | None:
        """What follows ``o`` in a Conv's chain up to its first paired tensor: (the unpaired ones, that
        tensor); None where the chain ends first. Each step is the one reader: the Conv's tail (right after
        it or after the tail before), a copy, or an activation, the last a fusion takes in."""
        members, cur = [], o
        for _ in range(16):
            r = self.reader(cur)
            if r is None or not ((r.conv_bn and (is_conv(cur) or cur.conv_bn)) or r.op_type in COPIES
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
        conv_out = is_conv(m)
        node = self.other_by_name[conv]
        if conv_out and m.tails_after:
            return tail_folded(side, node_words(node), None if end.conv_bn else (end.op_type, end.name))
        what = "a Conv" if conv_out else "a Conv's BatchNormalization, bias Add or scale" if m.conv_bn else f"a copy ({m.op_type}) in a Conv's chain"
        if conv in self.fused and end.op_type in FUSED_ACTIVATIONS:
            return (f"{what} whose activation {side}'s FusedConv {(node.writer or node.node)!r} takes in: compared as the "
                    "activation's output there")
        return (f"{what}, which {side}'s {node_words(node)} has folded in with the {end.op_type} {end.name!r} after it: "
                f"compared as that {end.op_type}'s output there")

    def end_conv(self, tail: str) -> tuple[str | None, object]:
        """(the other model's tensor paired with the tail ``tail``, or with the end of the chain right after it
        (its activation's partner); that end), or (None, None)."""
        if tail in self.paired:
            return self.paired[tail], self.by_name.get(tail)
        found = self.chain(self.by_name[tail]) if tail in self.by_name else None
        return (self.paired[found[1].name], found[1]) if found and not found[0] else (None, None)


def _folded_chains(chains: _ConvChains, skip: set[int]) -> dict[int, str]:
    """Each chain from its Conv (or from a tail, where the Conv has other readers too) that ends in a tensor
    paired with a folding Conv of the other model: its members not in ``skip``, index -> the reason."""
    out = {}
    paired, index = chains.paired, chains.index
    for o in chains.obs:
        if not (is_conv(o) or o.conv_bn) or o.name in paired:
            continue
        found = chains.chain(o)
        if found is None or not chains.folds(paired[found[1].name], found[1]):
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
        if k in skip or k in out or not o.tails_after or canonical(o.effective_op) != "Conv":
            continue
        there = [chains.end_conv(t) for t in chains.tails.get(o.name, ())]
        if there and all(end is not None and chains.folds(n, end) for n, end in there):
            out[k] = tail_folded(chains.side, node_words(chains.other_by_name[there[0][0]]))
