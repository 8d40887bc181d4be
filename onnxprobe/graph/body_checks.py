"""Checks of an If's, a Loop's or a Scan's body against the node that holds it, which onnxruntime makes when it
loads the model (``graph.declared_types`` walks the bodies and calls these): a body input declared of another
element type than the node feeds it, and a body's declaration of an outer value it reads of another type."""

from __future__ import annotations

import onnx
from onnx import TensorProto

from onnxprobe.graph.op_schema import elem_name
from onnxprobe.text import quote


def fed_problem(n: onnx.NodeProto, body: onnx.GraphProto, label: str, version: int | None, elem: dict[str, int]) -> str | None:
    """A Loop's or a Scan's body input declared of another element type than the node feeds it: a Loop's
    iteration number INT64, its condition BOOL, then its carried values; a Scan's (opset 9 on, without
    sequence_lens) states, then the elements of its scanned inputs. onnxruntime refuses it ("Tensor element
    type mismatch"), and what read the body's declarations went on with the wrong type."""
    if n.op_type == "Loop":
        feeds = [(None, TensorProto.INT64), (None, TensorProto.BOOL)] + [(x, elem.get(x, 0)) for x in n.input[2:]]
    elif n.op_type == "Scan" and (version or 0) >= 9:
        feeds = [(x, elem.get(x, 0)) for x in n.input]
    else:
        return None
    for v, (x, want) in zip(body.input, feeds):
        got = v.type.tensor_type.elem_type if v.type.WhichOneof("value") == "tensor_type" else 0
        if got and want and got != want:
            by = f" ({quote(x)})" if x else ""
            return (f"{quote(v.name)} is declared of element type {elem_name(got)} in the body of {label}, and the "
                    f"{n.op_type} feeds it {elem_name(want)}{by}")
    return None


def outer_declared_problem(g: onnx.GraphProto, outer: dict[str, int], where: str) -> str | None:
    """A body's value_info entry naming an outer value a node of the body reads, declared of another element
    type than the value is outside: onnxruntime refuses it ("Tensor element type mismatch. 1 != 7"; measured:
    an entry of an outer value the body does not read, or of a body input, it does not read)."""
    own = {v.name for v in g.input} | {t.name for t in g.initializer} | {o for n in g.node for o in n.output}
    read = {x for n in g.node for x in n.input}
    for v in g.value_info:
        got = v.type.tensor_type.elem_type if v.type.WhichOneof("value") == "tensor_type" else 0
        want = outer.get(v.name)
        if got and want and got != want and v.name in read and v.name not in own:
            return (f"{quote(v.name)} is declared of element type {elem_name(got)} in {where}, and it is "
                    f"{elem_name(want)} outside it")
    return None
