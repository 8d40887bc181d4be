"""What the load checks (``graph.node_check``, ``graph.declared_types``) read of an ai.onnx op's schema at a
model's opset: its inputs', outputs' and attributes' specs (``op_spec``, read once per op and opset), the kinds
of value an output may be, and the element types onnxruntime computes for a node's outputs from its inputs'
(by the schema's type constraints, by onnx's own inference function, or from a Constant's attribute)."""

from __future__ import annotations

import functools
from typing import NamedTuple

import onnx
from onnx import AttributeProto, TensorProto

from onnxprobe.text import some

ELEM_TYPES = set(TensorProto.DataType.values())


class _Formal(NamedTuple):
    type_str: str
    variadic: bool
    homogeneous: bool


class OpSpec:
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
def _spec(op_type: str, version: int) -> OpSpec | None:
    try:
        return OpSpec(onnx.defs.get_schema(op_type, version, ""))
    except Exception:  # noqa: BLE001 - an op unknown at that opset: onnxruntime's own error says so
        return None


def op_spec(n: onnx.NodeProto, version: int | None) -> OpSpec | None:
    if version is None or n.domain not in ("", "ai.onnx"):
        return None
    return _spec(n.op_type, version)


# What the load checks know of a value's type: a tensor's element type (an int; 0: unknown), or a sequence of
# tensors of one element type, ("seq", element type): an If's branches that give sequence<float> and
# sequence<int64> disagree as two tensors of other element types do.
ValueType = int | tuple[str, int]


def value_type(t: onnx.TypeProto) -> ValueType:
    """``t`` as the checks know it (0: neither a tensor nor a sequence of tensors of a known element type)."""
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        return t.tensor_type.elem_type
    if kind == "sequence_type" and t.sequence_type.elem_type.WhichOneof("value") == "tensor_type":
        e = t.sequence_type.elem_type.tensor_type.elem_type
        return ("seq", e) if e else 0
    return 0


def _type_proto(t: ValueType) -> onnx.TypeProto:
    if isinstance(t, tuple):
        return onnx.helper.make_sequence_type_proto(onnx.helper.make_tensor_type_proto(t[1], None))
    return onnx.helper.make_tensor_type_proto(t, None)


def elem_name(e: ValueType) -> str:
    """An element type's name (FLOAT), or a sequence's (sequence of FLOAT)."""
    if isinstance(e, tuple):
        return f"sequence of {elem_name(e[1])}"
    return TensorProto.DataType.Name(e) if e in ELEM_TYPES else str(e)


def output_kinds(schema: OpSpec, k: int) -> set[str] | None:
    """The kinds of value (tensor, seq, map, optional...) output ``k`` of an op may be, by its schema."""
    outs = schema.outputs
    if not outs:
        return None
    o = outs[k] if k < len(outs) else outs[-1] if outs[-1].variadic else None
    if o is None:
        return None
    allowed = schema.allowed.get(o.type_str, [o.type_str])
    return {t.split("(", 1)[0] for t in allowed}


TYPE_STRS = {f"tensor({k.lower()})": v for k, v in TensorProto.DataType.items() if v}


def computed_types(n: onnx.NodeProto, schema: OpSpec, elem: dict[str, ValueType]) -> dict[str, ValueType]:
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
        if schema.tensors(f.type_str) and isinstance(elem[x], int):
            bound.setdefault(f.type_str, elem[x])
    out = {}
    for i, o in enumerate(n.output):
        f = formal(schema.outputs, i)
        if f is None or not o or (f.variadic and not f.homogeneous):
            continue
        one = schema.allowed.get(f.type_str, [f.type_str])
        t = bound.get(f.type_str) if schema.tensors(f.type_str) else None
        t = t or (TYPE_STRS.get(one[0]) if len(one) == 1 else None)
        if t:
            out[o] = t
    return out


_TYPE_NAMES = {v: k for k, v in TYPE_STRS.items()}


def _type_str(t: ValueType) -> str | None:
    """``t`` as a schema writes it: tensor(float), seq(tensor(int64)); None where unknown."""
    if isinstance(t, tuple):
        inner = _TYPE_NAMES.get(t[1])
        return f"seq({inner})" if inner else None
    return _TYPE_NAMES.get(t)


def constraint_problem(n: onnx.NodeProto, schema: OpSpec, elem: dict[str, ValueType]) -> tuple[str, str] | None:
    """An input of ``n`` whose element type (``elem``; those unknown are passed over) its op's schema allows none
    of its type parameter's inputs, or that differs from an earlier input bound to the same parameter: (the
    input, the rest of the line that says why). onnxruntime refuses both ("Type 'tensor(int64)' of input parameter ... is
    invalid", "bound to different types") whatever the other inputs are: an If's condition, a weight beside an
    input a node of another domain computes."""
    bound: dict[str, ValueType] = {}
    for i, x in enumerate(n.input):
        f = schema.inputs[i] if i < len(schema.inputs) else schema.inputs[-1] if schema.inputs and schema.inputs[-1].variadic else None
        if f is None or not x or x not in elem or _type_str(elem[x]) is None:
            continue
        allowed = schema.allowed.get(f.type_str, [f.type_str])
        if _type_str(elem[x]) not in allowed:
            what = f"its type parameter {f.type_str} allows" if f.type_str in schema.allowed else "it takes"
            return x, (f"which {n.op_type} does not take there ({what} {some(allowed, 6, str)})")
        if f.type_str in schema.allowed and not (f.variadic and not f.homogeneous):
            if bound.setdefault(f.type_str, elem[x]) != elem[x]:
                return x, (f"and an earlier input as {elem_name(bound[f.type_str])}: {n.op_type} takes one element "
                           f"type for both (its type parameter {f.type_str})")
    return None


@functools.lru_cache(maxsize=None)
def _op_schema(op_type: str, version: int):
    return onnx.defs.get_schema(op_type, version, "")


def inferred_types(n: onnx.NodeProto, version: int, elem: dict[str, ValueType]) -> dict[str, ValueType]:
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


def constant_signature(n: onnx.NodeProto) -> tuple[int, list[int]] | None:
    """The element type and dims of a Constant's output: its tensor's (dense or sparse), or those of its
    value_float(s), value_int(s), value_string(s) (one value: no dims; a list: its length). None: no such attribute."""
    for a in n.attribute:
        if a.name == "value" and a.type == AttributeProto.TENSOR:
            return a.t.data_type, list(a.t.dims)
        if a.name == "sparse_value" and a.type == AttributeProto.SPARSE_TENSOR:
            return a.sparse_tensor.values.data_type, list(a.sparse_tensor.dims)
        if a.name in _LIST_FORMS:
            elem, field = _LIST_FORMS[a.name]
            return elem, [] if field is None else [len(getattr(a, field))]
    return None


_LIST_FORMS = {"value_float": (TensorProto.FLOAT, None), "value_floats": (TensorProto.FLOAT, "floats"),
               "value_int": (TensorProto.INT64, None), "value_ints": (TensorProto.INT64, "ints"),
               "value_string": (TensorProto.STRING, None), "value_strings": (TensorProto.STRING, "strings")}


def constant_type(n: onnx.NodeProto) -> int:
    """The element type of a Constant's output (``constant_signature``); 0 where it gives none."""
    sig = constant_signature(n)
    return sig[0] if sig is not None else 0


def _infer(op_type: str, version: int, ins: tuple[ValueType, ...], attributes: tuple[bytes, ...], outputs: int) -> tuple[ValueType, ...]:
    return _run_inference(op_type, version, ins, attributes, outputs)[0]


def inference_problem(n: onnx.NodeProto, version: int, elem: dict[str, ValueType]) -> str | None:
    """Why onnx's own check of ``n`` refuses the element types of its inputs (``elem``), the check onnxruntime makes
    when it loads the model: the op's type constraints (an input of a type its type parameter does not allow,
    two inputs bound to one parameter of different types) and its inference function (a SequenceInsert of an
    INT64 tensor into a sequence of FLOAT). None where it takes them, or cannot tell: an input of unknown type,
    a body (an If's, a Loop's: walked by ``graph.declared_types``), an attribute taken from a function's caller."""
    if not n.input or any(x and x not in elem for x in n.input):
        return None
    if any(a.ref_attr_name or a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in n.attribute):
        return None
    ins = tuple(elem[x] if x else 0 for x in n.input)
    return _run_inference(n.op_type, version, ins, tuple(a.SerializeToString() for a in n.attribute), len(n.output))[1]


@functools.lru_cache(maxsize=4096)
def _run_inference(op_type: str, version: int, ins: tuple[ValueType, ...], attributes: tuple[bytes, ...],
                   outputs: int) -> tuple[tuple[ValueType, ...], str | None]:
    """The types onnx's inference gives the outputs (0: unknown), and its refusal's first line (None: none)."""
    node = onnx.NodeProto(op_type=op_type, input=[f"i{k}" if t else "" for k, t in enumerate(ins)],
                          output=[f"o{k}" for k in range(outputs)], attribute=[AttributeProto.FromString(a) for a in attributes])
    types = {f"i{k}": _type_proto(t) for k, t in enumerate(ins) if t}
    try:
        out = onnx.shape_inference.infer_node_outputs(_op_schema(op_type, version), node, types,
                                                      opset_imports=[onnx.helper.make_opsetid("", version)])
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        return (0,) * outputs, (str(e).strip().splitlines() or [type(e).__name__])[0]
    except Exception:  # noqa: BLE001 - what inference fails on otherwise, onnxruntime says in its own words
        return (0,) * outputs, None
    got = {o: value_type(t) for o, t in out.items()}
    return tuple(got.get(f"o{k}", 0) for k in range(outputs)), None
