"""Why a requested tensor the loss depends on gets no gradient (``attach_backward``'s ``blocked`` and
``integer``): an op input whose rule gives none, or a way to the loss through integer values only."""

from __future__ import annotations

from typing import Callable

import onnx

from onnxprobe.autodiff import registry


def blocked_tensors(is_float: Callable[[str], bool], tensors: list[str], nodes: list[onnx.NodeProto],
                    reach: set[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Of ``tensors`` (asked for, no gradient, yet the loss depends on them): (tensor -> the op that reads it
    at an input its rule gives no gradient (Clip's bounds, Pad's constant value), or that cuts the gradient
    with integer outputs and no rule (QLinearConv, MatMulInteger, DynamicQuantizeLinear: a quantized layer;
    not a piecewise-constant op such as Floor, whose gradient is zero: ``through_nondifferentiable`` names it);
    tensor -> the op whose integer output is its only way to the loss (a Cast to int64 feeding Gather's
    indices: no gradient by nature, not for want of a rule))."""
    readers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for n in nodes:
        st = registry.status(n.op_type, n.domain)
        cuts = st == "not implemented" or registry.CATEGORY.get(registry.key(n.op_type, n.domain)) == "quantization"
        if any(o in reach for o in n.output if o) and (st == "rule" or cuts):
            for i, x in enumerate(n.input):
                readers.setdefault(x, []).append((n, i))
    out: dict[str, str] = {}
    integer: dict[str, str] = {}
    for t in tensors:  # forward from t, through inputs that do take a gradient, to one that does not
        frontier, seen, via = [t], {t}, None
        while frontier and t not in out:
            x = frontier.pop(0)
            for n, i in readers.get(x, []):
                r = registry.rule_of(n)
                if r is None or not r.differentiable(i):
                    out[t] = f"{registry.key(n.op_type, n.domain)} {n.name or n.output[0]!r} (input {i})"
                    break
                for o in n.output:
                    if not o or o in seen:
                        continue
                    seen.add(o)
                    if is_float(o) or r.straight_through:  # integer values carry no gradient on
                        frontier.append(o)
                    elif via is None and o in reach:
                        via = f"{registry.key(n.op_type, n.domain)} {n.name or o!r}"
        if t not in out and via is not None:
            integer[t] = via
    return out, integer


def through_nondifferentiable(nodes: list[onnx.NodeProto], tensors: list[str], output: str) -> dict[str, str]:
    """Of ``tensors`` (no gradient, and no way to the loss that takes one): tensor -> the first op without a
    gradient (ArgMax, Floor, a comparison...: ``registry.NON_DIFFERENTIABLE``) on a way from it to ``output``,
    where there is one: the loss depends on the tensor, piecewise constantly, which 'does not depend' misstated.
    A shape query (Shape, Size) reads no value: no way through it counts."""
    from onnxprobe.graph.walk import implicit_inputs

    readers: dict[str, list[onnx.NodeProto]] = {}
    for n in nodes:
        for x in list(n.input) + implicit_inputs(n):
            readers.setdefault(x, []).append(n)
    out: dict[str, str] = {}
    for t in tensors:
        frontier, seen = [(t, None)], {t}
        while frontier and t not in out:
            x, via = frontier.pop(0)
            for n in readers.get(x, []):
                op = registry.key(n.op_type, n.domain)
                if registry.CATEGORY.get(op) == "shape":
                    continue
                step = via or (f"{op} {n.name or n.output[0]!r}" if op in registry.NON_DIFFERENTIABLE else None)
                for o in n.output:
                    if o == output and step is not None:
                        out[t] = step
                    if o and o not in seen:
                        seen.add(o)
                        frontier.append((o, step))
    return out


def partial_tensors(nodes: list[onnx.NodeProto], stopped: list[tuple[onnx.NodeProto, str]], rg: set[str],
                    got: set[str]) -> dict[str, str]:
    """Of the tensors in ``got`` (they have a gradient): those with a way to the loss through one of the
    ``stopped`` ops (node, its display: an op without a rule that ``unsupported="skip"`` passed over), whose
    gradient therefore sums only the other ways, a part of the real one: tensor -> the first such op
    ('com.microsoft:Attention Attention_1': BERT's layers reach the loss through the skip connection too)."""
    producer = {o: n for n in nodes for o in n.output if o}
    out: dict[str, str] = {}
    for node, display in stopped:
        todo = [i for i in node.input if i and i in rg]
        seen = set(todo)
        while todo:
            t = todo.pop()
            if t in got:
                out.setdefault(t, display)
            p = producer.get(t)
            for i in (p.input if p is not None else ()):
                if i and i in rg and i not in seen:
                    seen.add(i)
                    todo.append(i)
    return out
