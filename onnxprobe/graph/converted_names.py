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

from onnxprobe.graph.walk import all_graphs


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
    return renames


def _rename(g: onnx.GraphProto, renames: dict[str, str]) -> None:
    for body in all_graphs(g):  # bodies read the main graph's tensors by name too
        for n in body.node:
            n.input[:] = [renames.get(i, i) for i in n.input]
            if body is g:
                n.output[:] = [renames.get(o, o) for o in n.output]
    for vi in list(g.value_info) + list(g.output):
        vi.name = renames.get(vi.name, vi.name)
