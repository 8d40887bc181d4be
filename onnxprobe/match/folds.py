"""Tails a Conv can take in: a BatchNormalization, a bias Add, a constant scale after a Conv.

A quantizer, onnxruntime's optimiser or an exporter folds such a tail into its Conv: that model has one
Conv tensor for both, which computes the tail's function. Matching by structure must pair it with the
other model's tail output, never with the bare Conv output before the tail (a renamed QDQ model against
its float original paired 31 of 45 tensors so: ``match.engine``).
"""

from __future__ import annotations

from dataclasses import replace

AFFINE_TAILS = {"Add", "Sub", "Mul", "Div"}  # with a constant operand: a bias or a scale a Conv can take in


def with_tails(obs: list, producer: dict, consumers: dict, const: set[str]) -> list:
    """The main graph's float observables (``match.observe``) with ``bn_next`` and ``conv_bn`` set: a Conv
    output whose one reader is a per-channel tail, and that tail's output (``producer``: tensor -> the site
    that writes it; ``consumers``: tensor -> the sites that read it; ``const``: tensors of weights only)."""
    def folds(conv_out: str) -> bool:
        site = producer.get(conv_out)
        readers = consumers.get(conv_out, [])
        if site is None or site.node.op_type != "Conv" or len(readers) != 1:
            return False
        tail = readers[0].node
        if tail.op_type == "BatchNormalization":
            return tail.input[0] == conv_out
        return tail.op_type in AFFINE_TAILS and len(tail.input) == 2 and all(i == conv_out or i in const for i in tail.input)

    out = []
    for o in obs:
        if o.kind == "float" and o.op_type == "Conv" and folds(o.name):
            o = replace(o, bn_next=True)
        elif (o.kind == "float" and o.op_type in AFFINE_TAILS | {"BatchNormalization"} and o.name in producer
              and any(folds(i) for i in producer[o.name].node.input)):
            o = replace(o, conv_bn=True)
        out.append(o)
    return out
