"""The element types of com.microsoft's quantized ops' outputs, which onnx's shape inference does not know.

onnx infers nothing for an op outside its own domains, and so nothing downstream of it either: after one
QLinearMul (onnxruntime's QOperator quantization writes them between standard QLinearConvs), every
tensor's dtype was unknown ("?" in the tables). Each of these ops writes the type of its output zero
point, an initializer whose type is known before inference (onnxruntime's contrib op schemas:
QLinearAdd/QLinearMul take it as input 7, the unary ones as input 4, QLinearConcat as input 1). The same
holds for com.microsoft's QuantizeLinear (its zero point, input 2; uint8 without one) and DequantizeLinear
(its scale, input 1), which onnxruntime's quantizer writes for 16-bit and 4-bit types (UseQDQContribOps).
``typed_outputs`` gives a value_info (type only) for each such output, for inference to start from.
``schema_types`` types, after inference, what it still left untyped (com.microsoft's float ops and what
follows them) from onnxruntime's op schemas.
"""

from __future__ import annotations

import onnx

from onnxprobe.graph.constants import constants

MS_DOMAIN = "com.microsoft"
# op -> the input whose type the output has (the output's zero point)
ZERO_POINT_INPUT = {
    "QLinearAdd": 7, "QLinearMul": 7, "QLinearSigmoid": 4, "QLinearLeakyRelu": 4, "QLinearSoftmax": 4,
    "QLinearGlobalAveragePool": 4, "QLinearAveragePool": 4, "QLinearConcat": 1, "QLinearWhere": 8, "QGemm": 8,
    "QuantizeLinear": 2, "DequantizeLinear": 1,
}
DEFAULT_TYPE = {"QuantizeLinear": onnx.TensorProto.UINT8}  # the output's type where that input is left out


def typed_outputs(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """Type-only value_info for the outputs of ``graph``'s com.microsoft quantized ops whose output zero
    point is an initializer or a Constant of this graph (others are left unknown)."""
    known = {k: t.data_type for k, t in constants(graph).items()}
    have = {v.name for v in (*graph.value_info, *graph.output)}
    out = []
    for n in graph.node:
        k = ZERO_POINT_INPUT.get(n.op_type) if n.domain == MS_DOMAIN else None
        if k is None or not n.output or not n.output[0] or n.output[0] in have:
            continue
        elem = known.get(n.input[k]) if len(n.input) > k and n.input[k] else DEFAULT_TYPE.get(n.op_type)
        if elem:
            out.append(onnx.helper.make_tensor_value_info(n.output[0], elem, None))
    return out


# --- float ops and the rest: types from onnxruntime's op schemas ----------------------------------------
# onnxruntime's optimized ("extended") models hold com.microsoft float ops (FusedMatMul, BiasGelu, FastGelu,
# QuickGelu, SkipLayerNormalization, FusedConv, Attention, com.microsoft.nchwc.Conv...) that onnx's
# inference knows nothing of: their outputs and everything after them read dtype "?", and their statistics
# took the flat float64 path. onnxruntime knows their schemas; ``schema_types`` reads each output's element
# type off them: the type of the inputs its type parameter binds (T: the input's), or the parameter's one
# allowed type (SkipLayerNormalization's mean, U: float). Ops downstream, of any domain, take the same rule
# from the same schemas where inference left them unknown. Type only: ranks and shapes stay unknown.
# Cost, only for a model with nodes outside onnx's domains whose inference left element types unknown
# (a plain model pays one scan of its node domains, < 1 ms): importing onnxruntime where nothing had
# (20-180 ms, as warm as the disk cache is; every command that runs the model imports it anyway: `inspect`
# of PP-OCRv4 rec EXTENDED spends 37 ms of its 500 in this pass, import included), reading its schemas once (12 ms), then
# one pass over the nodes. Measured in process (perf_counter, median of 5, annotate without -> with) on
# onnxruntime-optimized models: PP-OCRv4 det ALL (195 outputs typed) 7.3 -> 14.1 ms, rec EXTENDED (76)
# 7.0 -> 11.8 ms, gpt2-tiny (53) 3.9 -> 6.6 ms, bert-tiny (18) 2.8 -> 4.4 ms; `layers --all` on PP-OCRv4
# det EXTENDED 0.78-0.83 s before, 0.79-0.85 s after (noise).

# ai.onnx.ml is not among them: onnx's inference has no type function for many of its ops (Scaler, Normalizer,
# Binarizer...), so their outputs and what follows read "?" where onnxruntime's schemas know the type.
INFERRED_DOMAINS = ("", "ai.onnx", "ai.onnx.preview.training")
_TYPE_STR = {f"tensor({name.lower()})": v for name, v in onnx.TensorProto.DataType.items() if v}


def _ort_schemas() -> dict[tuple[str, str], list]:
    """(domain, op) -> onnxruntime's schemas of that op, oldest first (none without onnxruntime)."""
    global _SCHEMAS
    if _SCHEMAS is None:
        try:
            from onnxruntime.capi import onnxruntime_pybind11_state as C

            found: dict[tuple[str, str], list] = {}
            for s in C.get_all_operator_schema():
                found.setdefault((s.domain, s.name), []).append(s)
            _SCHEMAS = {k: sorted(v, key=lambda s: s.since_version) for k, v in found.items()}
        except Exception:  # noqa: BLE001 - no onnxruntime, or one without the call: types stay unknown
            _SCHEMAS = {}
    return _SCHEMAS


_SCHEMAS: dict | None = None


def _schema(node: onnx.NodeProto, opsets: dict[str, int]):
    domain = "" if node.domain == "ai.onnx" else node.domain
    versions = _ort_schemas().get((domain, node.op_type), [])
    fits = [s for s in versions if s.since_version <= opsets.get(domain, 1 << 30)]
    return fits[-1] if fits else None


def _formal(params, i: int):
    """The formal parameter of position ``i`` (the last one covers a variadic tail), else None."""
    if i < len(params):
        return params[i]
    last = params[-1] if params else None
    return last if last is not None and str(last.option).endswith("Variadic") else None


def _output_types(node: onnx.NodeProto, schema, elem: dict[str, int]) -> dict[str, int]:
    """The element type of each output of ``node`` that ``schema`` tells from the input types in ``elem``."""
    allowed = {c.type_param_str: list(c.allowed_type_strs) for c in schema.type_constraints}
    bound: dict[str, int] = {}
    for i, name in enumerate(node.input):
        p = _formal(schema.inputs, i)
        if p is None or not name or name not in elem:
            continue
        if str(p.option).endswith("Variadic") and not p.isHomogeneous:
            continue  # each element its own type (Loop's carried values)
        bound.setdefault(p.typeStr, elem[name])
    out = {}
    for i, name in enumerate(node.output):
        p = _formal(schema.outputs, i)
        if p is None or not name or (str(p.option).endswith("Variadic") and not p.isHomogeneous):
            continue
        one = allowed.get(p.typeStr, [p.typeStr])
        t = bound.get(p.typeStr) or (_TYPE_STR.get(one[0]) if len(one) == 1 else None)
        if t:
            out[name] = t
    return out


def schema_types(model: onnx.ModelProto) -> int:
    """Give the outputs that onnx's inference left without an element type (no value_info, or one with
    elem_type 0) a type-only value_info read off onnxruntime's schemas, in every graph, in node order (see
    above). Nothing happens for a model whose nodes are all of the domains onnx's inference types. Returns how many it typed."""
    from onnxprobe.graph.walk import subgraphs

    def foreign(g: onnx.GraphProto) -> bool:
        return any(n.domain not in INFERRED_DOMAINS or any(foreign(sg) for _, sg in subgraphs(n)) for n in g.node)

    if not foreign(model.graph):
        return 0
    opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}

    def visit(g: onnx.GraphProto, outer: dict[str, int], typed: set[str]) -> int:
        elem = dict(outer)
        infos = {}
        for vi in (*g.input, *g.value_info, *g.output):
            infos.setdefault(vi.name, vi)
            if vi.type.WhichOneof("value") is not None and (not vi.type.HasField("tensor_type") or vi.type.tensor_type.elem_type):
                typed.add(vi.name)  # a sequence, a map: known, if not a tensor
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                elem[vi.name] = vi.type.tensor_type.elem_type
        elem.update((t.name, t.data_type) for t in g.initializer)
        typed.update(t.name for t in g.initializer)
        n_typed = 0
        for n in g.node:
            for _, sg in subgraphs(n):
                n_typed += visit(sg, elem, set(typed))
            if all(o in typed for o in n.output if o):
                continue
            schema = _schema(n, opsets)
            if schema is None:
                continue
            for name, t in _output_types(n, schema, elem).items():
                if name in typed:
                    continue
                vi = infos.get(name)  # a graph output declared without its element type gets it there
                if vi is None:
                    vi = infos[name] = g.value_info.add(name=name)
                vi.type.tensor_type.elem_type = t
                elem[name] = t
                typed.add(name)
                n_typed += 1
        return n_typed

    return visit(model.graph, {}, set())
