"""The backward pass of a control-flow body (an If branch, a Loop or Scan body), for rules/control.py.

A body is differentiated as a model of its own: its inputs are the body's inputs, the outer tensors it
reads and the gradients of its outputs (the seeds); ``attach_backward`` (handed in by the engine, which
this module does not import) emits its backward nodes with fresh names from the enclosing model. The
result (``BodyGrad``) holds

- ``forward``: the body's nodes after differentiation (rules may add outputs to forward nodes: an inner
  If exposing its values, MaxPool's Indices), which replace the forward body's nodes;
- ``backward``: the backward nodes, pruned to what the gradients need, with the body's Constants they
  read copied in;
- ``grads``: each requested tensor's gradient (None where the body's outputs do not depend on it);
- ``needed``: the forward values (node outputs, body inputs, initializers) that the backward nodes read.
  The caller exposes them from the forward node (extra If outputs, extra Loop / Scan scan outputs), so
  nothing is computed twice, and renames them in the backward nodes (``rename``);
- ``types``: the types known for the body's tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import onnx
from onnx import helper

from onnxprobe.errors import NoGradientRule, RuleRefused
from onnxprobe.graph.shapes import infer_shapes, value_types
from onnxprobe.graph.walk import implicit_inputs, needed_nodes, outer_reads, subgraphs


@dataclass
class BodyGrad:
    forward: list[onnx.NodeProto]
    backward: list[onnx.NodeProto]
    grads: dict[str, str | None]
    needed: list[str]
    types: dict[str, onnx.TypeProto] = field(default_factory=dict)


def _typed(name: str, tp: onnx.TypeProto | None) -> onnx.ValueInfoProto:
    vi = onnx.ValueInfoProto(name=name)
    if tp is not None:
        vi.type.CopyFrom(tp)
    return vi


def differentiate_body(eng, attach, body: onnx.GraphProto, seeds: dict[str, str], wrt: list[str],
                       input_types: dict[str, onnx.TypeProto], where: str = "") -> BodyGrad:
    """``seeds``: body output -> the (new) tensor that holds its gradient; ``wrt``: body inputs and outer
    tensors; ``input_types``: types for body inputs whose declared type lacks a shape (a Loop state takes
    its initial value's); ``where``: the body, for messages (an op without a rule says where it lies)."""
    try:
        return _differentiate_body(eng, attach, body, seeds, wrt, input_types)
    except (NoGradientRule, RuleRefused) as e:
        if where and e.where is None:  # the innermost body names where the node lies
            raise e.within(where) from e
        raise


def _differentiate_body(eng, attach, body: onnx.GraphProto, seeds: dict[str, str], wrt: list[str],
                        input_types: dict[str, onnx.TypeProto]) -> BodyGrad:
    synth = onnx.ModelProto()
    synth.ir_version = eng.model.ir_version
    synth.opset_import.extend(eng.model.opset_import)
    g = synth.graph
    g.CopyFrom(body)
    g.name = body.name or "body"
    for vi in g.input:
        tp = input_types.get(vi.name)
        if tp is not None and not vi.type.tensor_type.HasField("shape"):
            vi.type.CopyFrom(tp)
    declared = {i.name for i in g.input} | {i.name for i in g.initializer}
    for t in outer_reads(body):
        if t not in declared:
            g.input.append(_typed(t, eng.types.get(t)))
            declared.add(t)
    out_types = {o.name: o.type for o in body.output if o.type.HasField("tensor_type")}
    for o, s in seeds.items():
        g.input.append(_typed(s, out_types.get(o) or eng.types.get(o)))
    # the enclosing model's shape inference annotated the body: its shapes serve the body's rules (not for
    # a name the enclosing graph defines too, which the body shadows)
    outer = {o for n in eng.graph.node for o in n.output} | {i.name for i in eng.graph.input}
    have = {vi.name for vi in g.value_info} | declared | outer
    for n in body.node:
        for o in n.output:
            if o and o not in have and o in eng.types:
                g.value_info.append(_typed(o, eng.types[o]))
                have.add(o)
    bw = attach(synth, seeds, list(wrt), outputs=[], prune=False, fold=False, names=eng.names,
                unsupported=eng.unsupported)
    eng.warnings.extend(w for w in bw.warnings if w not in eng.warnings)
    nodes = list(bw.model.graph.node)
    # backward nodes whose values the forward nodes read belong to the forward body (an LSTM rewritten with
    # standard ops: rules/lstm.py)
    fwd_reads = {i for n in nodes if n.name not in bw.backward_names for i in list(n.input) + implicit_inputs(n)}
    moved = {n.name for n in needed_nodes([n for n in nodes if n.name in bw.backward_names], fwd_reads)}
    forward = [n for n in nodes if n.name not in bw.backward_names or n.name in moved]
    backward = needed_nodes(nodes=[n for n in nodes if n.name in bw.backward_names and n.name not in moved],
                     outputs=set(bw.grads.values()))
    consts = {o: n for n in forward if n.op_type == "Constant" and not n.input for o in n.output}
    produced = {o for n in forward for o in n.output if o} | {i.name for i in body.input} | \
        {i.name for i in body.initializer}
    reads: dict[str, None] = {}
    for n in backward:
        for i in list(n.input) + implicit_inputs(n):
            if i:
                reads.setdefault(i)
    copies, renames = [], {}
    for t in reads:
        if t in consts:  # a Constant is copied into the backward body rather than exposed
            c = onnx.NodeProto()
            c.CopyFrom(consts[t])
            renames[t] = eng.b.fresh(f"{t}.copy")
            c.output[:] = [renames[t]]
            c.name = eng.b.fresh(f"{c.name or t}.copy")
            copies.append(c)
    rename(backward, renames)
    needed = [t for t in reads if t in produced and t not in consts]
    types = {k: v for k, v in eng.types.items() if k not in outer}
    types.update(value_types(bw.model))
    if any(not _elem(types, t) for t in needed):  # exposed values need a type (a mask's bool, a shape's int64)
        for k, v in value_types(infer_shapes(bw.model)).items():
            types.setdefault(k, v)
    grads = {t: bw.grads.get(t) for t in wrt}
    return BodyGrad(forward, copies + backward, grads, needed, types)


def _elem(types: dict, t: str) -> int:
    tp = types.get(t)
    return tp.tensor_type.elem_type if tp is not None and tp.HasField("tensor_type") else 0


def rename(nodes: list[onnx.NodeProto], mapping: dict[str, str]) -> None:
    """Rename the references to ``mapping``'s keys in ``nodes`` and in the bodies inside them (names are
    unique in the whole model, so no body can shadow one). In place."""
    if not mapping:
        return

    def graph(gr: onnx.GraphProto) -> None:
        rename(list(gr.node), mapping)
        for o in gr.output:
            if o.name in mapping:
                o.name = mapping[o.name]

    for n in nodes:
        n.input[:] = [mapping.get(i, i) for i in n.input]
        for _, sg in subgraphs(n):
            graph(sg)


def make_graph(name: str, nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
               outputs: list[onnx.ValueInfoProto]) -> onnx.GraphProto:
    return helper.make_graph(nodes, name, inputs, outputs)
