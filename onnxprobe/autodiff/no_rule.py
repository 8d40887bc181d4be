"""The error for an op without a gradient rule on the way from the loss to a wanted tensor: it names the op,
its node, the wanted tensors whose gradient would pass through it and the inputs they reach it by (the engine
and the coverage check before any work raise the same)."""

from __future__ import annotations

import onnx

from onnxprobe.autodiff import registry
from onnxprobe.errors import NoGradientRule
from onnxprobe.graph.walk import implicit_inputs, needed_nodes, subgraphs


def no_rule_error(n: onnx.NodeProto, display: str, rg: set[str], nodes: list[onnx.NodeProto],
                  wrt: list[str]) -> NoGradientRule:
    """The error for node ``n`` on the way, which has no gradient rule (or no gradient): it names the wanted
    tensors (``wrt``) whose gradient would pass through it, and its inputs they reach it by."""
    st = registry.status(n.op_type, n.domain)
    needed = [i for i in dict.fromkeys(list(n.input) + implicit_inputs(n)) if i in rg]
    hint = "it has no gradient" if st == "non-differentiable" else "no gradient rule for it"
    return NoGradientRule(registry.key(n.op_type, n.domain), display, hint, _wanted_behind(needed, rg, nodes, wrt),
                          registry.supported_ops(), through=needed)


def _wanted_behind(tensors: list[str], rg: set[str], nodes: list[onnx.NodeProto], wrt: list[str]) -> list[str]:
    """The tensors of ``wrt`` that ``tensors`` depend on through nodes that carry a gradient (``nodes`` in
    topological order), in ``wrt``'s order."""
    carrying = [n for n in nodes if any(o in rg for o in n.output)]
    behind = set(tensors) | {i for n in needed_nodes(carrying, tensors) for i in list(n.input) + implicit_inputs(n)}
    return [t for t in dict.fromkeys(wrt) if t in behind]


def seen_from_outside(e: NoGradientRule, n: onnx.NodeProto, rg: set[str], nodes: list[onnx.NodeProto],
                      wrt: list[str]) -> NoGradientRule:
    """``e``, raised for a node inside a body of ``n`` (an If, Loop or Scan of ``nodes``), with the wanted tensors
    of ``n``'s graph (``wrt``) behind it in place of the body's own: its formal inputs are ``n``'s inputs (a Loop's
    carried values from slot 2 on, a Scan's from slot 0), the outer tensors it reads keep their names. The body's
    names ('h_in', 'x_t') told the user nothing they had asked for."""
    if e.where is None:
        return e
    formal: dict[str, str] = {}
    first = {"Loop": 2, "Scan": 0}.get(n.op_type)
    for _, body in subgraphs(n):
        if first is not None:
            formal.update((vi.name, x) for vi, x in zip(body.input[first:], n.input[first:]) if x)
    outer = [formal.get(t, t) for t in (e.needed or e.through)]
    outer = [t for t in dict.fromkeys(outer) if t in rg]
    wanted = _wanted_behind(outer, rg, nodes, wrt)
    return NoGradientRule(e.op, e.node, e.hint, wanted or outer or e.needed, e.supported, e.where, e.through)
