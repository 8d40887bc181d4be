"""Checks of an If's, a Loop's or a Scan's body against the node that holds it, which onnxruntime makes when it
loads the model (``graph.declared_types`` walks the bodies and calls these): a body input declared of another
element type than the node feeds it, a value a Loop carries from one iteration to the next that the body
gives back of another type than the node feeds it, and a body's declaration of an outer value it reads of
another type."""

from __future__ import annotations

import onnx
from onnx import TensorProto

from onnxprobe.graph.op_schema import ValueType, elem_name, value_type
from onnxprobe.text import quote


def body_feeds(n: onnx.NodeProto, version: int | None, elem: dict[str, ValueType]) -> list[tuple[str | None, ValueType]]:
    """What a Loop or a Scan feeds its body's inputs, in order, each (the outer value or None, its type; 0:
    unknown): a Loop's iteration number INT64, its condition BOOL, then its carried values; a Scan's states, then the
    elements of its scanned inputs (at opset 8, its inputs after sequence_lens). Empty for any other node."""
    if n.op_type == "Loop":
        return [(None, TensorProto.INT64), (None, TensorProto.BOOL)] + [(x, elem.get(x, 0)) for x in n.input[2:]]
    if n.op_type == "Scan" and (version or 0) >= 9:
        return [(x, elem.get(x, 0)) for x in n.input]
    if n.op_type == "Scan" and version == 8:  # its first input the optional sequence_lens, which feeds no body input
        return [(x, elem.get(x, 0)) for x in n.input[1:]]
    return []


def fed_problem(n: onnx.NodeProto, body: onnx.GraphProto, label: str, feeds: list[tuple[str | None, ValueType]]) -> str | None:
    """A Loop's or a Scan's body input declared of another element type than the node feeds it (``feeds``:
    ``body_feeds``'s). onnxruntime refuses it ("Tensor element type mismatch"), and what read the body's
    declarations went on with the wrong type."""
    for v, (x, want) in zip(body.input, feeds):
        got = value_type(v.type)
        if got and want and got != want:
            by = f" ({quote(x)})" if x else ""
            return (f"{quote(v.name)} is declared of element type {elem_name(got)} in the body of {label}, and the "
                    f"{n.op_type} feeds it {elem_name(want)}{by}")
    return None


def carried_problem(n: onnx.NodeProto, body: onnx.GraphProto, label: str, feeds: list[tuple[str | None, ValueType]],
                    types: dict[str, ValueType]) -> str | None:
    """A value a Loop carries, that its body gives back (``types``: the body's values' types, walked) of another
    element type than the Loop feeds it, its body input left untyped or not: onnxruntime refuses it ("Input
    element type of 1 does not match existing output type of 7"; measured, whatever the outer output is
    declared), and what ran the model's graph met onnxruntime's raw error. A Scan's state that changes type
    it loads (measured), so it is not held here."""
    if n.op_type != "Loop":
        return None
    for (x, want), v in zip(feeds[2:], body.output[1:]):
        got = types.get(v.name, 0)
        if got and want and got != want:
            return (f"the body of {label} gives back its carried value {quote(v.name)} as {elem_name(got)}, and the "
                    f"{n.op_type} feeds it {elem_name(want)} ({quote(x)}): a carried value keeps its element type")
    return None


def outer_declared_problem(g: onnx.GraphProto, outer: dict[str, ValueType], where: str) -> str | None:
    """A body's value_info entry naming an outer value a node of the body reads, declared of another element
    type than the value is outside: onnxruntime refuses it ("Tensor element type mismatch. 1 != 7"; measured:
    an entry of an outer value the body does not read, or of a body input, it does not read)."""
    own = {v.name for v in g.input} | {t.name for t in g.initializer} | {o for n in g.node for o in n.output}
    read = {x for n in g.node for x in n.input}
    for v in g.value_info:
        got = value_type(v.type)
        want = outer.get(v.name)
        if got and want and got != want and v.name in read and v.name not in own:
            return (f"{quote(v.name)} is declared of element type {elem_name(got)} in {where}, and it is "
                    f"{elem_name(want)} outside it")
    return None
