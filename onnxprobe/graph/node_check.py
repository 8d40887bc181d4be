"""What onnxruntime refuses in a node's attributes or a value's declared type, found when a model is read
(``graph.io.check_graph``), so that every command refuses it alike with one line: an attribute given
twice, one of a type its op's schema does not take (or of no type), a required one missing, one its op
does not have, an element type ONNX does not define on a graph input, output or value_info entry or
in a Cast's ``to``, a value declared a kind (a sequence) its node never writes (a tensor), a main-graph value
declared a tensor of element type UNDEFINED (a body's input or output too), and a value of the main graph or of
a body declared of another element type than onnxruntime computes for it (``declared_type_problem``: by the
schema, an attribute, a body or a model-local function's body; an outer value a body reads, declared
otherwise in the body's value_info), a Loop's or Scan's body input declared of
another type than the node feeds it, If branches that give one output different element types, and a
graph input naming a weight (dense or sparse) declared of another shape than the weight's, and a model-local
function whose body holds a node of a domain the function imports no opset for. Without this, what only reads the attributes (grad's rules, a conversion to another
opset that keeps one of two duplicates) judged a model onnxruntime does not load, or failed on it with an
internal error (a Scan's ``num_scan_inputs`` given as a list of floats, a value typed as element type 40:
QA fuzzing). The schema is the op's at the model's ai.onnx opset (the one onnxruntime reads); an op
unknown there, or of another domain, is left to onnxruntime (its attributes are checked for duplicates
only)."""

from __future__ import annotations

import copy
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


def node_problem(n: onnx.NodeProto, version: int | None, index: int, main: bool = False) -> str | None:
    """Why onnxruntime refuses ``n``'s attributes (None: it does not, as far as its schema tells); ``index``:
    its number in its graph, which the message says it by. A Constant of the main graph (``main``)
    onnxruntime makes a weight of when it loads the model, from its first attribute, whatever the opset
    (measured: value_ints at opset 9, or value and value_int both, load and run), and refuses one without."""
    label = node_label(n, index)
    if main and n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
        return None if n.attribute else f"{label} has no attribute: a Constant gives its value by one"
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
    """``g``'s outputs and value_info entries (in that order: onnxruntime reads no value_info entry of a
    graph output, measured) less those naming a weight (an initializer) or a Constant's
    output, whose declared type onnxruntime does not read (measured: a weight or a Constant's output
    declared INT64, UNDEFINED or a sequence in the value_info or the outputs loads and runs; declared so
    among the graph inputs, it is refused)."""
    fixed = {t.name for t in g.initializer} | {t.values.name for t in g.sparse_initializer}
    fixed |= {o for n in g.node if n.op_type == "Constant" and n.domain in ("", "ai.onnx") for o in n.output}
    return [v for v in list(g.output) + list(g.value_info) if v.name not in fixed]


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
    for v in g.input:
        found = _weight_shape_problem(v, dims_of.get(v.name))
        if found is not None:
            return found
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


@functools.lru_cache(maxsize=None)
def _op_schema(op_type: str, version: int):
    return onnx.defs.get_schema(op_type, version, "")


def _inferred_types(n: onnx.NodeProto, version: int, elem: dict[str, int]) -> dict[str, int]:
    """The element types onnx's own inference function of ``n``'s op gives its outputs from its inputs'
    (``elem``; none unknown) and its attributes (Cast's ``to``, ConstantOfShape's ``value``, RandomNormal's
    or EyeLike's ``dtype``...): the function onnxruntime runs when it loads the model. Empty where it
    cannot tell (an attribute a function body takes from its caller, an input of unknown type)."""
    if any(x and x not in elem for x in n.input):
        return {}
    ins = tuple(elem[x] if x else 0 for x in n.input)
    # one inference per kind of node: types depend on the op, its attributes and its inputs' types only
    # (densenet-121 light: 836 ConstantOfShape nodes took 0.24 s inferred one by one)
    types = _infer(n.op_type, version, ins, tuple(a.SerializeToString() for a in n.attribute), len(n.output))
    return {o: t for o, t in zip(n.output, types) if o and t}


def _constant_type(n: onnx.NodeProto) -> int:
    """The element type of a Constant's output: its tensor's, or that of its value_float(s), value_int(s)..."""
    for a in n.attribute:
        if a.name == "value" and a.type == AttributeProto.TENSOR:
            return a.t.data_type
        if a.name == "sparse_value" and a.type == AttributeProto.SPARSE_TENSOR:
            return a.sparse_tensor.values.data_type
        kind = {"value_float": TensorProto.FLOAT, "value_floats": TensorProto.FLOAT, "value_int": TensorProto.INT64,
                "value_ints": TensorProto.INT64, "value_string": TensorProto.STRING, "value_strings": TensorProto.STRING}
        if a.name in kind:
            return kind[a.name]
    return 0


@functools.lru_cache(maxsize=4096)
def _infer(op_type: str, version: int, ins: tuple[int, ...], attributes: tuple[bytes, ...], outputs: int) -> tuple[int, ...]:
    node = onnx.NodeProto(op_type=op_type, input=[f"i{k}" if t else "" for k, t in enumerate(ins)],
                          output=[f"o{k}" for k in range(outputs)], attribute=[AttributeProto.FromString(a) for a in attributes])
    types = {f"i{k}": onnx.helper.make_tensor_type_proto(t, None) for k, t in enumerate(ins) if t}
    try:
        out = onnx.shape_inference.infer_node_outputs(_op_schema(op_type, version), node, types,
                                                      opset_imports=[onnx.helper.make_opsetid("", version)])
    except Exception:  # noqa: BLE001 - what inference refuses, onnxruntime says in its own words
        return (0,) * outputs
    got = {o: t.tensor_type.elem_type for o, t in out.items() if t.WhichOneof("value") == "tensor_type"}
    return tuple(got.get(f"o{k}", 0) for k in range(outputs))


class _Scope(NamedTuple):
    version: int | None
    functions: dict  # (domain, name) -> a model-local FunctionProto
    check: bool  # hold declarations against computed types (not in a function body, whose onnxruntime ignores)
    depth: int = 0


def _body_types(n: onnx.NodeProto, label: str, scope: _Scope, elem: dict[str, int]) -> tuple[dict[str, int], str | None]:
    """The element types of an If's, a Loop's or a Scan's outputs, its bodies' (each walked with the outer
    values ``elem`` in scope: a problem inside one is said with where it is), or of a call of a model-local
    function, its body's (walked from the types of the call's inputs; its declarations are not read)."""
    if n.domain not in ("", "ai.onnx"):
        fn = scope.functions.get((n.domain, n.op_type))
        if fn is None or scope.depth > 8:
            return {}, None
        own = [o.version for o in fn.opset_import if o.domain in ("", "ai.onnx")]
        inner = {f: elem[x] for f, x in zip(fn.input, n.input) if x in elem}
        _walk(_bound(fn, n), _Scope(own[-1] if own else scope.version, scope.functions, False, scope.depth + 1), inner, {}, "")
        return {o: inner[f] for o, f in zip(n.output, fn.output) if o and f in inner}, None
    graphs = {a.name: a.g for a in n.attribute if a.type == AttributeProto.GRAPH}
    keys = {"If": ("then_branch", "else_branch"), "Loop": ("body",), "Scan": ("body",)}.get(n.op_type, ())
    outs: list[list[int | None]] = []
    for key in keys:
        if key not in graphs:
            return {}, None
        fed = _fed_problem(n, graphs[key], label, scope.version, elem)
        if fed is not None:
            return {}, fed
        g, types = graphs[key], dict(elem)
        problem = _graph_walk(g, scope._replace(depth=scope.depth + 1), types, f"the {key} of {label}")
        if problem is not None:
            return {}, problem
        skip = 1 if n.op_type == "Loop" else 0  # a Loop's body gives its condition first
        outs.append([types.get(o.name) for o in g.output[skip:]])
    computed = {}
    for k, o in enumerate(n.output):
        said = {t[k] for t in outs if k < len(t) and t[k]}
        if o and len(said) > 1:  # If's branches that disagree ("Mismatched tensor element type")
            return {}, (f"the then_branch and else_branch of {label} give its output {quote(o)} as "
                        f"{' and '.join(_elem_name(t[k]) for t in outs)}: the branches of an If give one element type")
        if o and len(said) == 1:
            computed[o] = said.pop()
    return computed, None


def _bound(fn: onnx.FunctionProto, call: onnx.NodeProto) -> list[onnx.NodeProto]:
    """``fn``'s body with each reference to an attribute of the caller (``ref_attr_name``) given the value the
    call gives, or else the function's default (``attribute_proto``), as onnxruntime types it: a Cast(to=@t)
    called with t=INT64 computes INT64. A reference to neither stays (nothing is inferred from it)."""
    given = {a.name: a for a in fn.attribute_proto} | {a.name: a for a in call.attribute}
    if not any(a.ref_attr_name in given for x in fn.node for a in x.attribute if a.ref_attr_name):
        return list(fn.node)
    nodes = []
    for x in fn.node:
        x = copy.deepcopy(x)
        for a in x.attribute:
            if a.ref_attr_name and a.ref_attr_name in given:
                name = a.name
                a.CopyFrom(given[a.ref_attr_name])
                a.name = name
        nodes.append(x)
    return nodes


def _fed_problem(n: onnx.NodeProto, body: onnx.GraphProto, label: str, version: int | None, elem: dict[str, int]) -> str | None:
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
            return (f"{quote(v.name)} is declared of element type {_elem_name(got)} in the body of {label}, and the "
                    f"{n.op_type} feeds it {_elem_name(want)}{by}")
    return None


def _walk(nodes: list[onnx.NodeProto], scope: _Scope, elem: dict[str, int], declared: dict[str, int], where: str) -> str | None:
    """Give ``elem`` the element type of each output of ``nodes``, in order, as onnxruntime computes it; the
    first output ``declared`` of another type, said in one line (``where``: the body it is in)."""
    for i, n in enumerate(nodes):
        schema = _schema(n, scope.version)
        computed = _computed_types(n, schema, elem) if schema is not None else {}
        if n.op_type in ("If", "Loop", "Scan") or n.domain not in ("", "ai.onnx"):
            more, problem = _body_types(n, node_label(n, i), scope, elem)
            if problem is not None:
                return problem
            computed.update(more)
        elif n.op_type == "Constant" and n.output:  # its attribute's type (many, each of other values: not inferred)
            computed = {n.output[0]: _constant_type(n)}
        elif schema is not None and any(o and o not in computed for o in n.output):
            computed = {**_inferred_types(n, scope.version, elem), **computed}
        for o in n.output:
            if not o:
                continue
            want, got = computed.get(o), declared.get(o)
            if want and got and want != got:
                return (f"{quote(o)} is declared of element type {_elem_name(got)}, and {node_label(n, i)} computes "
                        f"{_elem_name(want)}{f' (in {where})' if where else ''}")
            if want or got:
                elem[o] = want or got
    return None


def _outer_declared_problem(g: onnx.GraphProto, outer: dict[str, int], where: str) -> str | None:
    """A body's value_info entry naming an outer value a node of the body reads, declared of another element
    type than the value is outside: onnxruntime refuses it ("Tensor element type mismatch. 1 != 7"; measured:
    an entry of an outer value the body does not read, or of a body input, it does not read)."""
    own = {v.name for v in g.input} | {t.name for t in g.initializer} | {o for n in g.node for o in n.output}
    read = {x for n in g.node for x in n.input}
    for v in g.value_info:
        got = v.type.tensor_type.elem_type if v.type.WhichOneof("value") == "tensor_type" else 0
        want = outer.get(v.name)
        if got and want and got != want and v.name in read and v.name not in own:
            return (f"{quote(v.name)} is declared of element type {_elem_name(got)} in {where}, and it is "
                    f"{_elem_name(want)} outside it")
    return None


def _graph_walk(g: onnx.GraphProto, scope: _Scope, elem: dict[str, int], where: str) -> str | None:
    """``_walk`` over a graph or a body, from its inputs' declared types and its initializers' (``elem``
    holds the outer values a body reads); its outputs and value_info entries are what ``declared`` holds."""
    declared: dict[str, int] = {}
    kept = {v.name for v in _declarations(g)}
    # a body's inputs and outputs of element type UNDEFINED onnxruntime refuses, as the main graph's ("Invalid
    # tensor data type 0"); not its value_info entries, which it does not read (measured)
    ends = list(g.input) + [v for v in g.output if v.name in kept] if where else []
    for v in ends + list(g.input) + _declarations(g):
        if v.type.WhichOneof("value") != "tensor_type":
            continue
        if not v.type.tensor_type.elem_type:
            if where and not any(e is v for e in ends):
                continue
            what = f"input {quote(v.name)}:" if any(i.name == v.name for i in g.input) else f"{quote(v.name)} is declared"
            return f"{what} a tensor of element type UNDEFINED (0){f' (in {where})' if where else ''}"  # an input as runtime.feeds says it
        declared.setdefault(v.name, v.type.tensor_type.elem_type)
    if where and scope.check:
        found = _outer_declared_problem(g, elem, where)
        if found is not None:
            return found
    typed = {v.name: declared[v.name] for v in g.input if v.name in declared}
    elem.update(typed)
    elem.update((t.name, t.data_type) for t in g.initializer if t.name not in typed)
    return _walk(list(g.node), scope, elem, declared if scope.check else {}, where)


def declared_type_problem(g: onnx.GraphProto, version: int | None, functions: dict | None = None) -> str | None:
    """A main-graph input, output or value_info entry declared a tensor of element type UNDEFINED (0)
    ("Invalid tensor data type 0"), or a value declared of an element type other than the one onnxruntime
    computes for it ("Type (tensor(int64)) of output arg ... does not match expected type (tensor(float))"):
    from its inputs' types by its op's schema, from an attribute (Cast's ``to``: onnx's inference), from
    its bodies (an If's, a Loop's, a Scan's outputs, and the values inside them, whose declarations are
    held to the same terms) or from a model-local function's body (``functions``: (domain, name) ->
    FunctionProto; whose own value_info onnxruntime does not read, measured). onnxruntime refuses each,
    and what runs a graph of its own built from the model (layers' outputs added, grad's forward graph)
    dropped the declaration and ran it (QA fuzzing)."""
    return _graph_walk(g, _Scope(version, functions or {}, True), {}, "")


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
