"""A copy of a model converted to a newer opset by ``onnx.version_converter`` (``grad``: gradients that need
newer op versions than an old model has are computed on it), checked to be the same model, with the tensor
names of the model (``converted_names``). The model itself is never changed."""

from __future__ import annotations

import onnx

from onnxprobe.errors import ModelError, first_line
from onnxprobe.graph.converted_names import restore_names
from onnxprobe.graph.model import Model
from onnxprobe.graph.shapes import annotate
from onnxprobe.graph.walk import all_graphs


def upgraded_copy(model: Model, opset: int, what: str) -> Model:
    """``model`` converted to ``opset``; ``what`` (why, and from which opset) leads any error's line."""
    from onnx import version_converter

    # converted without the value_info annotated at load: types inferred at the old opset are not the
    # new one's (an opset-9 Dropout's mask is float, typed so at load; from opset 12 it is bool), and the
    # converter keeps them, which onnxruntime then refuses in the exported model
    src = onnx.ModelProto()
    src.CopyFrom(model.proto)
    for body in all_graphs(src.graph):
        del body.value_info[:]
    if src.ir_version < 1:  # IR 0, which ONNX does not define and onnxruntime reads as one below 4 (graph.io.ir_notes):
        src.ir_version = 3  # read so here too; the converter cannot parse it (a C++ assertion, cut mid-sentence)
    if not any(o.domain in ("", "ai.onnx") for o in src.opset_import):  # no ONNX op to convert: the converter
        src.opset_import.append(onnx.helper.make_opsetid("", opset))  # fails on the other domains (ai.onnx.ml)
        warnings = list(model.warnings)
        annotate(src, warnings)
        return Model(src, model.source, warnings)
    added = _initializers_as_inputs(src)
    try:
        proto = version_converter.convert_version(src, opset)
    except Exception as e:  # noqa: BLE001 - the converter raises many kinds
        raise ModelError(f"{what} failed: {first_line(e)[:200]}") from e
    kept = [i for i in proto.graph.input if i.name not in added]
    del proto.graph.input[:]
    proto.graph.input.extend(kept)
    _same_input_ranks(model.proto, proto, what)
    restore_names(model.proto, proto)  # an adapted node's outputs, renamed by the converter ('u' -> '_v_7')
    warnings = list(model.warnings)
    annotate(proto, warnings)
    return Model(proto, model.source, warnings)


def _initializers_as_inputs(proto: onnx.ModelProto) -> set[str]:
    """List the main graph's initializers that are not graph inputs as inputs too (returns their names, to be
    taken out again after the conversion): onnx.version_converter reads an IR-3 model's initializers only
    through its inputs, and onnxruntime saves an optimized opset-9 model (IR 3) with initializers that are
    not ('Input conv1_w_0 is undefined!')."""
    have = {i.name for i in proto.graph.input}
    added = set()
    for t in proto.graph.initializer:
        if t.name not in have and t.name not in added:
            proto.graph.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
            added.add(t.name)
    return added


def _same_input_ranks(source: onnx.ModelProto, converted: onnx.ModelProto, what: str) -> None:
    """The converted copy must take the inputs the model takes: onnx.version_converter's Scan 8 -> 9 drops
    the batch axis (an input [1, 2] becomes [2]), and onnxruntime then refused the copy with a shape error."""
    def ranks(m: onnx.ModelProto) -> dict[str, int]:
        return {i.name: len(i.type.tensor_type.shape.dim) for i in m.graph.input
                if i.type.HasField("tensor_type") and i.type.tensor_type.HasField("shape")}

    before, after = ranks(source), ranks(converted)
    changed = [n for n in before if n in after and before[n] != after[n]]
    if changed:
        n = changed[0]
        raise ModelError(f"{what} changes the rank of input {n!r} ({before[n]} -> {after[n]}: onnx.version_converter "
                         "drops an axis), so the copy is not the same model: its gradients are not computed")
