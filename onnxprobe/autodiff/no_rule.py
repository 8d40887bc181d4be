"""The error for an op without a gradient rule on the way from the loss to a wanted tensor: it names the op,
its node, the wanted tensors whose gradient would pass through it and the inputs they reach it by (the engine
and the coverage check before any work raise the same)."""

from __future__ import annotations

import onnx

from onnxprobe.autodiff import registry
from onnxprobe.errors import NoGradientRule
from onnxprobe.graph.walk import implicit_inputs, needed_nodes


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
