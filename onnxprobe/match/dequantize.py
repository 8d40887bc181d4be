"""Dequantizations a quantized model does not hold itself, added for probes to read (``match.observe``
lists them as ``Dequantize`` specs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import onnx

from onnxprobe.graph.shapes import value_types

if TYPE_CHECKING:
    from onnxprobe.match.observe import Dequantize


def add_dequantize(model: onnx.ModelProto, specs: list[Dequantize]) -> onnx.ModelProto:
    """A copy of ``model`` with one DequantizeLinear per spec appended to the main graph, each output
    typed (the scale's dtype, the quantized tensor's shape) where those are known: the one-run diff
    measures in the graph only tensors of known type and rank."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    types = value_types(model)
    for d in specs:
        ins = [d.quantized, d.scale] + ([d.zero_point] if d.zero_point else [])
        kw = {"axis": d.axis} if d.axis is not None else {}
        out.graph.node.append(onnx.helper.make_node("DequantizeLinear", ins, [d.output], name=d.output, **kw))
        q, scale = types.get(d.quantized), types.get(d.scale)
        if q is not None and scale is not None and q.tensor_type.HasField("shape"):
            vi = onnx.ValueInfoProto(name=d.output)
            vi.type.CopyFrom(q)
            vi.type.tensor_type.elem_type = scale.tensor_type.elem_type
            out.graph.value_info.append(vi)
    return out
