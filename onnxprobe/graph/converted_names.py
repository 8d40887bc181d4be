"""A model converted to a newer opset by ``onnx.version_converter`` keeping the tensor names of the model
it came from.

The converter writes an adapted node anew and gives its outputs fresh names: an opset-7/8 Upsample becomes
a Resize whose output ``u`` is now ``_v_7``, and the nodes after it read ``_v_7``. A copy made only to
compute something about the model (its gradients, ``api.grad_plan``) must answer in the model's names, so
such outputs get their names back. The counterpart of a renamed tensor is found through a node that reads
it: the converted node that writes the same outputs as that reader, of the same op type, reading the same
tensors in every other slot.
"""

from __future__ import annotations

import onnx

from onnxprobe.graph.walk import all_graphs, node_display_name, walk

# the name of a node a converted copy has and the model has not (a Constant the converter wrote for an
# Unsqueeze's axes): what listings and the backward nodes written for it (``onnxprobe.grad/<node>/...``) show
CONVERTED_TAG = "onnxprobe.converted/"


def restore_names(source: onnx.ModelProto, converted: onnx.ModelProto) -> dict[str, str]:
    """Rename, in ``converted`` (in place), the tensors that stand for main-graph tensors of ``source`` under
    another name. Returns {converter's name: the model's name}."""
    src, dst = source.graph, converted.graph

    def names(g: onnx.GraphProto) -> set[str]:
        return ({i.name for i in g.input} | {i.name for i in g.initializer}
                | {o for n in g.node for o in n.output if o})

    theirs, ours = names(dst), names(src)
    writer = {o: n for n in dst.node for o in n.output if o}
    renames: dict[str, str] = {}
    for n in src.node:
        kept = [o for o in n.output if o and o in writer]
        if not kept:
            continue
        c = writer[kept[0]]
        if c.op_type != n.op_type or len(c.input) != len(n.input) or list(c.output) != list(n.output):
            continue
        for old, new in zip(n.input, c.input):
            if old == new or not old or not new or old in theirs or new in ours or new in renames:
                continue
            if any(o != m and o in theirs for o, m in zip(n.input, c.input)):
                break  # another slot differs too, by a tensor the copy has: not one node written two ways
            renames[new] = old
    if renames:
        _rename(dst, renames)
    _name_nodes(source, converted)
    return renames


def counterpart(n: onnx.NodeProto, c: onnx.NodeProto) -> bool:
    """Whether ``c`` (of a copy of the model) is ``n`` (of the model), perhaps adapted: the same op writing the
    same outputs (an omitted optional one may be given, more may follow)."""
    if (c.op_type, c.domain or "ai.onnx") != (n.op_type, n.domain or "ai.onnx") or len(c.output) < len(n.output):
        return False
    return all(a == b or not a for a, b in zip(n.output, c.output))


def _name_nodes(source: onnx.ModelProto, converted: onnx.ModelProto) -> None:
    """Name the copy's unnamed main-graph nodes as the model shows them: a node of the model by its display
    name there (``Mul_2``, not ``Mul_3`` after a Constant the converter wrote before it), a node of the copy
    alone ``onnxprobe.converted/<its display name>``. Unnamed nodes are named by their number, which the copy
    changes; the backward nodes and tensors are named after them."""
    shown = {o: (n, s.index) for s in walk(source) if not s.chain for n in [s.node] for o in n.output[:1] if o}
    for k, c in enumerate(converted.graph.node):
        if c.name:
            continue
        n, i = shown.get(c.output[0] if c.output else "", (None, 0))
        c.name = node_display_name(n, i) if n is not None and counterpart(n, c) else CONVERTED_TAG + node_display_name(c, k)


def _rename(g: onnx.GraphProto, renames: dict[str, str]) -> None:
    for body in all_graphs(g):  # bodies read the main graph's tensors by name too
        for n in body.node:
            n.input[:] = [renames.get(i, i) for i in n.input]
            if body is g:
                n.output[:] = [renames.get(o, o) for o in n.output]
    for vi in list(g.value_info) + list(g.output):
        vi.name = renames.get(vi.name, vi.name)
