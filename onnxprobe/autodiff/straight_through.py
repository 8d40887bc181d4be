"""Gradients taken through a straight-through estimator (``registry.Rule.straight_through``: QuantizeLinear,
whose rule passes the gradient through the rounding): the model's function is a staircase there, whose
finite differences are 0 or a jump, so ``grad --check`` cannot check the gradient of a tensor whose way to
the loss crosses such an op (it read FAIL, blaming right rules): shown with the reason, not judged. The
tensors between the last rounding and the loss (a QDQ model's float tail, its output) are checked as any."""

from __future__ import annotations

import onnx

from onnxprobe.autodiff import registry
from onnxprobe.graph.walk import all_graphs, implicit_inputs, subgraphs


def reason(node: str, op: str = "QuantizeLinear") -> str:
    """Why grad --check does not judge a gradient behind straight-through ``node`` (of op ``op``)."""
    return f"straight-through estimator through {op} {node!r}: finite differences of rounded values cannot check it"


def places(found) -> str:
    """The straight-through nodes ``found`` ((op, name) pairs, repeats allowed) as text: "QuantizeLinear 'q1', ..."."""
    each = sorted(set(found), key=lambda f: f[1])
    return ", ".join(f"{op} {name!r}" for op, name in each[:3]) + (f" and {len(each) - 3} more" if len(each) > 3 else "")


def _rounding(n: onnx.NodeProto) -> onnx.NodeProto | None:
    """``n`` when its rule is a straight-through one, else the first such node in its If / Loop / Scan bodies."""
    r = registry.rule_of(n)
    if r is not None and r.straight_through:
        return n
    for _, g in subgraphs(n):
        for body in all_graphs(g):
            found = next((b for b in body.node if _rounding(b) is not None), None)
            if found is not None:
                return _rounding(found)
    return None


def behind_rounding(nodes: list[onnx.NodeProto], loss: str) -> dict[str, tuple[str, str]]:
    """Tensor -> (op, name) of a straight-through node on a way from it to ``loss`` along which the gradient
    flows (differentiable input slots), the nearest to the tensor where there are several; ``nodes`` in
    topological order. Tensors with no such way are left out."""
    reach, behind = {loss}, {}
    for n in reversed(nodes):
        outs = [o for o in n.output if o in reach]
        r = registry.rule_of(n)
        if not outs or r is None:  # no gradient flows through an op without a rule
            continue
        found = _rounding(n)
        label = (found.op_type, found.name or found.output[0]) if found is not None else \
            next((behind[o] for o in outs if o in behind), None)
        reads = [x for i, x in enumerate(n.input) if x and r.differentiable(i)] + implicit_inputs(n)
        for x in reads:
            reach.add(x)
            if label is not None and (found is not None or x not in behind):
                behind[x] = label
    return behind
