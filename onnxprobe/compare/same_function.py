"""The layers of B that are A's own computation: introduced errors that need no cone.

A pair's introduced error is B's node(s) fed with A's matched inputs, against A's tensor (``compare.introduced``).
Where B's node is A's node over again (the same op and domain, equal attributes, and each input what A's node
reads: the A tensor it is matched to, the same graph input, a constant of the same type, dims and bytes, or a B
tensor that is in turn such a computation of A's), the layer introduces nothing by definition where both models
run alike: the one-run graph (``compare.fused``, one session for both) builds no cone and no row for it, and its
introduced error is exact. A cone of such a node measured onnxruntime computing one thing twice, which need not
agree to the bit (a float16 node without a float16 kernel runs in float32 and may read its producer's float32
value, not the float16 tensor exposed: the case ``introduced.exact_inputs`` answers by definition too). A model
against itself on another device or opt level is not such a case: its cones run B's way, which is what it compares.
On PP-OCRv4 det against a copy with perturbed weights 230 of the 277 pairs are such layers (all but the Convs
and what folds their weights): their cones and rows were a fifth of the merged graph (10,020 -> 7,706 nodes).

Random ops (RandomNormal and its kin, Multinomial, Bernoulli, Dropout) are never one computation twice, and a
node with a body is not looked into (its cone is never built either): neither is the same function here.
"""

from __future__ import annotations

import onnx
from onnx import TensorProto

from onnxprobe.compare.introduced import MAX_CONE_NODES
from onnxprobe.graph.skeleton import is_stub
from onnxprobe.graph.tensor_data import tensor_bytes
from onnxprobe.graph.weight_files import is_left, left_state, marked, same_data

RANDOM = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli",
                    "Dropout"})


class SameFunction:
    """``same(b, a)``: whether B's tensor ``b`` is computed by A's own node(s) from what A's tensor ``a`` is
    computed from, in a merged graph (``graph.merge.side_by_side``). ``producer``: tensor -> node; ``known``: B's
    matched tensors -> A's (where cones stop, ``compare.fused``); ``inits``: the initializers by name; ``weights``:
    the stubs' tensors by name (``graph.skeleton``); ``types``: the tensors' types, by which a cone casts an A
    tensor of another element type (then no longer A's own input). ``relied``: the (B, A) stubs found of the same bytes
    behind a ``same`` that held: a cache keyed on the skeletons (``compare.fused_cache``) checks them again, the
    key holding no weight."""

    def __init__(self, producer: dict, known: dict[str, str], inits: dict[str, TensorProto], weights: dict, types: dict):
        self.producer, self.known, self.inits, self.weights, self.types = producer, known, inits, weights, types
        self.relied: set[tuple[str, str]] = set()
        self._stubs: set[tuple[str, str]] = set()

    def same(self, b: str, a: str) -> bool:
        nb, na = self.producer.get(b), self.producer.get(a)
        if nb is None or na is None:  # a weight or an input given as the pair: no node, no cone
            return False
        memo: dict[tuple[int, int], bool] = {}
        budget = [MAX_CONE_NODES]
        self._stubs = set()
        got = self._node(nb, na, b, a, memo, budget)
        if got:
            self.relied |= self._stubs
        return got

    def _tensor(self, yb: str, xa: str, memo: dict, budget: list) -> bool:
        if not yb or not xa:  # an optional input left out: on both sides
            return yb == xa
        if yb in self.known:  # where the cone stops: fed A's tensor, cast where its type differs
            return self.known[yb] == xa and not self._cast(yb, xa)
        if yb == xa:  # a graph input both models share
            return yb not in self.producer
        vb, va = self._value(yb), self._value(xa)
        if vb is not None or va is not None:
            got = vb is not None and va is not None and same_bytes(vb, va)
            if got and (self._stub(yb) or self._stub(xa)):  # bytes a skeleton's key does not hold
                self._stubs.add((yb, xa))
            return got
        nb, na = self.producer.get(yb), self.producer.get(xa)
        return nb is not None and na is not None and self._node(nb, na, yb, xa, memo, budget)

    def _node(self, nb: onnx.NodeProto, na: onnx.NodeProto, yb: str, xa: str, memo: dict, budget: list) -> bool:
        if list(nb.output).index(yb) != list(na.output).index(xa):
            return False
        key = (id(nb), id(na))
        if key not in memo:
            budget[0] -= 1
            memo[key] = False  # what a cycle through the graph would read (none in a valid one)
            memo[key] = (budget[0] >= 0 and same_node(nb, na)
                         and all(self._tensor(ib, ia, memo, budget) for ib, ia in zip(nb.input, na.input)))
        return memo[key]

    def _cast(self, yb: str, xa: str) -> bool:
        """Whether the cone casts A's tensor to B's type (``compare.fused``'s rule, word for word)."""
        want, have = self.types.get(yb), self.types.get(xa)
        return (want is not None and have is not None and want.HasField("tensor_type") and have.HasField("tensor_type")
                and want.tensor_type.elem_type != have.tensor_type.elem_type)

    def _stub(self, name: str) -> bool:
        t = self._held(name)
        return t is not None and is_stub(t)

    def _value(self, name: str) -> TensorProto | None:
        """The constant a tensor holds: an initializer's, or a Constant node's ``value`` (a stub's own tensor)."""
        t = self._held(name)
        return None if t is None else self.weights.get(name) if is_stub(t) else t

    def _held(self, name: str) -> TensorProto | None:
        """The tensor the merged graph writes for ``name``, a stub or not: an initializer, or a Constant node's
        ``value`` (a Constant of value_float, value_ints...: None, compared as the node's attributes)."""
        t = self.inits.get(name)
        if t is not None:
            return t
        n = self.producer.get(name)
        if n is None or n.op_type != "Constant" or n.domain not in ("", "ai.onnx"):
            return None
        return next((x.t for x in n.attribute if x.name == "value" and x.type == onnx.AttributeProto.TENSOR), None)


def same_node(nb: onnx.NodeProto, na: onnx.NodeProto) -> bool:
    """The same op, domain, inputs' and outputs' count and attributes (a Constant's value compared as its tensor is
    by ``SameFunction``); never a random op or a node with a body."""
    if (nb.op_type != na.op_type or (nb.domain or "ai.onnx") != (na.domain or "ai.onnx") or len(nb.input) != len(na.input)
            or len(nb.output) != len(na.output) or nb.op_type in RANDOM):
        return False
    if any(x.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for x in [*nb.attribute, *na.attribute]):
        return False
    ab, aa = sorted(nb.attribute, key=lambda x: x.name), sorted(na.attribute, key=lambda x: x.name)
    return len(ab) == len(aa) and all(x.name == y.name and x.type == y.type and _same_attribute(x, y) for x, y in zip(ab, aa))


def _same_attribute(x: onnx.AttributeProto, y: onnx.AttributeProto) -> bool:
    if x.type == onnx.AttributeProto.TENSOR:
        return not is_stub(x.t) and not is_stub(y.t) and same_bytes(x.t, y.t)
    x2, y2 = onnx.AttributeProto(), onnx.AttributeProto()
    x2.CopyFrom(x)
    y2.CopyFrom(y)
    x2.doc_string = y2.doc_string = ""
    return x2.SerializeToString(deterministic=True) == y2.SerializeToString(deterministic=True)


def same_bytes(t: TensorProto, u: TensorProto) -> bool:
    """Two tensors of one element type, dims and bytes (NaN payloads and -0.0 included: the same computation's
    input, not merely equal values); False for data not in memory (external)."""
    if t.data_type != u.data_type or list(t.dims) != list(u.dims):
        return False
    if t.data_location == TensorProto.EXTERNAL or u.data_location == TensorProto.EXTERNAL:
        return False
    if t.data_type == TensorProto.STRING:
        return list(t.string_data) == list(u.string_data)
    if t.HasField("raw_data") and u.HasField("raw_data"):
        return t.raw_data == u.raw_data
    if is_left(t) and is_left(u) and marked(t) == marked(u) and left_state(t) == left_state(u):
        return True  # the same bytes of one file, unchanged (graph.weight_files)
    try:  # a weight left in its file: read there, to the first chunk that differs; typed fields
        return same_data(t, u) if is_left(t) or is_left(u) else tensor_bytes(t) == tensor_bytes(u)
    except Exception:  # noqa: BLE001 - a tensor numpy cannot hold: not known to be the same
        return False
