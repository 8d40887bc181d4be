"""Weightless views of a model, for work that needs the graph but not the weight bytes.

``skeleton(model)`` builds a new ModelProto with the same graph whose large initializers are stubs:
name, type and dims, no data (marked as external data, so that checkers and onnxruntime accept them).
Building it never copies the weight bytes, which is what makes shape inference and session creation
cheap on big models (serialising a 45 MB ResNet-18 costs 80 ms, a skeleton under 1 ms).
``large_initializers(model)`` lists what was left out; ``skeleton(model, constants=True)`` also stubs the
big values of Constant nodes (models that keep their weights there). ``stubs``, ``stub_weights``,
``raw_bytes`` and ``point_stubs_at`` hand what was left out to onnxruntime as in-memory external data
(``runtime.ort``).
"""

from __future__ import annotations


import numpy as np
import onnx
from onnx import TensorProto

from onnxprobe.errors import ModelError
from onnxprobe.graph.extents import dims_nbytes
from onnxprobe.graph.tensor_data import to_array
from onnxprobe.graph.weight_files import data, is_left
from onnxprobe.graph.wire_format import KEEP_ELEMENTS
from onnxprobe.text import clip, quote
from onnxprobe.types import element_count

STUB_LOCATION = "onnxprobe-stub"
# KEEP_ELEMENTS: small tensors (shapes, axes, scales) stay, shape inference reads their values (the one number for this
# and for the wire-format walk that leaves the bigger ones in their file)


def weight_bytes(model: onnx.ModelProto) -> int:
    """Bytes of the main graph's initializers, from their dims and types (``extents.dims_nbytes``: 4-bit types
    half a byte an element): no serialisation."""
    return sum(dims_nbytes(t) for t in model.graph.initializer)


def is_large_tensor(t: TensorProto) -> bool:
    """A tensor that ``skeleton`` stubs (a main-graph initializer), or a Constant value it stubs with ``constants``."""
    return t.data_location != TensorProto.EXTERNAL and stubbed_size(t)


def stubbed_size(t: TensorProto) -> bool:
    """Whether ``t``'s type and dims are those of a tensor ``skeleton`` stubs, wherever its data lies."""
    return t.data_type != TensorProto.STRING and element_count(t.dims) > KEEP_ELEMENTS


def large_initializers(model: onnx.ModelProto) -> list[TensorProto]:
    return [t for t in model.graph.initializer if is_large_tensor(t)]


def is_stub(t: TensorProto, location: str | None = STUB_LOCATION) -> bool:
    """A stub that ``skeleton`` left for a large initializer (its data elsewhere, by name); ``location``: one
    that ``point_stubs_at`` pointed at that external-data file instead (None: pointed at any file)."""
    return t.data_location == TensorProto.EXTERNAL and (location is None or any(e.value == location for e in t.external_data))


def stub(t: TensorProto, name: str | None = None) -> TensorProto:
    s = TensorProto(name=t.name if name is None else name, data_type=t.data_type, dims=list(t.dims))
    s.data_location = TensorProto.EXTERNAL
    e = s.external_data.add()
    e.key, e.value = "location", STUB_LOCATION
    return s


# Constant values that stay in a skeleton whatever their size: shape inference's data propagation reads
# integer constants (and cannot read a stub's)
_CONSTANT_KEEP = (TensorProto.INT64, TensorProto.INT32, TensorProto.STRING)


def _constant_value(n: onnx.NodeProto) -> TensorProto | None:
    """The tensor a Constant node outputs when it holds one in ``value``, else None."""
    if n.op_type != "Constant" or n.domain not in ("", "ai.onnx") or len(n.attribute) != 1 or len(n.output) != 1:
        return None
    a = n.attribute[0]
    return a.t if a.name == "value" and a.type == onnx.AttributeProto.TENSOR else None


def _big_constant(n: onnx.NodeProto) -> TensorProto | None:
    """The value of a Constant node that a skeleton with ``constants`` stubs (a big float or quantized
    weight), else None."""
    t = _constant_value(n)
    return t if t is not None and t.data_type not in _CONSTANT_KEEP and is_large_tensor(t) else None


def large_constants(model: onnx.ModelProto) -> dict[str, TensorProto]:
    """The main graph's Constant values that ``skeleton(constants=True)`` stubs, by output name."""
    return {n.output[0]: t for n in model.graph.node if (t := _big_constant(n)) is not None}


def _constant_stubs(model: onnx.ModelProto, location: str | None) -> dict[str, TensorProto]:
    return {n.output[0]: t for n in model.graph.node if (t := _constant_value(n)) is not None and is_stub(t, location)}


def skeleton(model: onnx.ModelProto, constants: bool = False) -> onnx.ModelProto:
    """``constants``: the main graph's big Constant values (``large_constants``) are stubs too, named by
    the node's output (onnxruntime turns Constants into initializers of that name; the node stays, so
    the skeleton's nodes are the model's, one for one)."""
    out = onnx.ModelProto()
    for f in ("ir_version", "producer_name", "producer_version", "domain", "model_version", "doc_string"):
        setattr(out, f, getattr(model, f))
    out.opset_import.extend(model.opset_import)
    out.metadata_props.extend(model.metadata_props)
    out.functions.extend(model.functions)
    g, src = out.graph, model.graph
    g.name, g.doc_string = src.name, src.doc_string
    if constants:
        for n in src.node:
            t = _big_constant(n)
            if t is None:
                g.node.append(n)
                continue
            c = g.node.add(op_type=n.op_type, domain=n.domain, name=n.name, doc_string=n.doc_string)
            c.output.extend(n.output)
            c.attribute.add(name="value", type=onnx.AttributeProto.TENSOR).t.CopyFrom(stub(t, n.output[0]))
    else:
        g.node.extend(src.node)
    g.input.extend(src.input)
    g.output.extend(src.output)
    g.value_info.extend(src.value_info)
    g.sparse_initializer.extend(src.sparse_initializer)
    for t in src.initializer:
        g.initializer.append(stub(t) if is_large_tensor(t) else t)
    return out


def stubs(model: onnx.ModelProto, location: str | None = STUB_LOCATION) -> dict[str, TensorProto]:
    """The stubs of ``model`` (a skeleton), initializers' and Constants', by the name they stand for (``location``:
    those pointed at that external-data file, ``is_stub``)."""
    return {**{t.name: t for t in model.graph.initializer if is_stub(t, location)}, **_constant_stubs(model, location)}


def fill_stubs(model: onnx.ModelProto, weights: dict[str, TensorProto], location: str | None = STUB_LOCATION,
               copy: bool = True) -> bool:
    """Put back into ``model``'s stubs (``stubs(model, location)``) the tensors they stand for, from ``weights`` by
    name, each keeping its stub's name (``copy`` False: only check that ``weights`` holds them all). False where
    one is missing (the stubs before it are filled)."""
    for name, t in stubs(model, location).items():
        w = weights.get(name)
        if w is None:
            return False
        if copy:
            keep = t.name
            t.CopyFrom(w)
            t.name = keep
    return True


def weights_of(model: onnx.ModelProto) -> dict[str, TensorProto]:
    """What a skeleton of ``model`` may stub, by name: the initializers and the big Constant values."""
    return {**{t.name: t for t in model.graph.initializer}, **large_constants(model)}


def stub_weights(model: onnx.ModelProto, base: onnx.ModelProto) -> dict[str, TensorProto]:
    """The tensors of ``base`` that ``model``'s stubs stand for, by name (no copies)."""
    names = stubs(model)
    return {k: t for k, t in weights_of(base).items() if k in names}


def raw_bytes(t: TensorProto) -> np.ndarray:
    """A tensor's data as ONNX lays it out in raw_data (packed int4 included), as a read-only uint8 array; a
    ModelError naming the tensor where the data does not fit its dims and type (``check_data``)."""
    if is_left(t):  # a weight left in its external data file: read there
        return np.frombuffer(data(t), np.uint8)
    check_data(t)
    if not t.HasField("raw_data"):  # typed fields (float_data...): convert once
        try:
            t = onnx.numpy_helper.from_array(to_array(t), t.name)
        except ValueError:  # onnx's reshape to the dims: another number of values
            _misfit(t, "data of another size")
    return np.frombuffer(t.raw_data, np.uint8)


def check_data(t: TensorProto) -> None:
    """A ModelError when an inline tensor holds another amount of data than its dims and type need (none at
    all, a truncated raw_data): handed over apart from the graph (``skeleton``), it failed in numpy ("cannot
    reshape array of size 0") or in onnxruntime's words about external data the model does not have. Typed
    fields (float_data...) are told by onnx's own conversion (complex and packed 4-bit values count their way)."""
    if is_left(t):
        return
    if t.HasField("raw_data"):
        if len(t.raw_data) != dims_nbytes(t):
            _misfit(t, f"{len(t.raw_data)} bytes")
    elif dims_nbytes(t) and not any(len(getattr(t, f)) for f in _TYPED):
        _misfit(t, "no data")


def _misfit(t: TensorProto, held: str) -> None:
    raise ModelError(f"tensor {quote(t.name)} of the model holds {held}, its dims {clip(str(list(t.dims)), 80)} and "
                     f"type need {dims_nbytes(t)} bytes (the file is damaged, or was written wrongly)")


_TYPED = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")


def point_stubs_at(model: onnx.ModelProto, files: dict[str, tuple]) -> list[TensorProto]:
    """Point the main graph's stubs (``stubs``) at external-data files, by name: ``{name: (file, length)}``,
    each tensor at offset 0 of its file, or ``(file, length, offset)``. Mutates ``model``; returns the tensors
    pointed, which ``unpoint_stubs`` makes stubs again (a plan's skeleton, serialised once pointed, is not copied
    first)."""
    pointed = []
    for name, t in stubs(model).items():
        if name in files:
            location, length, offset = (*files[name], 0)[:3]
            del t.external_data[:]
            for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
                e = t.external_data.add()
                e.key, e.value = k, v
            pointed.append(t)
    return pointed


def unpoint_stubs(pointed: list[TensorProto]) -> None:
    """``point_stubs_at``'s tensors made the stubs they were (``stub``'s one external-data entry)."""
    for t in pointed:
        del t.external_data[:]
        e = t.external_data.add()
        e.key, e.value = "location", STUB_LOCATION


def model_digest(model: onnx.ModelProto) -> str:
    """A hash of the model's graph and weights (sha256, hex): what a report says it describes. The weights
    are hashed tensor by tensor, so no serialised copy of the whole model is made."""
    import hashlib

    h = hashlib.sha256(skeleton(model).SerializeToString())
    for t in large_initializers(model):
        h.update(t.name.encode())
        h.update(t.raw_data if t.HasField("raw_data") else data(t) if is_left(t) else t.SerializeToString())
    return h.hexdigest()
