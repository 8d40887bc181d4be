"""Weights that live inside control-flow bodies (torch's legacy exporter puts silero-vad's every Conv and
LSTM weight in Constant nodes of If branches) become initializers of the main graph, under the same
name: they are then weights like any other (gradient targets, perturbed by ``--check``), and the bodies
read them from the outer scope, through which the If / Loop / Scan rules pass their gradients. Moving a
Constant out of a body changes no value."""

from __future__ import annotations

import onnx

from onnxprobe.graph.builder import FLOAT_TYPES, all_names, fresh_name
from onnxprobe.graph.constants import constant_of
from onnxprobe.graph.walk import subgraphs
from onnxprobe.types import element_count


def _float_constant(n: onnx.NodeProto) -> onnx.TensorProto | None:
    t = constant_of(n) if len(n.output) == 1 else None  # every form of the op (value, value_floats): graph.constants
    return t if t is not None and t.data_type in FLOAT_TYPES and element_count(t.dims) >= 2 else None


def _placeholder(m: onnx.NodeProto, output: str) -> onnx.NodeProto:
    """What stands in a body for its Constant ``m`` once moved out: a Constant of its name writing an int64 0 to
    ``output`` (no float value: no weight, no gradient target)."""
    return onnx.helper.make_node("Constant", [], [output], name=m.name,
                                 value=onnx.helper.make_tensor("v", onnx.TensorProto.INT64, [], [0]))


def hoist_constants(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy with the float Constants and dense initializers (two values or more) of every body moved to the main
    graph's initializers; ``model`` itself when there are none."""
    main = model.graph
    taken = {i.name for i in main.initializer} | {i.name for i in main.input} | {o for n in main.node for o in n.output}
    found: list[tuple[onnx.GraphProto, onnx.NodeProto]] = []

    def visit(g: onnx.GraphProto) -> None:
        for n in g.node:
            for _, sg in subgraphs(n):
                for m in sg.node:
                    if _float_constant(m) is not None and m.output[0] not in taken:
                        found.append((sg, m))
                        taken.add(m.output[0])
                for t in sg.initializer:  # a body's own (dense) initializer: a weight as a Constant is
                    if t.data_type in FLOAT_TYPES and element_count(t.dims) >= 2 and t.name not in taken:
                        inits.append(t.name)
                        taken.add(t.name)
                visit(sg)

    inits: list[str] = []
    visit(main)
    if not found and not inits:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    names = {m.output[0] for _, m in found}
    everywhere = all_names(model)  # every name of every graph: a body output's new name must be none of them
    moved: list[onnx.TensorProto] = []

    def strip(g: onnx.GraphProto) -> None:
        for n in g.node:
            for _, sg in subgraphs(n):
                keep, changed = [], False
                returned = {o.name: o for o in sg.output}
                for m in sg.node:
                    if m.op_type == "Constant" and m.output and m.output[0] in names:
                        changed = True
                        t = onnx.TensorProto()
                        t.CopyFrom(_float_constant(m))
                        t.name = m.output[0]
                        moved.append(t)
                        if t.name in returned:  # a body returning an outer-scope value directly is refused by
                            # onnxruntime: the body returns an Identity of it, under a new name (outputs are positional)
                            fresh = fresh_name(everywhere, f"{t.name}.returned")
                            keep.append(onnx.helper.make_node("Identity", [t.name], [fresh], name=fresh))
                            returned[t.name].name = fresh
                        else:  # a Constant of an int64 0 in its place, read by nothing: every node keeps its
                            # number and display name ('Sin_7'), which grad's rows and --range share with layers
                            keep.append(_placeholder(m, fresh_name(everywhere, f"{t.name}.hoisted")))
                    else:
                        c = onnx.NodeProto()
                        c.CopyFrom(m)
                        keep.append(c)
                if changed:
                    del sg.node[:]
                    sg.node.extend(keep)
                if any(t.name in inits for t in sg.initializer):
                    kept = [t for t in sg.initializer if t.name not in inits]
                    moved.extend(t for t in sg.initializer if t.name in inits)
                    del sg.initializer[:]
                    sg.initializer.extend(kept)
                strip(sg)

    strip(out.graph)
    out.graph.initializer.extend(moved)
    return out
