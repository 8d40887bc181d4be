"""What onnxruntime refuses in a node's attributes or a value's declared type, found when a model is read
(``graph.io.check_graph``), so that every command refuses it alike with one line: an attribute given
twice, one of a type its op's schema does not take (or of no type), a required one missing, one its op
does not have, an element type ONNX does not define on a graph input, output or value_info entry or
in a Cast's ``to``, a value declared a kind (a sequence) its node never writes (a tensor), a main-graph value
declared a tensor of element type UNDEFINED (a body's input or output too), and a value of the main graph or of
a body declared of another element type than onnxruntime computes for it (``declared_type_problem``: by the
schema, an attribute, a body or a model-local function's body; an outer value a body reads, declared
otherwise in the body's value_info), a Loop's or Scan's body input declared of
another type than the node feeds it, a Loop's carried value its body gives back of another element type than
the Loop feeds it, If branches that give one output different element types (of tensors or of sequences), and a
graph input naming a weight (dense or sparse) declared of another shape than the weight's, and a model-local
function whose body holds a node of a domain the function imports no opset for. Without this, what only reads the attributes (grad's rules, a conversion to another
opset that keeps one of two duplicates) judged a model onnxruntime does not load, or failed on it with an
internal error (a Scan's ``num_scan_inputs`` given as a list of floats, a value typed as element type 40:
QA fuzzing). The schema is the op's at the model's ai.onnx opset (the one onnxruntime reads); an op
unknown there, or of another domain, is left to onnxruntime (its attributes are checked for duplicates
only).

The element-type walk over the graph and its bodies is ``graph.declared_types`` (its body checks
``graph.body_checks``), what both read of an op's schema ``graph.op_schema``."""


from __future__ import annotations

from typing import Iterator

import onnx
from onnx import AttributeProto

from onnxprobe.graph.declared_types import declarations, declared_type_problem, first_inputs
from onnxprobe.graph.op_schema import ELEM_TYPES, elem_name, op_spec, output_kinds
from onnxprobe.graph.walk import node_label
from onnxprobe.text import quote

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


def node_problem(n: onnx.NodeProto, version: int | None, index: int, main: bool = False) -> str | None:
    """Why onnxruntime refuses ``n``'s attributes (None: it does not, as far as its schema tells); ``index``:
    its number in its graph, which the message says it by. A Constant of the main graph (``main``)
    onnxruntime makes a weight of when it loads the model, from its first attribute, whatever the opset
    (measured: value_ints at opset 9, or value and value_int both, load and run), and refuses one without."""
    found = _attribute_problem(n, version, main)
    return None if found is None else f"{node_label(n, index)} {found}"


def _attribute_problem(n: onnx.NodeProto, version: int | None, main: bool) -> str | None:
    """``node_problem``'s finding, said after the node's label (which is made only for a node that has one:
    a label a node cost a tenth of check_graph's time)."""
    if main and n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
        return None if n.attribute else "has no attribute: a Constant gives its value by one"
    seen: set[str] = set()
    for a in n.attribute:
        if a.name in seen:
            return f"gives its attribute {quote(a.name)} twice"
        seen.add(a.name)
    schema = op_spec(n, version)
    if schema is None:
        return None
    # onnxruntime: "has input size 3 not in range [min=2, max=2]"; too few failed what reads a node's inputs by
    # position (diff's matching of a DequantizeLinear: an IndexError), too many a rule (a MatMul of three
    # inputs in an If branch: grad's internal ValueError; QA fuzzing)
    if not schema.min_input <= len(n.input) <= schema.max_input:
        at = f"at least {schema.min_input}" if len(n.input) < schema.min_input else f"at most {schema.max_input}"
        return f"has {len(n.input)} input(s), and {n.op_type} takes {at}"
    if len(n.output) > schema.max_output:
        return f"has {len(n.output)} output(s), and {n.op_type} gives at most {schema.max_output}"
    for a in n.attribute:
        if a.ref_attr_name:  # a function body's reference to its caller's attribute
            continue
        spec = schema.attributes.get(a.name)
        if spec is None:
            return f"has an attribute {quote(a.name)}, which {n.op_type} does not take"
        want = int(spec.type.value)
        if a.type != want:
            got = AttributeProto.AttributeType.Name(a.type) if a.type in AttributeProto.AttributeType.values() else str(a.type)
            return (f"gives its attribute {quote(a.name)} as {got}, and {n.op_type} takes "
                    f"{AttributeProto.AttributeType.Name(want)}")
        if a.name in _TYPE_ATTRS and a.type == AttributeProto.INT and a.i not in ELEM_TYPES:
            return f"gives {a.name}={a.i}, an element type ONNX does not define"
    for name, spec in schema.attributes.items():
        if spec.required and name not in seen:
            return f"lacks its required attribute {quote(name)}"
    return None


_KINDS = {"tensor_type": "tensor", "sequence_type": "seq", "map_type": "map", "optional_type": "optional",
          "sparse_tensor_type": "sparse_tensor"}


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _weight_shape_problem(v: onnx.ValueInfoProto, dims: list[int] | None) -> str | None:
    """A graph input naming a weight, declared of another rank or size than the weight's: onnxruntime refuses
    it ("Shape of initializer W does not match"; measured: a dimension given as a name or left out matches
    any size; the same declaration in the value_info it does not read)."""
    if dims is None or v.type.WhichOneof("value") != "tensor_type" or not v.type.tensor_type.HasField("shape"):
        return None
    declared = [d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim]
    if len(declared) == len(dims) and all(d is None or d == k for d, k in zip(declared, dims)):
        return None
    said = "x".join("?" if d is None else str(d) for d in declared) or "a scalar"
    return (f"graph input {quote(v.name)} is declared of shape {said}, and its initializer is of shape "
            f"{'x'.join(map(str, dims)) or 'a scalar'}")


def declared_kind_problem(g: onnx.GraphProto, version: int | None) -> str | None:
    """A graph input, value_info entry or graph output declared a kind of value (a sequence, say) that the
    ai.onnx node writing it never gives (a tensor), or that its initializer is not: onnxruntime refuses the model ("Type mismatch"), and diff, which runs
    a graph of its own without the model's value_info, passed one (QA fuzzing)."""
    made = {o: (i, k) for i, n in enumerate(g.node) for k, o in enumerate(n.output) if o}
    # onnxruntime loads a sparse initializer as a dense tensor of its values' element type (measured: declared
    # a tensor of it among the graph inputs it runs; declared a sparse_tensor there it is refused)
    elem_of = {t.name: t.data_type for t in g.initializer} | {t.values.name: t.values.data_type for t in g.sparse_initializer}
    weights = dict.fromkeys(elem_of, "tensor")
    dims_of = {t.name: list(t.dims) for t in g.initializer} | {t.values.name: list(t.dims) for t in g.sparse_initializer}
    for v in first_inputs(g):
        found = _weight_shape_problem(v, dims_of.get(v.name))
        if found is not None:
            return found
    for v in first_inputs(g) + declarations(g):
        kind = _KINDS.get(v.type.WhichOneof("value"))
        if kind is not None and v.name in weights and kind != weights[v.name]:
            return f"{quote(v.name)} is declared {_a(kind)} value, and it is an initializer: a {weights[v.name]}"
        elem = v.type.tensor_type.elem_type if kind == "tensor" else 0
        if elem and v.name in elem_of and elem != elem_of[v.name]:
            return (f"{quote(v.name)} is declared of element type {elem_name(elem)}, and its initializer is of "
                    f"{elem_name(elem_of[v.name])}")
        if kind is None or v.name not in made:
            continue
        i, k = made[v.name]
        n = g.node[i]
        schema = op_spec(n, version)
        kinds = output_kinds(schema, k) if schema is not None else None
        if kinds and kind not in kinds:
            return (f"{quote(v.name)} is declared {_a(kind)} value, and {node_label(n, i)} writes it as "
                    f"{' or '.join(sorted(kinds))}")
    return None


def model_problem(model: onnx.ModelProto) -> str | None:
    """The first of the problems the module docstring lists, in the main graph or any body, said in one
    line (without the file's name); None when there is none."""
    opsets = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    version = opsets[-1] if opsets else None
    for g, where in _graphs(model.graph, "the graph"):
        for v in list(g.input) + list(g.output) + list(g.value_info):
            bad = next((e for e in _elem_types(v.type) if e not in ELEM_TYPES), None)
            if bad is not None:
                return f"{quote(v.name)} in {where} is declared of element type {bad}, which ONNX does not define"
        # declarations in a body: onnxruntime checks some only (a Loop body's Add, not its Identity), so none
        kinds = declared_kind_problem(g, version) if where == "the graph" else None
        for found in (*(node_problem(n, version, i, where == "the graph") for i, n in enumerate(g.node)), kinds):
            if found is not None:
                return found + ("" if where == "the graph" else f" (in {where})")
    for f in model.functions:
        found = _function_domain_problem(f)
        if found is not None:
            return found
    return declared_type_problem(model.graph, version, {(f.domain, f.name): f for f in model.functions})


def _function_domain_problem(f: onnx.FunctionProto) -> str | None:
    """A node of a model-local function's body of a domain the function's own opset_import does not name, as
    written ("ai.onnx" is not ""): onnxruntime refuses the model ("No opset registered for domain  in
    function F"; measured), whatever the model imports."""
    imported = {o.domain for o in f.opset_import}
    for i, n in enumerate(f.node):
        if n.domain not in imported:
            return (f"model-local function {quote(f.domain + '.' + f.name)}: {node_label(n, i)} is of domain "
                    f"{quote(n.domain)}, for which the function imports no opset")
    return None
