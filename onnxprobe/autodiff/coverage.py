"""Rule coverage, checked before anything else is built for a gradient: an op on the way from the requested
tensors to the loss without a gradient rule is the problem to name, not a failure of the loss's or a rule's
graph in the model's old opset, nor onnx's version converter's on the model's domain (an opset-1
ai.onnx.preview.training Adagrad, an ai.onnx.ml TreeEnsemble)."""

from __future__ import annotations

import onnx

from onnxprobe.autodiff import registry
from onnxprobe.autodiff.engine import Engine, on_the_way, requires_grad
from onnxprobe.autodiff.no_rule import no_rule_error
from onnxprobe.graph.walk import node_display_name


def refuse_without_rule(model: onnx.ModelProto, outputs: list[str], wrt: list[str]) -> None:
    """Raise ``attach_backward``'s NoGradientRule for the first op (from the loss back) of the main graph of
    ``model`` that lies between ``outputs`` and ``wrt`` and has no gradient rule; nothing where none does."""
    registry.load()
    if model.functions:  # a local function's call is differentiated through its body (attach_backward)
        return
    eng = Engine(model)
    nodes = list(model.graph.node)
    wrt = [t for t in wrt if t in eng.names]
    rg, slots = requires_grad(eng, nodes, wrt)
    _, active = on_the_way(nodes, {o: o for o in outputs}, rg, slots)
    index = {id(n): k for k, n in enumerate(nodes)}
    for n in active:
        if registry.status(n.op_type, n.domain) != "rule":
            raise no_rule_error(n, node_display_name(n, index[id(n)]), rg, nodes, wrt)
