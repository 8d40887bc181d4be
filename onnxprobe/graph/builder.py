"""The one node builder every graph pass uses (statistics probes, losses, backward graphs): fresh
deterministic names, deduplicated constants, and the ops whose signature changed across opsets (Reduce*,
Squeeze / Unsqueeze / Split axes, Slice and Pad arguments, Shape start/end) emitted the way the model's
opset wants them. ``interleave`` places nodes appended to a graph right behind what they read.

``GraphBuilder(names, opset, nodes=...)`` appends to ``nodes``: a graph's own node list (``graph.node``)
or a plain list the caller adds to a graph later. Every node's name starts with ``scope``; ``doc`` (when
set) becomes its doc_string. ``g.Mul(a, b)`` is ``g.op("Mul", a, b)``, so rules read like the maths.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxprobe.errors import OpsetTooOld
from onnxprobe.graph.op_schema import constant_signature
from onnxprobe.graph.walk import all_graphs
from onnxprobe.text import some

FLOAT_TYPES = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}


def float_outputs(model: onnx.ModelProto) -> list[str]:
    """The main graph's outputs that are float tensors (by their declared type): those a loss can be taken of."""
    return [o.name for o in model.graph.output if o.type.HasField("tensor_type") and o.type.tensor_type.elem_type in FLOAT_TYPES]
# integers and booleans (not 4-bit ones): values a statistics row holds exactly in float64, and a diff judges exactly
INTEGER_TYPES = frozenset({TensorProto.BOOL, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16, TensorProto.UINT16,
                           TensorProto.INT32, TensorProto.UINT32, TensorProto.INT64, TensorProto.UINT64})
Axes = "Sequence[int] | str | None"


class Names(set):
    """A set of names that remembers, per base, the suffix its last fresh name took (``fresh_name``): a
    pass that adds thousands of 'onnxprobe/const' tried '.1', '.2'... from the start each time, O(n^2)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.next_suffix: dict[str, int] = {}


def fresh_name(names: set[str], base: str) -> str:
    """``base``, or ``base.1``, ``base.2``... : the first not in ``names``, which it joins (a ``Names``
    starts past the suffixes it gave ``base`` before: names are only added, so none of those is free)."""
    counters = getattr(names, "next_suffix", None)
    k = counters.get(base, 0) if counters is not None else 0
    name = base if k == 0 else f"{base}.{k}"
    while name in names:
        k += 1
        name = f"{base}.{k}"
    names.add(name)
    if counters is not None:
        counters[base] = k + 1
    return name


def opset_version(model: onnx.ModelProto, domain: str = "", default: int | None = None) -> int | None:
    """The version of ``domain`` the model imports, as onnxruntime reads it: a domain imported twice (onnx's
    checker accepts it) runs with its last import, "" and "ai.onnx" being one domain (measured with
    ReduceSum's ``axes``, an attribute before opset 13 and an input from it, imported as 12 and 13 in both
    orders); ``default`` when it imports none."""
    want = "" if domain == "ai.onnx" else domain
    found = [o.version for o in model.opset_import if ("" if o.domain == "ai.onnx" else o.domain) == want]
    return found[-1] if found else default


def single_opsets(model: onnx.ModelProto, warnings: list[str]) -> None:
    """Collapse a domain imported twice to the import onnxruntime runs with (``opset_version``), in place,
    with a warning: every pass then reads one version (onnx's checker reads another when "" and "ai.onnx"
    are mixed; the probed copy was built for the first import and run with the last)."""
    seen: dict[str, list[int]] = {}
    for o in model.opset_import:
        seen.setdefault("" if o.domain == "ai.onnx" else o.domain, []).append(o.version)
    twice = {d: v for d, v in seen.items() if len(v) > 1}
    if not twice:
        return
    keep = [helper.make_opsetid(d, v[-1]) for d, v in seen.items()]
    del model.opset_import[:]
    model.opset_import.extend(keep)
    for d, v in twice.items():
        warnings.append(f"the model imports {d or 'ai.onnx'} {len(v)} times ({', '.join(map(str, v))}): read as "
                        f"onnxruntime runs it, with the last ({v[-1]})")


def single_initializers(model: onnx.ModelProto, warnings: list[str]) -> None:
    """Keep, of the main graph's initializers that share a name, the copy onnxruntime runs with, in place,
    with one warning: the last one listed, a sparse initializer over a dense one ("the model will use the
    latest encountered initializer"; measured: a MatMul weight listed twice, and dense then sparse). onnx's
    checker refuses such a model; onnxruntime loads it. Every pass then reads one copy: ``grad`` divided by
    the first copy's norm, ``extract`` wrote both. Two sparse ones of a name, and a body's (If / Loop /
    Scan) duplicates, are left as they are: onnxruntime refuses those ("Duplicate sparse_tensor_initializer",
    "initializer name is not unique"; ``graph.integrity`` says so). A main-graph Constant node is one more
    such copy (``_constants_over_weights``)."""
    _constants_over_weights(model, warnings)
    g = model.graph
    sparse = {t.values.name for t in g.sparse_initializer}
    dense = [t.name for t in g.initializer]
    seen = Counter(dense + list(sparse))
    names = [n for n, k in seen.items() if k > 1]
    if not names:
        return
    last = {n: i for i, n in enumerate(dense)}
    for i in reversed(range(len(dense))):
        if last[dense[i]] != i or dense[i] in sparse:
            del g.initializer[i]
    shown = some(names, 5)
    warnings.append(f"the model holds initializers of one name more than once ({shown}): read as onnxruntime runs "
                    "it, with the last of each (onnx's checker refuses such a model)")


def _constants_over_weights(model: onnx.ModelProto, warnings: list[str]) -> None:
    """onnxruntime makes each main-graph Constant node an initializer when it loads the model, after the
    model's own, so that of a name a Constant writes and an initializer (dense or sparse), a graph input or
    another Constant also gives, the last Constant's value runs and the name is no graph input ("Duplicate
    initializer (dense, sparse or ConstantNode)"; measured, onnxruntime 1.32). Keep that Constant alone, in
    place, with one warning: every pass then reads one source of the name (``inspect`` and ``extract`` refused
    the model as one written twice)."""
    g = model.graph
    consts = [i for i, n in enumerate(g.node) if n.op_type == "Constant" and n.domain in ("", "ai.onnx")
              and len(n.output) == 1 and n.output[0]]
    written = Counter(g.node[i].output[0] for i in consts)
    others = {i.name for i in g.input} | {t.name for t in g.initializer} | {t.values.name for t in g.sparse_initializer}
    last = {g.node[i].output[0]: i for i in consts}
    names = {n for n, k in written.items() if (k > 1 or n in others) and _fits(g, n, [g.node[i] for i in consts])}
    if not names:
        return
    for i in reversed(consts):
        if g.node[i].output[0] in names and last[g.node[i].output[0]] != i:
            del g.node[i]
    for field in (g.initializer, g.input):
        for i in reversed(range(len(field))):
            if field[i].name in names:
                del field[i]
    for i in reversed(range(len(g.sparse_initializer))):
        if g.sparse_initializer[i].values.name in names:
            del g.sparse_initializer[i]
    shown = some(sorted(names), 5)
    warnings.append(f"a Constant node writes a name also given otherwise ({shown}): read as onnxruntime runs it, "
                    "with the last Constant's value (onnx's checker refuses such a model)")


def _fits(g: onnx.GraphProto, name: str, consts: list[onnx.NodeProto]) -> bool:
    """Whether onnxruntime takes the Constants writing ``name`` over its other sources: each initializer of the
    name, and each other Constant, of the last Constant's element type and dims, and a graph input of it
    declared of that element type and of no shape or a shape that does not contradict them (measured: an
    initializer of shape 5 under a Constant of 2x3 it refuses, "Shape of initializer W does not match")."""
    types = [constant_signature(n) for n in consts if n.output[0] == name]
    if any(t is None or t != types[-1] for t in types):
        return False
    elem, dims = types[-1]
    inits = [(t.data_type, list(t.dims)) for t in g.initializer if t.name == name]
    inits += [(t.values.data_type, list(t.dims)) for t in g.sparse_initializer if t.values.name == name]
    if any(t != (elem, dims) for t in inits):
        return False
    for i in g.input:
        if i.name != name:
            continue
        tt = i.type.tensor_type
        if not i.type.HasField("tensor_type") or tt.elem_type != elem:
            return False
        if tt.HasField("shape") and (len(tt.shape.dim) != len(dims) or any(
                d.HasField("dim_value") and d.dim_value != k for d, k in zip(tt.shape.dim, dims))):
            return False
    return True


def default_opset(model: onnx.ModelProto) -> int:
    return opset_version(model, "", 1)


NO_IMPORT_OPSET = 17  # the ai.onnx opset statistics nodes take in a model that imports none (ai.onnx.ml alone)


def stats_opset(model: onnx.ModelProto) -> int:
    """The ai.onnx opset that nodes added to ``model`` are made for: its own, or NO_IMPORT_OPSET where it imports
    none (an skl2onnx model of ai.onnx.ml ops alone was 'opset 1', which predates the statistics' IsNaN, and no
    converter takes it anywhere); the caller then adds that import (``add_stats_import``)."""
    return opset_version(model, "", NO_IMPORT_OPSET)


def add_stats_import(original: onnx.ModelProto, out: onnx.ModelProto) -> None:
    """``out``, a copy of ``original`` with nodes added, imports the ai.onnx opset those nodes were made for where
    ``original`` imports none: no node of the model is of that domain, so none reads otherwise."""
    if opset_version(original, "") is None and opset_version(out, "") is None:
        out.opset_import.append(helper.make_opsetid("", NO_IMPORT_OPSET))


def np_dtype(elem: int) -> np.dtype:
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem))


def all_names(model: onnx.ModelProto) -> set[str]:
    """Every name used in the model (tensors, nodes, graph inputs and outputs), subgraphs included: a
    pass that adds names takes fresh ones from this set."""
    names: set[str] = Names()
    for g in all_graphs(model.graph):
        names.update(i.name for i in g.input)
        names.update(i.name for i in g.initializer)
        names.update(o.name for o in g.output)
        for n in g.node:
            names.update(n.input)
            names.update(n.output)
            names.add(n.name)
    return names


def rename_output(graph: onnx.GraphProto, old: str, new: str, window: int | None = None) -> bool:
    """Give the node that writes ``old`` (among the last ``window`` nodes, all when None) the output name
    ``new``, and the nodes after it that read ``old`` that input name (a pass naming what it just added:
    one Identity fewer per output). False when no such node writes ``old``."""
    nodes = graph.node
    stop = -1 if window is None else max(-1, len(nodes) - 1 - window)
    for k in range(len(nodes) - 1, stop, -1):
        outs = nodes[k].output
        if old in outs:
            outs[list(outs).index(old)] = new
            for later in nodes[k + 1:]:
                for i, x in enumerate(later.input):
                    if x == old:
                        later.input[i] = new
            return True
    return False


# onnxruntime's oldest kernels are opset 7's: an opset-6 Mul in the backward graph has none
RUNTIME_MIN_OPSET = 7


@functools.lru_cache(maxsize=None)
def opset_needed(op_type: str, opset: int, n_inputs: int | None = None) -> int | None:
    """The opset an ONNX-domain op needs when ``opset`` is too old for it (Expand: 8; anything: onnxruntime's
    7; an op whose first input takes floats only from a later version, as Equal from 11: what the backward
    graph feeds it; one whose version takes fewer or more inputs than the ``n_inputs`` given, as Gemm's C,
    required before 11), else None."""
    try:
        schema = onnx.defs.get_schema(op_type, opset, "")
        if opset < RUNTIME_MIN_OPSET:
            return RUNTIME_MIN_OPSET
        fits = lambda s: _takes_floats(s) and (n_inputs is None or s.min_input <= n_inputs <= s.max_input)  # noqa: E731
        if not fits(schema):
            later = sorted(s.since_version for s in onnx.defs.get_all_schemas_with_history()
                           if s.name == op_type and not s.domain and s.since_version > opset and fits(s))
            return later[0] if later else None
        return None
    except onnx.defs.SchemaError:
        since = [s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.name == op_type and not s.domain]
        # no such op at all: onnxruntime says so when it loads the graph
        return max(min(since), RUNTIME_MIN_OPSET) if since else None


def _takes_floats(schema) -> bool:
    """Whether the op's first input takes float32 (an op with no input: yes)."""
    if not schema.inputs:
        return True
    ts = schema.inputs[0].type_str
    allowed = next((c.allowed_type_strs for c in schema.type_constraints if c.type_param_str == ts), [ts])
    return "tensor(float)" in allowed


class GraphBuilder:
    def __init__(self, names: set[str], opset: int, *, nodes=None, scope: str = "onnxprobe", doc: str = "",
                 strict: bool = False):
        """``strict``: an op the model's opset does not have yet (the backward graph's Expand at opset 7)
        raises OpsetTooOld, so that grad_plan converts the model to a newer opset and builds again."""
        self.names = names
        self.strict = strict
        self.opset = opset
        self.nodes = nodes if nodes is not None else []
        self.scope = scope
        self.doc = doc
        self.consts: dict[tuple, str] = {}
        self.static: dict[str, tuple] = {}  # static shapes of emitted tensors, when a helper knows them

    # -- names -----------------------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        return fresh_name(self.names, base)

    # -- raw emission ----------------------------------------------------------------------------------
    def op(self, op_type: str, *inputs: str | None, n_out: int = 1, out: str | None = None, base: str | None = None,
           domain: str = "", **attrs):
        """Emit one node; returns its output name (or the list of names when ``n_out > 1``). ``out``: the
        exact output name (already fresh); ``base``: a readable stem for a fresh one."""
        ins = ["" if i is None else i for i in inputs]
        while ins and ins[-1] == "":
            ins.pop()
        if self.strict and domain in ("", "ai.onnx"):
            needed = opset_needed(op_type, self.opset, len(ins))
            if needed is not None and needed > self.opset:
                raise OpsetTooOld(f"{op_type} needs opset {needed} or later (model opset {self.opset})", needed)
        stem = base or f"{self.scope}/{op_type.lower()}"
        outs = [out or self.fresh(stem)] if n_out == 1 else [self.fresh(f"{stem}_{k}") for k in range(n_out)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        name = self.fresh(f"{self.scope}/{op_type}" + (f"/{base}" if base else ""))
        # built in place when the nodes are a graph's own list (appending a NodeProto copies it: ~10 us a
        # node, a tenth of a rewrite's time); the fields are helper.make_node's
        node = self.nodes.add() if hasattr(self.nodes, "add") else onnx.NodeProto()
        node.op_type, node.name = op_type, name
        node.input.extend(ins)
        node.output.extend(outs)
        if domain:
            node.domain = domain
        if attrs:
            node.attribute.extend(helper.make_attribute(k, v) for k, v in sorted(attrs.items()))
        if self.doc:
            node.doc_string = self.doc
        if not hasattr(self.nodes, "add"):
            self.nodes.append(node)
        return outs[0] if n_out == 1 else outs

    def node(self, op_type: str, inputs: list[str], base: str, **attrs) -> str:
        """``op`` with a list of inputs and a readable output stem: ``b.node("Cast", [x], "x.f64", to=11)``."""
        return self.op(op_type, *inputs, base=base, **attrs)

    def __getattr__(self, name: str):
        if name[:1].isupper():
            return lambda *inputs, **attrs: self.op(name, *inputs, **attrs)
        raise AttributeError(name)

    # -- constants -------------------------------------------------------------------------------------
    def const(self, value, dtype=None) -> str:
        a = np.asarray(value, dtype=dtype)
        key = (a.dtype.str, a.shape, a.tobytes())
        if key not in self.consts:
            out = self.fresh(f"{self.scope}/const")
            node = helper.make_node("Constant", [], [out], name=self.fresh(f"{self.scope}/Constant"),
                                    value=numpy_helper.from_array(a, out))
            if self.doc:
                node.doc_string = self.doc
            self.nodes.append(node)
            self.consts[key] = out
            self.static[out] = a.shape
        return self.consts[key]

    def ints(self, values: Sequence[int]) -> str:
        return self.const(np.array(list(values), np.int64))

    # -- opset-dependent helpers -----------------------------------------------------------------------
    def _axes_input(self, axes) -> str:
        return axes if isinstance(axes, str) else self.ints(axes)

    def reduce(self, op: str, x: str, axes: Axes = None, keepdims: int = 1, base: str | None = None) -> str:
        """Reduce* over ``axes`` (None: all axes; a tensor name: runtime axes, opset >= 13/18 only)."""
        if axes is None:
            return self.op(op, x, keepdims=keepdims, base=base)
        as_input = self.opset >= (13 if op == "ReduceSum" else 18)
        if as_input:
            return self.op(op, x, self._axes_input(axes), keepdims=keepdims, base=base)
        if isinstance(axes, str):
            need = 13 if op == "ReduceSum" else 18
            raise OpsetTooOld(f"{op} with runtime axes needs opset {need} (model opset {self.opset})", need)
        return self.op(op, x, axes=list(axes), keepdims=keepdims, base=base)

    def reduce_sum(self, x: str, axes: Axes = None, keepdims: int = 1) -> str:
        if axes is not None and not isinstance(axes, str) and len(axes) == 0:
            return x
        return self.reduce("ReduceSum", x, axes, keepdims)

    def reduce_sum_runtime(self, x: str, axes: str, noop: int = 1) -> str:
        """ReduceSum(keepdims=1) over a runtime (possibly empty) list of axes: opset >= 13. ``noop``: what
        empty axes mean (1: no axis; 0: every axis), as the forward reduction's noop_with_empty_axes."""
        return self.op("ReduceSum", x, axes, keepdims=1, noop_with_empty_axes=noop)

    def unsqueeze(self, x: str, axes) -> str:
        if self.opset >= 13:
            return self.op("Unsqueeze", x, self._axes_input(axes))
        if isinstance(axes, str):
            raise OpsetTooOld(f"Unsqueeze with runtime axes needs opset 13 (model opset {self.opset})", 13)
        return self.op("Unsqueeze", x, axes=list(axes))

    def squeeze(self, x: str, axes) -> str:
        if self.opset >= 13:
            return self.op("Squeeze", x, self._axes_input(axes))
        return self.op("Squeeze", x, axes=list(axes))

    def split(self, x: str, axis: int, sizes, n: int) -> list[str]:
        if n == 1:
            return [self.op("Identity", x)]
        if self.opset >= 13:
            return self.op("Split", x, self._axes_input(sizes), n_out=n, axis=axis)
        if isinstance(sizes, str):
            raise OpsetTooOld(f"Split with runtime sizes needs opset 13 (model opset {self.opset})", 13)
        return self.op("Split", x, n_out=n, axis=axis, split=list(sizes))

    def slice(self, x: str, starts, ends, axes, steps=None) -> str:
        if self.opset >= 10:
            ins = [x, self._axes_input(starts), self._axes_input(ends), self._axes_input(axes)]
            if steps is not None:
                ins.append(self._axes_input(steps))
            return self.op("Slice", *ins)
        if any(isinstance(v, str) for v in (starts, ends, axes)) or steps is not None:
            raise OpsetTooOld(f"Slice with runtime arguments needs opset 10 (model opset {self.opset})", 10)
        return self.op("Slice", x, starts=list(starts), ends=list(ends), axes=list(axes))

    def pad(self, x: str, pads, value: str | None = None, mode: str = "constant") -> str:
        if self.opset >= 11:
            return self.op("Pad", x, self._axes_input(pads), value, mode=mode)
        if isinstance(pads, str):
            raise OpsetTooOld(f"Pad with runtime pads needs opset 11 (model opset {self.opset})", 11)
        return self.op("Pad", x, pads=list(pads), mode=mode)

    def shape(self, x: str, start: int | None = None, end: int | None = None) -> str:
        if start is None and end is None:
            return self.op("Shape", x)
        if self.opset >= 15:
            return self.op("Shape", x, start=start, end=end)
        s = self.op("Shape", x)
        return self.slice(s, [start or 0], [end if end is not None else 2**62], [0])

    def flat(self, x: str) -> str:
        return self.op("Reshape", x, self.ints([-1]))


def interleave(graph: onnx.GraphProto, original: int) -> None:
    """Move each node appended after the first ``original`` nodes right behind the last node it depends
    on, so that a probed tensor's statistics run as soon as it exists and the tensor can be freed, as in
    the unprobed model."""
    nodes = list(graph.node)
    if len(nodes) == original:
        return
    anchor_of: dict[str, int] = {}
    for i, n in enumerate(nodes[:original]):
        for o in n.output:
            anchor_of[o] = i
    buckets: dict[int, list[onnx.NodeProto]] = {}
    for n in nodes[original:]:
        a = max((anchor_of.get(i, -1) for i in n.input if i), default=-1)
        for o in n.output:
            anchor_of[o] = a
        buckets.setdefault(a, []).append(n)
    order = list(buckets.get(-1, []))
    for i, n in enumerate(nodes[:original]):
        order.append(n)
        order.extend(buckets.get(i, []))
    # sorted in place (4-10x faster than clearing the list and copying every node back in); ``nodes``
    # holds the wrappers, so their ids stay those the sort sees
    rank = {id(n): k for k, n in enumerate(order)}
    try:
        graph.node.sort(key=lambda n: rank[id(n)])
    except KeyError:  # a protobuf that hands out new wrappers: copy them back in order
        del graph.node[:]
        graph.node.extend(order)
