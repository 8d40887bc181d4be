"""Declared types that onnxruntime checks the branches of an If against when it loads a graph. A plan made
for one feed declares the run's static shapes (``grad``'s backward graph is built with them); where an If
reads them, the branch that the feed does not take is type-checked against them too, and may be refused
where it only holds for other inputs (onnx's AffineGrid function, expanded, squeezes axis 1 of the grid in
its 2d branch: 'Dimension of input 1 must be 1 instead of 4' for a 3d grid)."""

from __future__ import annotations

import onnx

from onnxprobe.graph.walk import all_graphs, implicit_inputs, walk


def has_if(model: onnx.ModelProto) -> bool:
    return any(s.node.op_type == "If" for s in walk(model))


def declared_inputs(source: onnx.ModelProto, *models: onnx.ModelProto) -> None:
    """Give the graph inputs back the types the model declares (dynamic dimensions): with the inputs' static
    shapes, onnxruntime's constant folding resolves If nodes that test a shape, and on silero-vad it then
    rejects the LSTM inside (``First input tensor must have rank 3``); the shapes inferred for the feed stay
    in value_info, where the backward graph's rules used them."""
    declared = {i.name: i for i in source.graph.input}
    for m in models:
        for vi in m.graph.input:
            if vi.name in declared:
                vi.type.CopyFrom(declared[vi.name].type)


def loosen_branch_reads(*models: onnx.ModelProto) -> None:
    """The value_info of each tensor an If's branches read from outside, and of every tensor of the main
    graph it is computed from (onnxruntime infers a shape forward from them), keeps its rank and loses its
    sizes (in place): the branch not taken is then checked for what holds for any input of that rank, as in
    the model itself."""
    for m in models:
        made = {o: n for n in m.graph.node for o in n.output if o}
        todo = [t for s in walk(m) if s.node.op_type == "If" for t in implicit_inputs(s.node)]
        read: set[str] = set()
        while todo:
            t = todo.pop()
            if t in read:
                continue
            read.add(t)
            n = made.get(t)
            if n is not None:
                todo.extend(i for i in list(n.input) + implicit_inputs(n) if i and i not in read)
        for g in all_graphs(m.graph):
            for vi in g.value_info:
                if vi.name in read and vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
                    for d in vi.type.tensor_type.shape.dim:
                        d.Clear()
