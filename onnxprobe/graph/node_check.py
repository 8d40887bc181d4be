"""What onnxruntime refuses in a node's attributes or a value's declared type, found when a model is read
(``graph.io.check_graph``), so that every command refuses it alike with one line: an attribute given
twice, one of a type its op's schema does not take (or of no type), a required one missing, one its op
does not have, an element type ONNX does not define on a graph input, output or value_info entry or
in a Cast's ``to``, a value declared a kind (a sequence) its node never writes (a tensor), and, in the
main graph, a value declared a tensor of element type UNDEFINED or of another element type than its
node computes (``declared_type_problem``). Without this, what only reads the attributes (grad's rules, a conversion to another
opset that keeps one of two duplicates) judged a model onnxruntime does not load, or failed on it with an
internal error (a Scan's ``num_scan_inputs`` given as a list of floats, a value typed as element type 40:
QA fuzzing). The schema is the op's at the model's ai.onnx opset (the one onnxruntime reads); an op
unknown there, or of another domain, is left to onnxruntime (its attributes are checked for duplicates
only)."""

from __future__ import annotations

import functools
from typing import Iterator, NamedTuple

import onnx
from onnx import AttributeProto, TensorProto

from onnxprobe.graph.walk import node_label
from onnxprobe.text import quote

_ELEM_TYPES = set(TensorProto.DataType.values())
# attributes that hold an element type (ai.onnx): Cast's to, RandomNormal's dtype...
_TYPE_ATTRS = ("to", "dtype", "output_dtype")


def _graphs(g: onnx.GraphProto, where: str) -> Iterator[tuple[onnx.GraphProto, str]]:
    yield g, where
    for i, n in enumerate(g.node):
        for a in n.attribute:
            subs = [a.g] if a.type == AttributeProto.GRAPH else list(a.graphs) if a.type == AttributeProto.GRAPHS else []
            for sub in subs:
                yield from _graphs(sub, f"the {a.name} of {node_label(n, i)}")


def _elem_types(t: onnx.TypeProto) -> Iterator[int]:
    kind = t.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        yield getattr(t, kind).elem_type
    elif kind == "sequence_type":
        yield from _elem_types(t.sequence_type.elem_type)
    elif kind == "optional_type":
        yield from _elem_types(t.optional_type.elem_type)
    elif kind == "map_type":
        yield t.map_type.key_type
        yield from _elem_types(t.map_type.value_type)


class _Formal(NamedTuple):
    type_str: str
    variadic: bool
    homogeneous: bool


class _Spec:
    """What these checks read of an op's schema, read once per (op, opset): each read of an OpSchema's
    attributes, inputs or type constraints builds Python copies of them (PP-OCRv4 det, 672 nodes: the
    checks took 23 ms reading them per node)."""

    def __init__(self, schema):
        self.attributes = dict(schema.attributes)
        self.min_input, self.max_input, self.max_output = schema.min_input, schema.max_input, schema.max_output
        variadic = onnx.defs.OpSchema.FormalParameterOption.Variadic
        self.inputs, self.outputs = ([_Formal(f.type_str, f.option == variadic, f.is_homogeneous) for f in fs]
                                     for fs in (schema.inputs, schema.outputs))
        self.allowed = {c.type_param_str: list(c.allowed_type_strs) for c in schema.type_constraints}
        # type parameters whose every allowed type is a tensor's (no sequence or map): what binds an element type
        self.tensor_only = {k: all(t.startswith("tensor(") for t in v) for k, v in self.allowed.items()}

    def tensors(self, type_str: str) -> bool:
        return self.tensor_only.get(type_str, type_str.startswith("tensor("))


@functools.lru_cache(maxsize=None)
def _spec(op_type: str, version: int) -> _Spec | None:
    try:
        return _Spec(onnx.defs.get_schema(op_type, version, ""))
    except Exception:  # noqa: BLE001 - an op unknown at that opset: onnxruntime's own error says so
        return None


def _schema(n: onnx.NodeProto, version: int | None) -> _Spec | None:
    if version is None or n.domain not in ("", "ai.onnx"):
        return None
    return _spec(n.op_type, version)


def node_problem(n: onnx.NodeProto, version: int | None, index: int) -> str | None:
    """Why onnxruntime refuses ``n``'s attributes (None: it does not, as far as its schema tells); ``index``:
    its number in its graph, which the message says it by."""
    label = node_label(n, index)
    seen: set[str] = set()
    for a in n.attribute:
        if a.name in seen:
            return f"{label} gives its attribute {quote(a.name)} twice"
        seen.add(a.name)
    schema = _schema(n, version)
    if schema is None:
        return None
    # onnxruntime: "has input size 3 not in range [min=2, max=2]"; too few failed what reads a node's inputs by
    # position (diff's matching of a DequantizeLinear: an IndexError), too many a rule (a MatMul of three
    # inputs in an If branch: grad's internal ValueError; QA fuzzing)
    if not schema.min_input <= len(n.input) <= schema.max_input:
        at = f"at least {schema.min_input}" if len(n.input) < schema.min_input else f"at most {schema.max_input}"
        return f"{label} has {len(n.input)} input(s), and {n.op_type} takes {at}"
    if len(n.output) > schema.max_output:
        return f"{label} has {len(n.output)} output(s), and {n.op_type} gives at most {schema.max_output}"
    for a in n.attribute:
        if a.ref_attr_name:  # a function body's reference to its caller's attribute
            continue
        spec = schema.attributes.get(a.name)
        if spec is None:
            return f"{label} has an attribute {quote(a.name)}, which {n.op_type} does not take"
        want = int(spec.type.value)
        if a.type != want:
            got = AttributeProto.AttributeType.Name(a.type) if a.type in AttributeProto.AttributeType.values() else str(a.type)
            return (f"{label} gives its attribute {quote(a.name)} as {got}, and {n.op_type} takes "
                    f"{AttributeProto.AttributeType.Name(want)}")
        if a.name in _TYPE_ATTRS and a.type == AttributeProto.INT and a.i not in _ELEM_TYPES:
            return f"{label} gives {a.name}={a.i}, an element type ONNX does not define"
    for name, spec in schema.attributes.items():
        if spec.required and name not in seen:
            return f"{label} lacks its required attribute {quote(name)}"
    return None


_KINDS = {"tensor_type": "tensor", "sequence_type": "seq", "map_type": "map", "optional_type": "optional",
          "sparse_tensor_type": "sparse_tensor"}


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _elem_name(e: int) -> str:
    return TensorProto.DataType.Name(e) if e in _ELEM_TYPES else str(e)


def _output_kinds(schema: _Spec, k: int) -> set[str] | None:
    """The kinds of value (tensor, seq, map, optional...) output ``k`` of an op may be, by its schema."""
    outs = schema.outputs
    if not outs:
        return None
    o = outs[k] if k < len(outs) else outs[-1] if outs[-1].variadic else None
    if o is None:
        return None
    allowed = schema.allowed.get(o.type_str, [o.type_str])
    return {t.split("(", 1)[0] for t in allowed}


def _declarations(g: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """``g``'s value_info entries and outputs less those naming a weight (an initializer) or a Constant's
    output, whose declared type onnxruntime does not read (measured: a weight or a Constant's output
    declared INT64, UNDEFINED or a sequence in the value_info or the outputs loads and runs; declared so
    among the graph inputs, it is refused)."""
    fixed = {t.name for t in g.initializer} | {t.values.name for t in g.sparse_initializer}
    fixed |= {o for n in g.node if n.op_type == "Constant" and n.domain in ("", "ai.onnx") for o in n.output}
    return [v for v in list(g.value_info) + list(g.output) if v.name not in fixed]


def declared_kind_problem(g: onnx.GraphProto, version: int | None) -> str | None:
    """A graph input, value_info entry or graph output declared a kind of value (a sequence, say) that the
    ai.onnx node writing it never gives (a tensor), or that its initializer is not: onnxruntime refuses the model ("Type mismatch"), and diff, which runs
    a graph of its own without the model's value_info, passed one (QA fuzzing)."""
    made = {o: (i, k) for i, n in enumerate(g.node) for k, o in enumerate(n.output) if o}
    elem_of = {t.name: t.data_type for t in g.initializer}
    weights = {t.name: "tensor" for t in g.initializer} | {t.values.name: "sparse_tensor" for t in g.sparse_initializer}
    for v in list(g.input) + _declarations(g):
        kind = _KINDS.get(v.type.WhichOneof("value"))
        if kind is not None and v.name in weights and kind != weights[v.name]:
            return f"{quote(v.name)} is declared {_a(kind)} value, and it is an initializer: a {weights[v.name]}"
        elem = v.type.tensor_type.elem_type if kind == "tensor" else 0
        if elem and v.name in elem_of and elem != elem_of[v.name]:
            return (f"{quote(v.name)} is declared of element type {_elem_name(elem)}, and its initializer is of "
                    f"{_elem_name(elem_of[v.name])}")
        if kind is None or v.name not in made:
            continue
        i, k = made[v.name]
        n = g.node[i]
        schema = _schema(n, version)
        kinds = _output_kinds(schema, k) if schema is not None else None
        if kinds and kind not in kinds:
            return (f"{quote(v.name)} is declared {_a(kind)} value, and {node_label(n, i)} writes it as "
                    f"{' or '.join(sorted(kinds))}")
    return None


_TYPE_STRS = {f"tensor({k.lower()})": v for k, v in TensorProto.DataType.items() if v}


def _computed_types(n: onnx.NodeProto, schema: _Spec, elem: dict[str, int]) -> dict[str, int]:
    """The element type of each output of ``n`` its schema fixes from the element types of its inputs
    (``elem``): an output of type parameter T has the type of the inputs T binds, or T's one allowed type.
    Outputs typed otherwise (Cast's ``to``, If's and Loop's heterogeneous values) are left out."""
    def formal(params, i):
        if i < len(params):
            return params[i]
        return params[-1] if params and params[-1].variadic else None

    bound: dict[str, int] = {}
    for i, x in enumerate(n.input):
        f = formal(schema.inputs, i)
        if f is None or not x or x not in elem or (f.variadic and not f.homogeneous):
            continue
        if schema.tensors(f.type_str):
            bound.setdefault(f.type_str, elem[x])
    out = {}
    for i, o in enumerate(n.output):
        f = formal(schema.outputs, i)
        if f is None or not o or (f.variadic and not f.homogeneous):
            continue
        one = schema.allowed.get(f.type_str, [f.type_str])
        t = bound.get(f.type_str) if schema.tensors(f.type_str) else None
        t = t or (_TYPE_STRS.get(one[0]) if len(one) == 1 else None)
        if t:
            out[o] = t
    return out


def declared_type_problem(g: onnx.GraphProto, version: int | None) -> str | None:
    """A main-graph input, output or value_info entry declared a tensor of element type UNDEFINED (0)
    ("Invalid tensor data type 0"), or a node's output declared of an element type other than the one its
    op's schema gives it from its inputs' ("Type (tensor(int64)) of output arg ... does not match expected
    type (tensor(float))"): onnxruntime refuses both, and what runs a graph of its own built from the
    model (layers' outputs added, grad's forward graph) dropped the declaration and ran it (QA fuzzing).
    Only the main graph: onnxruntime takes both in an If's or a Loop's body (measured)."""
    declared: dict[str, int] = {}
    for v in list(g.input) + _declarations(g):
        if v.type.WhichOneof("value") != "tensor_type":
            continue
        if not v.type.tensor_type.elem_type:
            what = f"input {quote(v.name)}:" if any(i.name == v.name for i in g.input) else f"{quote(v.name)} is declared"
            return f"{what} a tensor of element type UNDEFINED (0)"  # an input said as runtime.feeds says it
        declared.setdefault(v.name, v.type.tensor_type.elem_type)
    elem = {v.name: declared[v.name] for v in g.input if v.name in declared}
    elem.update((t.name, t.data_type) for t in g.initializer if t.name not in elem)
    for i, n in enumerate(g.node):
        schema = _schema(n, version)
        computed = _computed_types(n, schema, elem) if schema is not None else {}
        for o in n.output:
            if not o:
                continue
            want, got = computed.get(o), declared.get(o)
            if want and got and want != got:
                return (f"{quote(o)} is declared of element type {_elem_name(got)}, and {node_label(n, i)} computes "
                        f"{_elem_name(want)}")
            if want or got:
                elem[o] = want or got
    return None


def model_problem(model: onnx.ModelProto) -> str | None:
    """The first of the problems the module docstring lists, in the main graph or any body, said in one
    line (without the file's name); None when there is none."""
    opsets = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    version = opsets[-1] if opsets else None
    for g, where in _graphs(model.graph, "the graph"):
        for v in list(g.input) + list(g.output) + list(g.value_info):
            bad = next((e for e in _elem_types(v.type) if e not in _ELEM_TYPES), None)
            if bad is not None:
                return f"{quote(v.name)} in {where} is declared of element type {bad}, which ONNX does not define"
        # declarations in a body: onnxruntime checks some only (a Loop body's Add, not its Identity), so none
        kinds = declared_kind_problem(g, version) if where == "the graph" else None
        for found in (*(node_problem(n, version, i) for i, n in enumerate(g.node)), kinds):
            if found is not None:
                return found + ("" if where == "the graph" else f" (in {where})")
    return declared_type_problem(model.graph, version)
