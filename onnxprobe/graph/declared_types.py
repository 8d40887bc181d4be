"""The element types onnxruntime computes for the values of a model's graph and bodies, walked node by node,
held against what the model declares (``declared_type_problem``): what ``graph.node_check.model_problem``
calls last. A body's own checks are ``graph.body_checks``; what the schema says, ``graph.op_schema``."""

from __future__ import annotations

import copy
from typing import NamedTuple

import onnx
from onnx import AttributeProto

from onnxprobe.graph.body_checks import body_feeds, carried_problem, fed_problem, outer_declared_problem
from onnxprobe.graph.op_schema import (ValueType, computed_types, constant_type, constraint_problem, elem_name, inference_problem,
                                       inferred_types, op_spec, value_type)
from onnxprobe.graph.walk import node_label
from onnxprobe.text import quote


def declarations(g: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """``g``'s outputs and value_info entries (in that order: onnxruntime reads no value_info entry of a
    graph output, measured) less those naming a weight (an initializer) or a Constant's
    output, whose declared type onnxruntime does not read (measured: a weight or a Constant's output
    declared INT64, UNDEFINED or a sequence in the value_info or the outputs loads and runs; declared so
    among the graph inputs, it is refused)."""
    fixed = {t.name for t in g.initializer} | {t.values.name for t in g.sparse_initializer}
    fixed |= {o for n in g.node if n.op_type == "Constant" and n.domain in ("", "ai.onnx") for o in n.output}
    return [v for v in list(g.output) + list(g.value_info) if v.name not in fixed]


def first_inputs(g: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """``g``'s inputs, of a name listed more than once the first alone: onnxruntime reads that declaration
    and not the later (measured, onnxruntime 1.32: FLOAT then INT64 over a FLOAT weight loads and runs, the
    other order is refused)."""
    seen: set[str] = set()
    return [v for v in g.input if not (v.name in seen or seen.add(v.name))]


class _Scope(NamedTuple):
    version: int | None
    functions: dict  # (domain, name) -> a model-local FunctionProto
    check: bool  # hold declarations against computed types (not in a function body, whose onnxruntime ignores)
    depth: int = 0


def _body_types(n: onnx.NodeProto, label: str, scope: _Scope, elem: dict[str, ValueType]) -> tuple[dict[str, ValueType], str | None]:
    """The element types of an If's, a Loop's or a Scan's outputs, its bodies' (each walked with the outer
    values ``elem`` in scope: a problem inside one is said with where it is), or of a call of a model-local
    function, its body's (walked from the types of the call's inputs; its declarations are not read)."""
    if n.domain not in ("", "ai.onnx"):
        fn = scope.functions.get((n.domain, n.op_type))
        if fn is None or scope.depth > 8:
            return {}, None
        own = [o.version for o in fn.opset_import if o.domain in ("", "ai.onnx")]
        inner = {f: elem[x] for f, x in zip(fn.input, n.input) if x in elem}
        _walk(bound_body(fn, n), _Scope(own[-1] if own else scope.version, scope.functions, False, scope.depth + 1), inner, {}, "")
        return {o: inner[f] for o, f in zip(n.output, fn.output) if o and f in inner}, None
    graphs = {a.name: a.g for a in n.attribute if a.type == AttributeProto.GRAPH}
    keys = {"If": ("then_branch", "else_branch"), "Loop": ("body",), "Scan": ("body",)}.get(n.op_type, ())
    outs: list[list[ValueType | None]] = []
    for key in keys:
        if key not in graphs:
            return {}, None
        g, feeds = graphs[key], body_feeds(n, scope.version, elem)
        fed = fed_problem(n, g, label, feeds)
        if fed is not None:
            return {}, fed
        # a Loop's body input left untyped has the type the Loop feeds it, as onnxruntime infers it (a declared one
        # overrides it in _graph_walk); a Scan's body onnxruntime types loosely (a state that changes type loads)
        seeds = zip(g.input, feeds) if n.op_type == "Loop" else ()
        types = {**elem, **{v.name: t for v, (_, t) in seeds if t}}
        problem = _graph_walk(g, scope._replace(depth=scope.depth + 1), types, f"the {key} of {label}")
        problem = problem or carried_problem(n, g, label, feeds, types)
        if problem is not None:
            return {}, problem
        skip = 1 if n.op_type == "Loop" else 0  # a Loop's body gives its condition first
        outs.append([types.get(o.name) for o in g.output[skip:]])
    computed = {}
    for k, o in enumerate(n.output):
        said = {t[k] for t in outs if k < len(t) and t[k]}
        if o and len(said) > 1:  # If's branches that disagree, tensors or sequences ("Mismatched tensor element type")
            return {}, (f"the then_branch and else_branch of {label} give its output {quote(o)} as "
                        f"{' and '.join(elem_name(t[k]) for t in outs)}: the branches of an If give one element type")
        if o and len(said) == 1:
            computed[o] = said.pop()
    return computed, None


def bound_body(fn: onnx.FunctionProto, call: onnx.NodeProto) -> list[onnx.NodeProto]:
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


def _walk(nodes: list[onnx.NodeProto], scope: _Scope, elem: dict[str, ValueType], declared: dict[str, ValueType], where: str) -> str | None:
    """Give ``elem`` the element type of each output of ``nodes``, in order, as onnxruntime computes it; the
    first output ``declared`` of another type, said in one line (``where``: the body it is in)."""
    for i, n in enumerate(nodes):
        schema = op_spec(n, scope.version)
        bad = constraint_problem(n, schema, elem) if schema is not None and scope.check else None
        if bad is not None:  # an If's condition INT64; a weight BOOL beside an input of unknown type
            return f"{node_label(n, i)} reads {quote(bad[0])} as {elem_name(elem[bad[0]])}, {bad[1]}{f' (in {where})' if where else ''}"
        computed = computed_types(n, schema, elem) if schema is not None else {}
        if n.op_type in ("If", "Loop", "Scan") or n.domain not in ("", "ai.onnx"):
            more, problem = _body_types(n, node_label(n, i), scope, elem)
            if problem is not None:
                return problem
            computed.update(more)
        elif n.op_type == "Constant" and n.output:  # its attribute's type (many, each of other values: not inferred)
            computed = {n.output[0]: constant_type(n)}
        elif schema is not None and any(o and o not in computed for o in n.output):
            computed = {**inferred_types(n, scope.version, elem), **computed}
        refused = inference_problem(n, scope.version, elem) if schema is not None and scope.check else None
        if refused is not None:  # a weight stored DOUBLE beside a FLOAT input; a sequence of INT64 added to a FLOAT
            read = ", ".join(f"{quote(x)} as {elem_name(elem[x])}" for x in n.input if x)
            return (f"{node_label(n, i)} reads {read}, and onnx's type check of {n.op_type} refuses it: {refused}"
                    f"{f' (in {where})' if where else ''}")
        for o in n.output:
            if not o:
                continue
            want, got = computed.get(o), declared.get(o)
            if want and got and want != got:
                return (f"{quote(o)} is declared of element type {elem_name(got)}, and {node_label(n, i)} computes "
                        f"{elem_name(want)}{f' (in {where})' if where else ''}")
            if want or got:
                elem[o] = want or got
    return None


def _graph_walk(g: onnx.GraphProto, scope: _Scope, elem: dict[str, ValueType], where: str) -> str | None:
    """``_walk`` over a graph or a body, from its inputs' declared types and its initializers' (``elem``
    holds the outer values a body reads); its outputs and value_info entries are what ``declared`` holds."""
    declared: dict[str, ValueType] = {}
    kept = {v.name for v in declarations(g)}
    # a body's inputs and outputs of element type UNDEFINED onnxruntime refuses, as the main graph's ("Invalid
    # tensor data type 0"); not its value_info entries, which it does not read (measured)
    ends = first_inputs(g) + [v for v in g.output if v.name in kept] if where else []
    for v in ends + first_inputs(g) + declarations(g):
        if v.type.WhichOneof("value") == "sequence_type" and value_type(v.type):  # a sequence of tensors of one type
            declared.setdefault(v.name, value_type(v.type))
        if v.type.WhichOneof("value") != "tensor_type":
            continue
        if not v.type.tensor_type.elem_type:
            if where and not any(e is v for e in ends):
                continue
            what = f"input {quote(v.name)}:" if any(i.name == v.name for i in g.input) else f"{quote(v.name)} is declared"
            return f"{what} a tensor of element type UNDEFINED (0){f' (in {where})' if where else ''}"  # an input as runtime.feeds says it
        declared.setdefault(v.name, v.type.tensor_type.elem_type)
    if where and scope.check:
        found = outer_declared_problem(g, elem, where)
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
