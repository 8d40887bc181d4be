"""Weights as evidence of what a node computes, whatever the tensors' names and the nodes' order.

``float_constants`` describes each float initializer and Constant of a model (``Weight``): a digest of its
bytes (equal weights: the same layer, ``match.engine``'s ``_same_weights``), its number of elements (a
weight of another size is another layer: ``engine.alike``), and a few of its values at fixed positions.
Those values tell a layer whose weights moved a little (a float16 copy, a fine-tuned or perturbed model)
from the parallel branch beside it that has weights of its own: ``near_weights`` pairs the tensors that
are the only ones on each side to read weights near each other's. A renamed, reordered and perturbed
Inception v2 otherwise had 30 of 308 pairs crossed between branches of one shape.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import numpy as np
import onnx

from onnxprobe.graph.constants import constants as graph_constants
from onnxprobe.graph.extents import dims_nbytes
from onnxprobe.graph.tensor_data import check_tensor, tensor_bytes, tensor_values
from onnxprobe.match.ops import canonical
from onnxprobe.types import element_count

SAMPLES = 16  # values per weight: a random other weight agrees on all of them by chance never
NEAR = 0.05  # relative closeness of two samples' values (float16 rounds at 5e-4, a fine-tuning moves more)
_DTYPES = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64, onnx.TensorProto.FLOAT16: np.float16}
_FLOATS = (*_DTYPES, onnx.TensorProto.BFLOAT16)


@dataclass(frozen=True)
class Weight:
    digest: str  # of its type, dims and bytes ("s:" first for a scalar: weak evidence, 0.5 or an epsilon)
    size: int
    sample: tuple[float, ...]  # SAMPLES values at evenly spaced flat positions (all of a smaller weight)


def _values(t: onnx.TensorProto, raw: bytes, size: int) -> tuple[float, ...]:
    if t.data_type == onnx.TensorProto.BFLOAT16:  # the top half of a float32
        flat = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
    else:
        flat = np.frombuffer(raw, _DTYPES[t.data_type])
    if flat.size != size or not size:
        return ()
    return tuple(flat[_positions(size)].tolist())


def _positions(size: int) -> list[int]:
    """``min(size, SAMPLES)`` evenly spaced flat positions of a weight of ``size`` elements: what
    ``np.linspace(0, size - 1, n).astype(np.int64)`` gives (i * step, truncated, the last ``size - 1``), in the
    same float64 arithmetic, without its ~10 us of array calls for each of a model's weights."""
    n = min(size, SAMPLES)
    if n < 2:  # one element (or none): linspace's one position, 0
        return [0] * n
    step = (size - 1) / (n - 1)
    return [int(i * step) for i in range(n - 1)] + [size - 1]


def float_constants(model: onnx.ModelProto, constants: list | None = None) -> dict[str, Weight]:
    """The main graph's float initializers and Constant values, by name (external data left out: never
    read here). The digest covers at most 3 x 64 KiB of the bytes (the start, the middle and a stride
    through the whole). Shapes and indices are no evidence (two exporters write them differently)."""
    def weight(t: onnx.TensorProto) -> Weight | None:
        if t.data_type not in _FLOATS or t.data_location == onnx.TensorProto.EXTERNAL:
            return None
        raw = tensor_bytes(t)
        if len(raw) != dims_nbytes(t):  # raw_data of another length than its dims need: refused by name
            check_tensor(t)
        h = hashlib.blake2b(f"{t.data_type}:{list(t.dims)}:{len(raw)}".encode(), digest_size=12)
        if len(raw) <= 3 * 65536:
            h.update(raw)
        else:
            mid = len(raw) // 2
            h.update(raw[:65536])
            h.update(raw[mid:mid + 65536])
            h.update(raw[::max(1, len(raw) // 65536)])
        size = element_count(t.dims)
        return Weight(("s:" if size <= 1 else "") + h.hexdigest(), size, _values(t, raw, size) if size > 1 else ())

    found = constants if constants is not None else graph_constants(model.graph).items()
    out = {k: w for k, t in found if (w := weight(t)) is not None}
    out.update(_filled(model, dict(found)))
    return out


def _filled(model: onnx.ModelProto, consts: dict[str, onnx.TensorProto]) -> dict[str, Weight]:
    """The float ConstantOfShape outputs of constant shapes, described as the weights they are, never
    materialised (onnx-light's models hold every weight so: 1x1 and 3x3 Convs whose weights had no size
    were paired with each other in a renamed copy of one model)."""
    out = {}
    for n in model.graph.node:
        if n.op_type != "ConstantOfShape" or n.domain not in ("", "ai.onnx") or not n.input or n.input[0] not in consts:
            continue
        dims = [int(d) for d in tensor_values(consts[n.input[0]]).reshape(-1)]
        value = next((a.t for a in n.attribute if a.name == "value" and a.type == onnx.AttributeProto.TENSOR), None)
        dtype = value.data_type if value is not None else onnx.TensorProto.FLOAT
        if dtype not in _DTYPES or any(d < 0 for d in dims):
            continue
        v = float(tensor_values(value).reshape(-1)[0]) if value is not None else 0.0
        size = element_count(dims)
        h = hashlib.blake2b(f"{dtype}:{dims}:fill:{np.array(v, _DTYPES[dtype]).tobytes().hex()}".encode(), digest_size=12)
        out[n.output[0]] = Weight(("s:" if size <= 1 else "") + h.hexdigest(), size, (v,) * min(size, SAMPLES) if size > 1 else ())
    return out


_CODES = {onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.INT16, onnx.TensorProto.UINT16,
          onnx.TensorProto.INT4, onnx.TensorProto.UINT4}


def code_sizes(model: onnx.ModelProto, constants: list | None = None) -> dict[str, int]:
    """The main graph's quantized weights (8-, 16- and 4-bit integer initializers and Constants: a QDQ
    model's DequantizeLinear inputs, a QLinearConv's weight) -> their number of elements: a quantized
    1x1 Conv's weight is no 3x3 Conv's (``engine.alike``), whatever its values. Shape and index constants
    (int64) are left out: two exporters write them differently."""
    def size(t: onnx.TensorProto) -> int | None:
        return element_count(t.dims) if t.data_type in _CODES else None

    return {k: n for k, t in (constants if constants is not None else graph_constants(model.graph).items()) if (n := size(t)) is not None}


def near(a: tuple, b: tuple) -> bool:
    """Whether two observables' weights (``Observable.weight_samples``: (size, values) each) are the same
    weights moved a little: as many, of the same sizes, every sampled value within NEAR of the other's
    (relative to the larger of the two, or to the weight's largest sampled value for values near 0)."""
    if not a or len(a) != len(b):
        return False
    for (na, va), (nb, vb) in zip(a, b):
        if na != nb or len(va) != len(vb) or not va:
            return False
        x, y = np.asarray(va), np.asarray(vb)
        scale = max(np.abs(x).max(), np.abs(y).max())
        if not (np.abs(x - y) <= NEAR * np.maximum(np.abs(x), np.abs(y)) + 1e-3 * scale).all():
            return False
    return True


def near_weights(obs_a, obs_b, used_a: set[int], used_b: set[int], take, alike) -> None:
    """``take(i, j, reason)`` for the unpaired tensors of each model whose node reads weights near the other's
    (``near``), with the same op in the same scope, each the only such tensor for the other (a weight
    many layers share by value, a BN's ones and zeros, makes no pair)."""
    def key(o) -> tuple:
        return canonical(o.effective_op), o.scope, tuple(n for n, _ in o.weight_samples)

    by_b: dict[tuple, list[int]] = {}
    for j, o in enumerate(obs_b):
        if j not in used_b and o.weight_samples:
            by_b.setdefault(key(o), []).append(j)
    by_a: dict[tuple, list[int]] = {}
    for i, o in enumerate(obs_a):
        if i not in used_a and o.weight_samples:
            by_a.setdefault(key(o), []).append(i)
    for k, ia in by_a.items():
        jb = by_b.get(k, [])
        if not jb:
            continue
        cands = {i: [j for j in jb if near(obs_a[i].weight_samples, obs_b[j].weight_samples) and alike(obs_a[i], obs_b[j])]
                 for i in ia}
        back: dict[int, list[int]] = {}
        for i, js in cands.items():
            for j in js:
                back.setdefault(j, []).append(i)
        for i, js in cands.items():
            if len(js) == 1 and len(back[js[0]]) == 1:
                take(i, js[0], f"reads weights near B's with {k[0]} (by value)")


# weight-only quantized ops that read one weight packed with its quantization (onnxruntime's contrib ops):
# op -> (the inputs that are its parts: codes, scales, zero points, group index; the attributes whose
# product is the weight's number of elements). MatMulNBits keeps an N x K weight in bits/8 bytes a value,
# in blocks with a scale each: counted by those arrays, a 4-bit 128x128 weight read as one of 8,192 and one
# of 512 elements, another layer than the float MatMul of 16,384 it computes
PACKED_WEIGHTS = {"MatMulNBits": ((1, 2, 3, 4), ("K", "N"))}


def packed_weight(node: onnx.NodeProto) -> tuple[tuple[int, ...], int] | None:
    """For a node of a ``PACKED_WEIGHTS`` op: the positions of its packed weight's inputs and the number
    of elements of the weight they hold (None: another op, or its size attributes missing)."""
    spec = PACKED_WEIGHTS.get(node.op_type) if node.domain == "com.microsoft" else None
    if spec is None:
        return None
    attrs = {a.name: a.i for a in node.attribute}
    if not all(attrs.get(k, 0) > 0 for k in spec[1]):
        return None
    return spec[0], int(np.prod([attrs[k] for k in spec[1]], dtype=object))


def weight_outputs(model: onnx.ModelProto, done: set[str], hidden: dict[str, str], bare: list, sites, make,
                   float_types: set[int]) -> list:
    """The main graph's outputs that are (dense) initializers: no node writes them, and they are outputs
    as any other (onnxruntime returns them), compared as a Constant's output given as an output is; a string
    one is listed (``bare``) with why it is not. Placed at their first reader (at 0 where none reads them).
    ``make``: ``match.observe.Observable``; ``float_types``: the element types whose values are data."""
    inits = {i.name: i for i in model.graph.initializer}  # the last copy of a name, which onnxruntime runs
    first = {}
    for s in sites:
        for i in s.node.input:
            first.setdefault(i, s.index)
    out = []
    for o in model.graph.output:
        w = inits.get(o.name)
        if w is None or o.name in done:
            continue
        done.add(o.name)
        mine = make(key=o.name, name=o.name, probe=o.name, node="", op_type="", effective_op="",
                    index=first.get(o.name, 0), shape=tuple(w.dims), kind="float", is_output=True,
                    data=w.data_type in float_types, elem_type=w.data_type)
        if w.data_type == onnx.TensorProto.STRING:
            hidden[o.name] = "a string tensor: no difference to measure"
            bare.append(replace(mine, shape=None))
        else:
            out.append(mine)
    return out
