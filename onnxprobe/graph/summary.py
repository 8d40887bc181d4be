"""What ``onnxprobe inspect`` shows, as plain data: ``summarize(model, inferred)``.

Contract: reads ``model`` (as loaded, external tensors may still be on disk) and ``inferred`` (the same
model after ``graph.shapes.infer_shapes``); modifies neither and executes nothing.

- versions: IR, opset per domain, producer; model metadata;
- graph inputs (initializers listed as inputs by IR < 4 models are weights, not inputs) and outputs, with
  dtypes and shapes (``'batch'`` for a symbolic dimension, ``None`` for an unknown one);
- weights: initializers (count, bytes, elements) and the tensors held by Constant nodes, separately;
  ``parameters`` is the element count of both;
- ``computed``: the weights the runtime computes from constants alone at load (``walk.constant_tensors``:
  a ConstantOfShape of a constant shape, a Cast or Reshape of a Constant...) that the rest of the graph
  reads, sized by shape inference (never computed; ``unsized`` counts those of unknown shape);
  ``parameters_at_load`` the elements the graph computes with: those, and the stored weights other than
  the ones only read to compute them (a shape vector, the float16 source of a Cast), a stored weight and
  what is computed from it that the graph reads too (a tied embedding and its transpose) counted once;
- ``used_domains``: the opset domains that nodes use (``opsets`` lists every import);
- the op-type histogram over every node, subgraphs included (ops of other domains as ``domain.Op``);
- nodes with an output whose type or rank shape inference could not find;
- subgraphs (If / Loop / Scan bodies...) with their direct and total node counts;
- external data files, custom (non-ONNX) domains and model-local functions;
- ``node_rows``: one row per node, numbered as ``walk`` (and so ``layers --range``) numbers them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from onnxprobe.graph.constants import constants
from onnxprobe.graph.external import ExternalFile, external_files
from onnxprobe.graph.extents import dims_nbytes, tensor_nbytes
from onnxprobe.graph.shapes import dtype_name, static_shape
from onnxprobe.graph.walk import NodeSite, all_graphs, constant_tensors, subgraphs, walk
from onnxprobe.types import element_count

STANDARD_DOMAINS = {"", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training", "ai.onnx.training", "ai.onnx.preview"}


@dataclass(frozen=True)
class TypeInfo:
    name: str
    dtype: str | None  # numpy-style name, None when unknown
    shape: tuple | None  # ints, symbolic names or None; None when the rank is unknown
    kind: str = "tensor"  # tensor | sparse | sequence | map | optional | unknown
    type: str | None = None  # the whole type: dtype for a tensor, sequence<map<int64, float32>>...; None: unknown


@dataclass(frozen=True)
class WeightInfo:
    count: int = 0
    bytes: int = 0
    elements: int = 0
    unsized: int = 0  # tensors of unknown shape (computed ones), in count, not in bytes or elements


@dataclass(frozen=True)
class SubgraphInfo:
    index: int  # index of the node that owns the body
    node: str
    op_type: str
    attribute: str  # then_branch, else_branch, body...
    scope: tuple[str, ...]  # enclosing bodies, outermost first
    nodes: int  # nodes directly in the body
    total_nodes: int  # nested bodies included


@dataclass(frozen=True)
class NodeRow:
    index: int
    name: str  # display name (OpType_index when the node has none)
    op_type: str  # ``domain.Op`` outside the ONNX domains
    scope: tuple[str, ...]
    inputs: tuple[TypeInfo, ...]  # "" for an omitted optional input
    outputs: tuple[TypeInfo, ...]
    weights: frozenset[str] = frozenset()  # which inputs are initializers or constants


@dataclass
class ModelSummary:
    ir_version: int
    opsets: dict[str, int]
    producer: str
    producer_version: str
    metadata: dict[str, str]
    inputs: list[TypeInfo]
    outputs: list[TypeInfo]
    initializers: WeightInfo
    constants: WeightInfo
    nodes: int  # every node, subgraphs included
    main_nodes: int  # nodes of the main graph
    op_histogram: dict[str, int]  # most frequent first
    uninferred: list[NodeRow]  # nodes with an output of unknown type or rank
    subgraphs: list[SubgraphInfo]
    external: list[ExternalFile]
    custom_domains: dict[str, dict[str, int]]  # domain -> {op type: count}, nodes of non-ONNX domains (not model-local functions)
    functions: list[str]  # model-local functions, as domain.name
    used_domains: list[str] = field(default_factory=list)  # opset domains the nodes use ("ai.onnx" for "")
    graph_name: str = ""
    doc: str = ""
    warnings: list[str] = field(default_factory=list)
    computed: WeightInfo = field(default_factory=WeightInfo)  # weights computed from constants at load
    feeding: int = 0  # elements of stored weights read only to compute those, and of computed copies of read ones

    @property
    def parameters(self) -> int:
        """Elements of the stored weights (initializers and Constant nodes)."""
        return self.initializers.elements + self.constants.elements

    @property
    def parameters_at_load(self) -> int:
        """Elements of the weights the graph computes with, those computed at load included (a lower
        bound where ``computed.unsized``)."""
        return self.parameters - self.feeding + self.computed.elements


def op_label(node: onnx.NodeProto) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def type_info(name: str, t: onnx.TypeProto | None) -> TypeInfo:
    """``dtype`` and ``shape``: those of the tensors the value holds, however nested (a map's: its values');
    ``type``: the whole type, nesting kept (``sequence<map<int64, float32>>``, ``optional<sequence<float32>>``)."""
    if t is None:
        return TypeInfo(name, None, None, "unknown")
    which = t.WhichOneof("value")
    if which == "tensor_type" or which == "sparse_tensor_type":
        tt = getattr(t, which)
        dtype = dtype_name(tt.elem_type)
        if which == "tensor_type":
            return TypeInfo(name, dtype, static_shape(t), "tensor", dtype)
        return TypeInfo(name, dtype, None, "sparse", f"sparse_tensor<{dtype or '?'}>")
    if which in ("sequence_type", "optional_type"):
        kind = which.split("_")[0]
        inner = type_info(name, getattr(t, which).elem_type)
        return TypeInfo(name, inner.dtype, inner.shape, kind, f"{kind}<{inner.type or '?'}>")
    if which == "map_type":
        value = type_info(name, t.map_type.value_type)
        key = dtype_name(t.map_type.key_type) or "?"
        return TypeInfo(name, value.dtype, value.shape, "map", f"map<{key}, {value.type or '?'}>")
    return TypeInfo(name, None, None, "unknown")


def all_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """Every known type (tensor, sequence, optional, map) keyed by value name, subgraphs included."""
    types: dict[str, onnx.TypeProto] = {}
    for g in all_graphs(model.graph):
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            if vi.type.WhichOneof("value") is not None and not _empty_tensor_type(vi.type):
                types.setdefault(vi.name, vi.type)
        # initializers and Constant nodes, a Constant's value in any form (value, value_float(s), value_int(s))
        for name, t in constants(g).items():
            types.setdefault(name, onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)))
    return types


# ops whose outputs are sequences or optionals, for a model whose types inference could not tell
_NON_TENSOR_OPS = {"SequenceConstruct": "a sequence", "SequenceEmpty": "a sequence", "SequenceInsert": "a sequence",
                   "SequenceErase": "a sequence", "SplitToSequence": "a sequence", "SequenceMap": "a sequence",
                   "Optional": "an optional"}


def not_a_tensor(t: onnx.TypeProto | None, op_type: str) -> str | None:
    """'a sequence', 'an optional', 'a map' or 'a sparse tensor' for a value of that type (by its producer's
    op where its type is unknown), None for a tensor."""
    which = t.WhichOneof("value") if t is not None else None
    if which is None or which == "tensor_type":
        return None if which else _NON_TENSOR_OPS.get(op_type)
    return {"sequence_type": "a sequence", "optional_type": "an optional", "map_type": "a map"}.get(which, "a sparse tensor")


def sparse_values(g: onnx.GraphProto) -> set[str]:
    """``g``'s values that are sparse tensors whatever their declared type: its sparse initializers and the
    outputs of its Constant nodes holding a ``sparse_value``. Nodes reading one read it dense, but as a graph
    output onnxruntime returns a SparseTensor (measured, onnxruntime 1.32: declared a tensor too), which no
    numpy array is made of ("Only OrtValues that are Tensors are convertible")."""
    out = {t.values.name for t in g.sparse_initializer}
    out.update(n.output[0] for n in g.node if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and n.output
               and any(a.name == "sparse_value" for a in n.attribute))
    return out


def sparse_declared_dense(model: onnx.ModelProto) -> list[str]:
    """One line per main-graph output that is a sparse value (``sparse_values``) declared a tensor (onnx's
    checker refuses it, "type case mismatch"): what onnxruntime returns for it, which ``inspect`` says."""
    sparse = sparse_values(model.graph)
    return [f"output {o.name!r} is declared a tensor but holds a sparse tensor (a sparse initializer or a Constant's "
            "sparse_value): onnxruntime returns it as one, which no command reads back, compares or takes a loss of"
            for o in model.graph.output if o.name in sparse and o.type.WhichOneof("value") != "sparse_tensor_type"]


def non_tensor_outputs(model: onnx.ModelProto) -> dict[str, str]:
    """The main graph's outputs that are no tensors, and what each is ('a sequence', 'a sparse tensor'...):
    sequences, optionals, maps and sparse tensors by their declared type, or by their producer's op where no
    type is declared, and the sparse values (``sparse_values``) whatever their declared type. onnxruntime
    returns them, but as no tensors: nothing reads them back, compares them or takes a loss of them."""
    ops = {o: n.op_type for n in model.graph.node for o in n.output if o}
    sparse = sparse_values(model.graph)
    out = {}
    for o in model.graph.output:
        what = "a sparse tensor" if o.name in sparse else not_a_tensor(o.type if o.HasField("type") else None, ops.get(o.name, ""))
        if what:
            out[o.name] = what
    return out


def _empty_tensor_type(t: onnx.TypeProto) -> bool:
    return t.WhichOneof("value") == "tensor_type" and not t.tensor_type.elem_type


def known(t: onnx.TypeProto | None) -> bool:
    """A type that a main-graph input or output may carry: an element type and a rank."""
    if t is None or t.WhichOneof("value") is None or _empty_tensor_type(t):
        return False
    if t.WhichOneof("value") == "tensor_type":
        return t.tensor_type.HasField("shape")
    return True


def _weights(model: onnx.ModelProto) -> tuple[WeightInfo, WeightInfo]:
    graphs = list(all_graphs(model.graph))
    init_list = [t for g in graphs for t in g.initializer]
    sparse_list = [t for g in graphs for t in g.sparse_initializer]
    init = WeightInfo(len(init_list) + len(sparse_list),
                      sum(tensor_nbytes(t) for t in init_list) + sum(_sparse_nbytes(t) for t in sparse_list),
                      sum(element_count(t.dims) for t in init_list) + sum(element_count(t.dims) for t in sparse_list))
    # a Constant holds its value in one attribute of several kinds, not only `value` (a tensor)
    sizes = [_constant_size(a) for s in walk(model) if s.node.op_type == "Constant" and s.node.domain in ("", "ai.onnx")
             for a in s.node.attribute[:1]]
    const = WeightInfo(len(sizes), sum(b for b, _ in sizes), sum(e for _, e in sizes))
    return init, const


# a quantized weight's float copy is not computed at load: runtimes fuse DequantizeLinear into the quantized op
# (QDQ's Conv, MatMul) and keep the stored integer tensor, which stays the parameter (its scale and zero point too)
KEPT_QUANTIZED = frozenset({"DequantizeLinear"})


def _computed(model: onnx.ModelProto, sites: list[NodeSite], types: dict[str, onnx.TypeProto],
              const: set[str]) -> tuple[WeightInfo, int]:
    """(the weights computed from constants at load that the rest of the graph reads, the elements to leave
    out of ``parameters_at_load``: stored weights read only to compute them, and computed copies of a stored
    weight the graph reads itself, counted once). Sizes from the inferred types: nothing is computed."""
    stored: dict[str, int] = {}
    for g in all_graphs(model.graph):
        stored.update((t.name, element_count(t.dims) or 0) for t in g.initializer)
        stored.update((t.values.name, element_count(t.dims) or 0) for t in g.sparse_initializer)
    for s in sites:
        if s.node.op_type == "Constant" and s.node.domain in ("", "ai.onnx") and s.node.output and s.node.attribute:
            stored[s.node.output[0]] = _constant_size(s.node.attribute[0])[1]
    live: set[str] = {o.name for g in all_graphs(model.graph) for o in g.output}  # read past the load-time part
    folded: set[str] = set()  # read by a node computed at load
    at_load = []
    dequantized: set[str] = set()
    for s in sites:
        outs = [o for o in s.node.output if o]
        if s.node.op_type in KEPT_QUANTIZED:
            dequantized.update(outs)  # the stored integer weight is the parameter, read by the graph
        elif bool(outs) and all(o in const for o in outs):
            at_load.append(s.node)
            folded.update(i for i in s.node.input if i)
        else:
            live.update(i for i in s.node.input if i)
    copied: set[str] = set()  # computed from a stored weight the graph reads too (a tied embedding's transpose)
    for node in at_load:
        if any(i in copied or (i in stored and i in live) for i in node.input if i):
            copied.update(o for o in node.output if o)
    computed = [n for n in dict.fromkeys(o for s in sites for o in s.node.output if o)
                if n in const and n not in stored and n in live and n not in dequantized]
    count = elements = nbytes = unsized = copies = 0
    for n in computed:
        t = types.get(n)
        shape = static_shape(t)
        n_el = None if shape is None else element_count(shape)
        count += 1
        # a string tensor's bytes are its strings', which nothing computed at load tells (dims_nbytes gave 8 a string)
        if n_el is None or t.tensor_type.elem_type in (0, onnx.TensorProto.STRING):
            unsized += 1
            continue
        elements += n_el
        copies += n_el if n in copied else 0
        nbytes += dims_nbytes(onnx.TensorProto(data_type=t.tensor_type.elem_type, dims=shape))
    feeding = sum(e for n, e in stored.items() if n in folded and n not in live)
    return WeightInfo(count, nbytes, elements, unsized), feeding + copies


def _sparse_nbytes(t: onnx.SparseTensorProto) -> int:
    """Bytes a sparse tensor stores: its values and their indices."""
    return tensor_nbytes(t.values) + tensor_nbytes(t.indices)


def _constant_size(a: onnx.AttributeProto) -> tuple[int, int]:
    """(bytes, elements) of a Constant's value attribute, of whichever kind (value, sparse_value,
    value_float(s), value_int(s), value_string(s))."""
    if a.type == onnx.AttributeProto.TENSOR:
        return tensor_nbytes(a.t), element_count(a.t.dims)
    if a.type == onnx.AttributeProto.SPARSE_TENSOR:
        return _sparse_nbytes(a.sparse_tensor), element_count(a.sparse_tensor.dims)
    if a.type == onnx.AttributeProto.FLOATS:
        return 4 * len(a.floats), len(a.floats)
    if a.type == onnx.AttributeProto.INTS:
        return 8 * len(a.ints), len(a.ints)
    if a.type == onnx.AttributeProto.STRINGS:
        return sum(len(s) for s in a.strings), len(a.strings)
    if a.type == onnx.AttributeProto.STRING:
        return len(a.s), 1
    return (4 if a.type == onnx.AttributeProto.FLOAT else 8), 1  # value_float, value_int


def _subtree_nodes(g: onnx.GraphProto) -> int:
    return sum(1 + sum(_subtree_nodes(sg) for _, sg in subgraphs(n)) for n in g.node)


def node_rows(model: onnx.ModelProto, inferred: onnx.ModelProto, sites: list[NodeSite] | None = None) -> list[NodeRow]:
    """One row per node of ``model``, subgraphs included, in ``walk`` order."""
    sites = sites if sites is not None else walk(model)
    types = all_types(inferred)
    weights = _weight_names(model, sites)
    rows = []
    for s in sites:
        n = s.node
        rows.append(NodeRow(
            index=s.index, name=s.name, op_type=op_label(n), scope=s.scope,
            inputs=tuple(type_info(i, types.get(i)) if i else TypeInfo("", None, None, "omitted") for i in n.input),
            outputs=tuple(type_info(o, types.get(o)) if o else TypeInfo("", None, None, "omitted") for o in n.output),
            weights=frozenset(i for i in n.input if i in weights),
        ))
    return rows


def _weight_names(model: onnx.ModelProto, sites: list[NodeSite]) -> set[str]:
    """Initializers, Constant outputs and what is computed from them alone at load (``constant_tensors``)."""
    return constant_tensors(model, sites)


def summarize(
    model: onnx.ModelProto, inferred: onnx.ModelProto, *, base_dir: str | Path = ".",
    external: list[ExternalFile] | None = None, rows: list[NodeRow] | None = None,
) -> ModelSummary:
    """``external``: the data files as the file on disk names them (``LazyModel.external``), when some
    of its tensors were loaded since; by default they are read from ``model``."""
    g = model.graph
    sites = walk(model)
    rows = rows if rows is not None else node_rows(model, inferred, sites)
    types = all_types(inferred)
    init_names = {t.name for t in g.initializer}
    inputs = [type_info(vi.name, vi.type if known(vi.type) else types.get(vi.name)) for vi in g.input if vi.name not in init_names]
    outputs = [type_info(vi.name, vi.type if known(vi.type) else types.get(vi.name)) for vi in g.output]
    init, const = _weights(model)
    computed, feeding = _computed(model, sites, types, constant_tensors(model, sites))
    hist = Counter(op_label(s.node) for s in sites)
    uninferred = [r for r in rows if any(o.kind == "unknown" or (o.kind == "tensor" and o.shape is None) for o in r.outputs)]
    site_of = {id(s.node): s for s in sites}
    subs: list[SubgraphInfo] = []

    def bodies(graph: onnx.GraphProto) -> None:  # owners before their nested bodies
        for n in graph.node:
            s = site_of[id(n)]
            for attr, sg in subgraphs(n):
                subs.append(SubgraphInfo(s.index, s.name, n.op_type, attr, s.scope, len(sg.node), _subtree_nodes(sg)))
                bodies(sg)

    bodies(g)
    custom: dict[str, Counter] = {}
    local = {(f.domain, f.name) for f in model.functions}  # defined in the model: no runtime must provide them
    for s in sites:
        if s.node.domain not in STANDARD_DOMAINS and (s.node.domain, s.node.op_type) not in local:
            custom.setdefault(s.node.domain, Counter())[s.node.op_type] += 1
    return ModelSummary(
        ir_version=model.ir_version,
        opsets={(o.domain or "ai.onnx"): o.version for o in model.opset_import},
        producer=model.producer_name, producer_version=model.producer_version,
        metadata={p.key: p.value for p in model.metadata_props},
        inputs=inputs, outputs=outputs, initializers=init, constants=const, computed=computed, feeding=feeding,
        nodes=len(sites), main_nodes=len(g.node),
        op_histogram=dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))),
        uninferred=uninferred, subgraphs=subs,
        external=external if external is not None else external_files(model, base_dir),
        custom_domains={d: dict(c.most_common()) for d, c in sorted(custom.items())},
        functions=[f"{f.domain}.{f.name}" if f.domain else f.name for f in model.functions],
        graph_name=g.name, doc=(model.doc_string or g.doc_string).strip(),
        used_domains=sorted({s.node.domain or "ai.onnx" for s in sites}, key=lambda d: (d != "ai.onnx", d)),
    )
