"""The sources of each observable of a main graph (``match.observe``): the nearest observed tensors upstream of
the node that writes it, the weights that node reads (digests, sizes, samples), and for an integer tensor its
node's operands (``match.integers``), which ``match.engine`` pairs by."""

from __future__ import annotations

from dataclasses import replace

from onnxprobe.match.integers import attributes, settings_of, slots_of, symbolic
from onnxprobe.match.ops import VALUE_PRESERVING, computing
from onnxprobe.match.weights import Weight, packed_weight


# ops that make another number of values of the weights they read (``with_sources``'s ``resized``)
RESIZING = frozenset({"Gather", "GatherElements", "GatherND", "Expand", "Tile", "Slice", "Concat", "Pad", "Compress",
                      "OneHot", "Resize", "Range", "ConstantOfShape"})


def with_sources(obs: list, producer: dict, const: set[str], inputs: set[str],
                  floats: set[str], digests: dict[str, Weight] | None = None,
                  codes_of: dict[str, int] | None = None, ints: dict[str, str] | None = None,
                  shape_of=lambda t: None) -> list:
    """The main graph's observables with their ``sources``: for each input of the node that writes it,
    the nearest observed tensors upstream (walking back through tensors nobody observes) and graph
    inputs; and ``data``: whether it holds floating-point values, or values of a type not known here
    (shape computations and indices, which two exporters write differently, are no evidence of what a
    node computes: ``match.engine``)."""
    observed = {o.name for o in obs}
    # codes a QLinear* node wrote that the graph itself dequantizes (a QOperator model's DequantizeLinear feeding a
    # float op, HardSigmoid, beside the QLinearMul that reads the codes): read as that observed view, the value
    # they hold; the walk went past them to what their QLinear* node read
    view_of = {producer[o.name].node.input[0]: o.name for o in obs
               if o.op_type == "DequantizeLinear" and o.name in producer and producer[o.name].node.input
               and producer[o.name].node.input[0] not in observed}
    memo: dict[str, frozenset] = {}

    def upstream(t: str, depth: int = 0, past_view: bool = False) -> frozenset:
        """``past_view``: for the view itself, what its codes are computed from."""
        if t in view_of and not past_view:
            return frozenset({view_of[t]})
        if t in memo:
            return memo[t]
        if t in inputs:
            out = frozenset({f"input:{t}"})
        elif t in const or t not in producer or depth > 200:
            out = frozenset()
        else:
            n = producer[t].node
            behind = frozenset().union(*(upstream(i, depth + 1) for i in n.input if i)) if n.input else frozenset()
            out = (frozenset({t}) | (behind if n.op_type in VALUE_PRESERVING else frozenset())) if t in observed else behind
        memo[t] = out
        return out

    digests = digests or {}

    codes_of = codes_of or {}

    def roots(t: str, depth: int = 0) -> set[str]:
        """The initializers (and Constants) a constant tensor is computed from: Unsqueeze(b), DQ(W, s, z)."""
        if t in digests or depth > 8 or t not in producer:
            return {t}
        return set().union(*(roots(x, depth + 1) for x in producer[t].node.input if x)) if producer[t].node.input else {t}

    def resized(t: str, depth: int = 0) -> bool:
        """Whether constant ``t`` is computed from its weights by an op that makes another number of values of them
        (an embedding's Gather at constant indices, Expand, Tile: a tool folds it into a weight of the output's size,
        onnxruntime's basic level a BERT's token-type lookup, 256 values of a 64-value table)."""
        if t in digests or depth > 8 or t not in producer:
            return False
        n = producer[t].node
        return n.op_type in RESIZING or any(resized(x, depth + 1) for x in n.input if x)

    def weights(n) -> tuple[tuple[str, ...], tuple[int, ...], tuple]:
        out, unsized = set(), set()  # unsized: weights read through a resizing op, whose sizes tell nothing
        packed = packed_weight(n)  # a weight stored with its quantization: counted as the weight it holds
        for k, i in enumerate(n.input):
            if packed and k in packed[0]:
                continue
            # a constant, or a tensor computed from constants alone (roots and resized walk its node's inputs)
            if i in const or (i in producer and producer[i].node.input and all(x in const for x in producer[i].node.input if x)):
                r = roots(i)
                out |= r
                if resized(i):
                    unsized |= r
        found = [digests[w] for w in out if w in digests]
        sized = [digests[w] for w in out - unsized if w in digests]
        codes = {codes_of[w] for w in out - unsized if w in codes_of and codes_of[w] > 1}  # quantized weights: sizes too
        codes |= {packed[1]} if packed else set()
        return (tuple(sorted({w.digest for w in found})), tuple(sorted({w.size for w in sized if w.size > 1} | codes)),
                tuple(sorted({(w.size, w.sample) for w in sized if w.size > 1})))

    def layer_of(o, n):  # o: a match.observe.Observable
        """The node whose weights a value has: a QDQ value's layer writes the tensor it quantizes (its key),
        a QOperator value's the quantized tensor its DequantizeLinear reads; else the value's own node."""
        if o.kind == "qdq" and o.key in producer:
            return producer[o.key].node
        if o.kind == "qoperator" and n.op_type == "DequantizeLinear" and n.input and n.input[0] in producer:
            return producer[n.input[0]].node
        return n

    def name_of(t: str) -> str | None:  # the tensor whose shape a Shape node reads, as ``sources`` names it
        return f"input:{t}" if t in inputs else t if t in observed else None

    values_of = symbolic(producer, ints or {}, shape_of, name_of, inputs)
    done = []
    for o in obs:
        if o.name in producer:
            n = producer[o.name].node
            own = view_of.get(n.input[0]) == o.name if n.input else False  # a view reads its codes' sources
            src = frozenset().union(*(upstream(i, past_view=own) for i in n.input if i)) if n.input else frozenset()
            digest, sizes, samples = weights(layer_of(o, n))
            o = replace(o, sources=tuple(sorted(src)), data=o.name in floats, weights=digest, weight_sizes=sizes,
                        weight_samples=samples, writer=computing(o.name, producer, lambda site: site.node).name)
            if o.data:  # what makes another function of one op (``match.integers.settings_of``)
                o = replace(o, settings=settings_of(n, ints or {}))
            if not o.data and o.kind == "float":  # an integer tensor: its node's operands (``match.integers``)
                o = replace(o, slots=slots_of(n, const, ints or {}, upstream) or (("",),), attrs=attributes(n),
                            values=values_of(o.name))
        done.append(o)
    return done
