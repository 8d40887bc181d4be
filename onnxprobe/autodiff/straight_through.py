"""Gradients taken through a straight-through estimator (``registry.Rule.straight_through``: QuantizeLinear,
whose rule passes the gradient through the rounding): the model's function is a staircase there, whose
finite differences are 0 or a jump, so ``grad --check`` cannot check the gradient of a tensor whose way to
the loss crosses such an op (it read FAIL, blaming right rules): shown with the reason, not judged. The
tensors between the last rounding and the loss (a QDQ model's float tail, its output) are checked as any."""

from __future__ import annotations

import onnx

from onnxprobe.autodiff import registry
from onnxprobe.graph.walk import implicit_inputs, subgraphs
from onnxprobe.text import some


def reason(node: str, op: str = "QuantizeLinear") -> str:
    """Why grad --check does not judge a gradient behind straight-through ``node`` (of op ``op``)."""
    return f"straight-through estimator through {op} {node!r}: finite differences of rounded values cannot check it"


def places(found) -> str:
    """The straight-through nodes ``found`` ((op, name) pairs, repeats allowed) as text: "QuantizeLinear 'q1', ..."."""
    return some(sorted(set(found), key=lambda f: f[1]), form=lambda f: f"{f[0]} {f[1]!r}")


Label = tuple[str, str]  # (op, node name) of a straight-through node


def behind_rounding(nodes: list[onnx.NodeProto], loss: str) -> dict[str, Label]:
    """Tensor -> (op, name) of a straight-through node on a way from it to ``loss`` along which the gradient
    flows (differentiable input slots), the nearest to the tensor where there are several; ``nodes`` in
    topological order. Tensors with no such way are left out. If / Loop / Scan bodies are followed
    inside: a rounding in a body marks only what reaches it there (a Loop's carried state through the
    iterations), not every tensor the node reads."""
    return _behind(nodes, {loss: None})[1]


def _behind(nodes, seeds: dict[str, Label | None]) -> tuple[set[str], dict[str, Label]]:
    """(the tensors whose gradient reaches one of ``seeds``, those of them behind a rounding): ``seeds`` the
    tensors the gradient starts from, each with the rounding it is already behind (None: none)."""
    reach = set(seeds)
    behind = {k: v for k, v in seeds.items() if v is not None}
    for n in reversed(nodes):
        outs = [o for o in n.output if o in reach]
        r = registry.rule_of(n)
        if not outs or r is None:  # no gradient flows through an op without a rule
            continue
        if r.straight_through:
            label, reads = (n.op_type, n.name or n.output[0]), [x for i, x in enumerate(n.input) if x and r.differentiable(i)]
            for x in reads:
                reach.add(x)
                behind[x] = label
            continue
        if any(True for _ in subgraphs(n)):  # what reaches the outputs inside the bodies, alone
            reads = _through_bodies(n, {o: behind.get(o) for o in outs})
        else:
            reads = {x: next((behind[o] for o in outs if o in behind), None)
                     for i, x in enumerate(n.input) if x and r.differentiable(i)}
        for x, label in reads.items():
            reach.add(x)
            if label is not None and x not in behind:
                behind[x] = label
    return reach, behind


def _through_bodies(n: onnx.NodeProto, outs: dict[str, Label | None]) -> dict[str, Label | None]:
    """The tensors control-flow node ``n`` reads (inputs and outer-scope names) whose gradient reaches its
    outputs ``outs`` (each with its label), with the rounding each is behind inside the bodies."""
    found: dict[str, Label | None] = {}

    def read(name: str, label: Label | None) -> None:
        if name and (found.get(name) is None):
            found[name] = label

    outer = set(implicit_inputs(n))
    if n.op_type == "If":
        for _, body in subgraphs(n):
            seeds = {body.output[i].name: outs[o] for i, o in enumerate(n.output) if o in outs and i < len(body.output)}
            reach, behind = _behind(list(body.node), seeds)
            for x in outer & reach:
                read(x, behind.get(x))
        return found
    # Loop: inputs (M, cond, carried...), body inputs (iter, cond, carried...), body outputs (cond, carried...,
    # scans...); Scan: inputs and body inputs (state..., scanned...), body outputs (state..., scans...)
    loop = n.op_type == "Loop"
    body = next(g for _, g in subgraphs(n))
    carried = len(n.input) - 2 if loop else next((a.i for a in n.attribute if a.name == "num_scan_inputs"), 0)
    if not loop:
        carried = len(n.input) - carried
    out0, in0 = (1, 2) if loop else (0, 0)
    seeds = {body.output[out0 + i].name: outs[o] for i, o in enumerate(n.output) if o in outs and out0 + i < len(body.output)}
    while True:  # a carried state's gradient at the body's input flows on to its output one iteration earlier
        reach, behind = _behind(list(body.node), seeds)
        more = {body.output[out0 + k].name: behind.get(body.input[in0 + k].name) for k in range(carried)
                if body.input[in0 + k].name in reach and in0 + k < len(body.input)}
        grown = {k: v for k, v in more.items() if k not in seeds or (seeds[k] is None and v is not None)}
        if not grown:
            break
        seeds.update(grown)
    for i, x in enumerate(n.input):
        k = i - (2 if loop else 0)
        if k >= 0 and in0 + k < len(body.input) and body.input[in0 + k].name in reach:
            read(x, behind.get(body.input[in0 + k].name))
    for x in outer & reach:
        read(x, behind.get(x))
    return found
