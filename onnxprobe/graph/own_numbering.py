"""A model with its loss and backward graph, as the model's own nodes number it.

The backward model ``grad`` runs is not always the model's graph node for node: a model below the opset
the gradients need is converted first (``upgrade``: a Constant before each Unsqueeze, a Softmax written as
Shape / Flatten / Softmax / Reshape), nodes no output needs are pruned, body constants hoisted. Its nodes
then have other numbers than the model's (the model's node 104 is the copy's 108), and unnamed nodes
other display names (``Mul_2`` becomes ``Mul_3``). ``numbered_as`` builds what the debugger shows
instead: the model's own nodes, numbered as in the model (each with the outputs the backward pass added
to it, a MaxPool's indices), then the copy's nodes that compute tensors the model does not have, named
``onnxprobe.converted/...``, then the loss and backward nodes (named after the model's nodes). The view
is only looked at, never run: its values come from the backward model by tensor name (and, for a
tensor of the model that the copy lacks, from the model itself).
"""

from __future__ import annotations

import onnx

from onnxprobe.graph.converted_names import CONVERTED_TAG, counterpart
from onnxprobe.graph.walk import all_graphs, node_display_name


def numbered_as(model: onnx.ModelProto, backward: onnx.ModelProto, added: set[str]) -> onnx.ModelProto | None:
    """The view of ``backward`` (``model`` with its loss and backward graph; ``added``: the names of the nodes
    the loss and the backward pass wrote) in ``model``'s own numbering; None when ``backward``'s nodes
    already are ``model``'s, followed by the added ones."""
    nodes = list(backward.graph.node)
    run = [k for k, n in enumerate(nodes) if n.name not in added]  # positions of the copy's forward nodes
    writer = {o: k for k in run for o in nodes[k].output if o}
    own: list[onnx.NodeProto] = []
    counterparts: set[int] = set()
    for i, n in enumerate(model.graph.node):
        first = next((o for o in n.output if o), None)
        k = writer.get(first) if first else None
        shown = onnx.NodeProto()
        shown.CopyFrom(n)
        if k is not None and counterpart(n, nodes[k]):
            counterparts.add(k)
            c = nodes[k]
            if len(c.output) > len(n.output):  # outputs the backward pass reads (a MaxPool's indices)
                shown.output.extend(c.output[len(n.output):])
        own.append(shown)
    if len(own) == len(run) and all(a == nodes[k] for a, k in zip(own, run)):
        return None
    ours = {o for g in all_graphs(model.graph) for n in g.node for o in n.output if o} | {o for n in own for o in n.output if o}
    converted = []
    for k in run:  # the copy's own nodes; one that writes a tensor of the model stays out of sight
        if k in counterparts or any(o in ours for o in nodes[k].output if o):
            continue
        c = onnx.NodeProto()
        c.CopyFrom(nodes[k])
        if not c.name.startswith(("onnxprobe.", CONVERTED_TAG)):
            c.name = CONVERTED_TAG + node_display_name(nodes[k], k)
        converted.append(c)
    tail = [n for n in nodes if n.name in added]
    out = onnx.ModelProto()
    out.ir_version, out.producer_name, out.producer_version = model.ir_version, model.producer_name, model.producer_version
    out.opset_import.extend(model.opset_import)
    g = out.graph
    g.name = model.graph.name
    g.input.extend(backward.graph.input)
    g.output.extend(backward.graph.output)
    g.initializer.extend(backward.graph.initializer)
    have = {i.name for i in g.initializer}
    g.initializer.extend(i for i in model.graph.initializer if i.name not in have)  # of nodes the copy pruned
    have: set[str] = set()
    for v in list(backward.graph.value_info) + list(model.graph.value_info) + list(model.graph.output):
        if v.name not in have and v.type.HasField("tensor_type") and v.type.tensor_type.elem_type:
            have.add(v.name)
            g.value_info.append(v)
    g.node.extend(own + converted)
    g.node.extend(tail)
    return out
