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


def tail_folded(side: str, conv: str) -> str:
    """The reason of a Conv left unpaired because ``side``'s Conv ``conv`` has its tail folded in."""
    return (f"a Conv its BatchNormalization, bias Add or scale follows, where {side}'s {conv} has it folded in: "
            "compared as the tail's output there")


def folded_elsewhere(obs: list, other: list, paired: dict[str, str], skip: set[int], side: str) -> dict[int, str]:
    """Unpaired Conv outputs of ``obs`` (indices not in ``skip``) that ``other`` computes inside one of its
    Convs, under another name (``paired``: name -> the other model's name), so that they are folded there,
    not without counterpart: a Conv a tail follows, whose tail's output is paired with a Conv (onnxruntime's
    Conv+BatchNormalization fusion names the fused Conv's output after the BatchNormalization's); and a Conv
    output, or such a tail's, whose one observed reader is an activation paired with a FusedConv (its
    Conv+Relu, Conv+HardSigmoid, Conv+BatchNormalization+Relu fusions at --opt-level extended). Index -> the
    reason, naming ``side``'s Conv."""
    # a Conv of ``other`` that a tail of its own follows took nothing in (a --map onto a bare Conv output)
    folding = {o.name for o in other if canonical(o.effective_op) == "Conv" and not o.bn_next}
    fused = {o.name for o in other if o.op_type == "FusedConv"}
    tails: dict[str, list[str]] = {}
    readers: dict[str, list] = {}
    for o in obs:
        for s in set(o.sources):
            readers.setdefault(s, []).append(o)
        if o.conv_bn:
            for s in o.sources:
                tails.setdefault(s, []).append(o.name)

    def activation_in(name: str) -> str | None:
        """The other model's FusedConv that took in ``name``'s one reader, an activation; else None."""
        rs = readers.get(name, [])
        return paired[rs[0].name] if len(rs) == 1 and rs[0].op_type in FUSED_ACTIVATIONS and paired.get(rs[0].name) in fused else None

    out = {}
    for k, o in enumerate(obs):
        if k in skip:
            continue
        if o.bn_next:
            there = [paired.get(t) or activation_in(t) for t in tails.get(o.name, ())]
            if there and all(n in folding for n in there):
                out[k] = tail_folded(side, there[0])
                continue
        conv = activation_in(o.name) if canonical(o.effective_op) == "Conv" or o.conv_bn else None
        if conv is not None:
            what = "a Conv's BatchNormalization, bias Add or scale" if o.conv_bn else "a Conv"
            out[k] = f"{what} whose activation {side}'s FusedConv {conv} takes in: compared as the activation's output there"
    return out
