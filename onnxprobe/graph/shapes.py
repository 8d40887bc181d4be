"""Shape inference that degrades with a warning instead of failing.

``infer_shapes(model)`` returns a new model with ``value_info`` filled in by onnx's shape inference
(data propagation on). If inference fails — an exotic op, a custom domain, a >2 GB model — it tries the
non-strict mode, then gives up and returns an unannotated copy; each step down adds a warning.
"""

from __future__ import annotations

import onnx
from onnx import shape_inference

from onnxprobe.errors import first_line
from onnxprobe.graph.builder import opset_version, single_initializers, single_opsets
from onnxprobe.graph.contrib_shapes import stand_ins
from onnxprobe.graph.contrib_types import schema_types, typed_outputs
from onnxprobe.graph.walk import all_graphs
from onnxprobe.memory import return_freed_memory, trim
from onnxprobe.types import element_count



def infer_shapes(model: onnx.ModelProto, warnings: list[str] | None = None) -> onnx.ModelProto:
    """A copy of ``model`` annotated with inferred shapes (see ``annotate`` for the in-place form)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    annotate(out, warnings)
    return out


def annotate(model: onnx.ModelProto, warnings: list[str] | None = None) -> onnx.ModelProto:
    """Fill ``model``'s value_info (main graph and subgraphs) in place, by onnx shape inference with data
    propagation run on a weightless skeleton (so weight bytes are never serialised). Degrades: strict,
    then non-strict, then no annotation with a warning. A domain imported twice is first collapsed to the
    import onnxruntime runs with (``graph.builder.single_opsets``), and initializers that share a name to the
    copy it runs with (``single_initializers``). Returns ``model``."""
    from onnxprobe.graph.skeleton import skeleton

    warnings = warnings if warnings is not None else []
    single_opsets(model, warnings)
    single_initializers(model, warnings)
    _unknown_negative_dims(model)
    return_freed_memory()  # inference's buffers are large and short-lived: let them go back when freed
    sk = skeleton(model, constants=True)
    if sk.ir_version < 4:  # IR 3 lists every initializer as an input; inference ignores those it does not list
        sk.ir_version = 4  # (scales and zero points a quantizer added): from IR 4 on, initializers are read as such
    _densified(sk.graph)
    _read_outputs_known(sk.graph)
    typed = typed_outputs(sk.graph)
    sk.graph.value_info.extend(typed)  # com.microsoft's quantized ops: inference goes on past them
    stand_ins(sk.graph, typed)  # and their outputs' shapes, from standard ops of the same shape (the skeleton only)
    err = ""
    for strict in (True, False):
        try:
            inferred = shape_inference.infer_shapes(sk, check_type=False, strict_mode=strict, data_prop=True)
            break
        except Exception as e:  # noqa: BLE001 - any failure degrades
            err = first_line(e)
    else:
        warnings.append(f"shape inference failed ({err[:200]}); shapes come from the run only")
        return model
    _copy_value_info(inferred.graph, model.graph)
    del inferred, sk
    schema_types(model)  # ops onnx's inference knows not (com.microsoft's float ops) and what follows them
    _type_dropout_masks(model)
    trim()
    return model


def _read_outputs_known(g: onnx.GraphProto) -> None:
    """A skeleton's graph outputs that its nodes also read, their shape where the declaration or a
    value_info entry has one, on both: onnx's inference reads such a tensor's type off its output
    declaration alone, never as what a reader starts from where an op it knows not writes it, so the shape
    a run put in value_info (``with_input_shapes`` clears the outputs') was lost past com.microsoft's
    QuickGelu (the loss ``grad`` appends behind the output: "its rank is unknown"). The declaration wins
    where both have one, as in onnxruntime."""
    read = {i for n in g.node for i in n.input}
    shaped = lambda t: t.HasField("tensor_type") and t.tensor_type.elem_type and t.tensor_type.HasField("shape")  # noqa: E731
    infos = {vi.name: vi for vi in g.value_info}
    for o in g.output:
        if o.name not in read:
            continue
        vi = infos.get(o.name)
        if shaped(o.type):
            if vi is None:
                g.value_info.append(o)
            elif not shaped(vi.type):
                vi.type.CopyFrom(o.type)
        elif vi is not None and shaped(vi.type):
            o.type.CopyFrom(vi.type)


def _densified(g: onnx.GraphProto) -> None:
    """A skeleton's sparse initializers as dense stubs of their dims and type (as onnxruntime loads them):
    onnx's inference types a sparse initializer sparse_tensor and types nothing that reads it (a MatMul
    by a sparse weight had no shape, its output no type: what B's nodes fed A's values read, the rank
    ``grad`` needs)."""
    from onnxprobe.graph.skeleton import stub

    for t in g.sparse_initializer:
        g.initializer.append(stub(onnx.TensorProto(name=t.values.name, data_type=t.values.data_type, dims=t.dims)))
    del g.sparse_initializer[:]


def _unknown_negative_dims(model: onnx.ModelProto) -> None:
    """A declared dimension of -1 (Paddle's exporter writes its batch so) is one onnxruntime runs as a
    dynamic one, and every table shows as '?': it becomes one with no value, in every graph's inputs,
    outputs and value_info. Left as it was, onnx's inference carried the -1 on into the statistics nodes'
    Concat, and the marked copy failed onnx's full check ("Negative dimension value on Concat axis")."""
    for g in all_graphs(model.graph):
        for vi in (*g.input, *g.output, *g.value_info):
            if vi.type.WhichOneof("value") == "tensor_type" and vi.type.tensor_type.HasField("shape"):
                for d in vi.type.tensor_type.shape.dim:
                    if d.HasField("dim_value") and d.dim_value < 0:
                        d.ClearField("dim_value")


def _type_dropout_masks(model: onnx.ModelProto) -> None:
    """Dropout before opset 10 writes its mask in its data's type and shape (the spec's T; onnxruntime
    does so, checked), which onnx's inference leaves unknown (a "?" dtype in the tables of opset-9 zoo
    models): the main graph's masks get their data's type."""
    opset = opset_version(model, "", 0)
    if opset >= 10:
        return
    g = model.graph
    known = {vi.name: vi for vi in (*g.input, *g.value_info, *g.output)}
    for n in g.node:
        if n.op_type != "Dropout" or n.domain not in ("", "ai.onnx") or len(n.output) < 2 or not n.output[1]:
            continue
        data, mask = known.get(n.input[0]), known.get(n.output[1])
        if data is None or not data.type.tensor_type.elem_type or (mask is not None and mask.type.tensor_type.elem_type):
            continue
        if mask is None:
            mask = g.value_info.add(name=n.output[1])
            known[mask.name] = mask
        mask.type.CopyFrom(data.type)


def _copy_value_info(src: onnx.GraphProto, dst: onnx.GraphProto, body: bool = False, branch: bool = False) -> None:
    del dst.value_info[:]
    # a tensor entry with a shape and no element type is one onnxruntime refuses to load ("Invalid tensor data
    # type 0"): inference leaves such entries where it could not tell the type; they are left out
    dst.value_info.extend(vi for vi in src.value_info
                          if not (vi.type.WhichOneof("value") == "tensor_type" and not vi.type.tensor_type.elem_type))
    if body:  # a body's inputs declared without a type (a Loop's carried values) get the one inference gave them
        for si, di in zip(src.input, dst.input):
            if si.type.HasField("tensor_type") and si.type.tensor_type.elem_type and \
                    di.type.WhichOneof("value") in (None, "tensor_type") and not di.type.tensor_type.elem_type:
                di.type.tensor_type.elem_type = si.type.tensor_type.elem_type
    # graph outputs keep what the model declares; inference only fills in what it left out
    for so, do in zip(src.output, dst.output):
        dt, st = do.type.tensor_type, so.type.tensor_type
        if so.type.HasField("tensor_type") and (not dt.elem_type or not dt.HasField("shape")):
            if not dt.elem_type:
                dt.elem_type = st.elem_type
            if not dt.HasField("shape") and st.HasField("shape"):
                dt.shape.CopyFrom(st.shape)
        # an If branch's output declared with unknown dims ([?, ?], a rank only) takes inference's, a declared dim
        # stays: a branch that did not run shows no other shape than this. Not the main graph's outputs nor a
        # Loop's (a state that grows): there what the model declares stays as it is
        if branch and so.type.HasField("tensor_type") and dt.HasField("shape") and st.HasField("shape") and \
                len(dt.shape.dim) == len(st.shape.dim):
            for dd, sd in zip(dt.shape.dim, st.shape.dim):
                if not dd.HasField("dim_value") and not dd.HasField("dim_param") and (sd.HasField("dim_value") or (
                        sd.HasField("dim_param") and not _made_up(sd.dim_param))):
                    dd.CopyFrom(sd)
    for sn, dn in zip(src.node, dst.node):
        for sa, da in zip(sn.attribute, dn.attribute):
            if sa.type == onnx.AttributeProto.GRAPH:
                _copy_value_info(sa.g, da.g, body=True, branch=sn.op_type == "If")


def _made_up(dim_param: str) -> bool:
    """A dim name onnx's inference makes up for a dim it cannot tell ('unk__0'): it says nothing more."""
    return dim_param.startswith("unk__") and dim_param[5:].isdigit()


def value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """Every known tensor type in the model, subgraphs included, keyed by tensor name."""
    types: dict[str, onnx.TypeProto] = {}
    for g in all_graphs(model.graph):
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                types.setdefault(vi.name, vi.type)
        # a weight's own dims, over a declaration that lost its shape (a graph output that is a weight, whose
        # shape grad's copy with input shapes cleared: "the rank of 'W' is unknown")
        for init in g.initializer:
            if static_shape(types.get(init.name)) is None:
                types[init.name] = onnx.helper.make_tensor_type_proto(init.data_type, list(init.dims))
        for sp in g.sparse_initializer:  # a dense tensor to every runtime, of these dims
            if static_shape(types.get(sp.values.name)) is None:
                types[sp.values.name] = onnx.helper.make_tensor_type_proto(sp.values.data_type, list(sp.dims))
    return types


def own_type(g: onnx.GraphProto, name: str) -> onnx.TypeProto | None:
    """``name``'s type as the graph that computes it declares it (sibling bodies that share a name may
    give it different types; ``value_types`` keeps the first)."""
    for vi in list(g.output) + list(g.value_info):
        if vi.name == name and vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            return vi.type
    return None


def dtype_name(elem_type: int) -> str | None:
    """numpy-style dtype name for an ONNX elem type (bfloat16 and float8 types keep their ONNX name; strings
    are "string")."""
    if not elem_type:
        return None
    if elem_type == onnx.TensorProto.STRING:  # numpy's "object" says nothing of what the model holds
        return "string"
    try:
        return str(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:  # noqa: BLE001
        names = onnx.TensorProto.DataType.DESCRIPTOR.values_by_number  # a type onnx does not know: its number
        return names[elem_type].name.lower() if elem_type in names else f"type {elem_type} (unknown)"


def static_shape(t: onnx.TypeProto | None) -> tuple | None:
    """(1, 'batch', None, ...) from a TypeProto; None when the rank is unknown."""
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    dims = []
    for d in t.tensor_type.shape.dim:
        if d.HasField("dim_value") and d.dim_value >= 0:  # some exporters write -1 for "dynamic"
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:  # an empty name is no name: unknown, as onnxruntime reads it
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return tuple(dims)



def with_input_shapes(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> onnx.ModelProto:
    """A copy whose graph inputs have these concrete shapes, for shape inference to propagate them from
    the inputs alone: the declared shapes of other tensors (value_info, the outputs' dims) go, as they
    may hold for other input shapes only (``graph.stale_shapes``)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.value_info[:]
    for vi in out.graph.output:
        if vi.type.HasField("tensor_type"):
            vi.type.tensor_type.ClearField("shape")
    for vi in out.graph.input:
        if vi.name in shapes and vi.type.HasField("tensor_type"):
            vi.type.tensor_type.ClearField("shape")
            vi.type.tensor_type.shape.SetInParent()
            for d in shapes[vi.name]:
                vi.type.tensor_type.shape.dim.add().dim_value = int(d)
    return out


def concrete_shapes(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """The shape of each main-graph tensor for these input shapes, where inference can tell.

    onnx's inference only: onnxruntime's symbolic shape inference resolves more of an exported
    transformer (Slice, Expand, Range chains) but imports sympy, 2-4 s, more than it would save. onnx
    propagates the values of shape computations (Shape -> Slice -> Concat -> Reshape) only through the
    op versions of opset 14 and later (Slice-13, Concat-13, Unsqueeze-13, Add-14...; older versions have
    no data-propagation function): a model of an older opset whose shapes stop at such a chain is read
    again converted to opset 14 by onnx's version converter, which fills the gaps (measured on PP-OCRv4
    rec, opset 12: 720 -> 875 of 875 tensors, +12 ms); what the model's own opset inferred is kept."""
    return shapes_with_folded(model, shapes)[0]


def shapes_with_folded(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]],
                       fold: bool = False) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]:
    """(``concrete_shapes``, the shapes that only folding the model's shape computations into constants
    tells: ``graph.shape_values``, with ``fold``; up to three rounds, each one more inference)."""
    from onnxprobe.graph.builder import default_opset
    from onnxprobe.graph.skeleton import skeleton

    sk = with_input_shapes(skeleton(model, constants=True), shapes)
    out = _concrete(infer_shapes(sk, []))
    missing = (lambda known: any(o not in known for n in model.graph.node for o in n.output if o))  # noqa: E731
    if default_opset(model) < DATA_PROP_OPSET and missing(out):
        from onnx import version_converter

        try:
            newer = version_converter.convert_version(sk, DATA_PROP_OPSET)
        except Exception:  # noqa: BLE001 - an op without an adapter, a custom domain...: the gaps stay
            newer = None
        if newer is not None:
            for name, s in _concrete(infer_shapes(newer, [])).items():
                out.setdefault(name, s)
    more: dict[str, tuple[int, ...]] = {}
    if fold:
        from onnxprobe.graph.shape_values import fold_shape_values

        current = sk
        for _ in range(3):
            if not missing({**out, **more}):
                break
            current = fold_shape_values(current, {**out, **more})
            if current is None:
                break
            found = {k: v for k, v in _concrete(infer_shapes(current, [])).items() if k not in out and k not in more}
            if not found:
                break
            more.update(found)
    return out, more


DATA_PROP_OPSET = 14  # the first opset whose shape-computation ops all propagate values in onnx's inference


def _concrete(inferred: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    out = {}
    for name, t in value_types(inferred).items():
        s = static_shape(t)
        if s is not None and all(isinstance(d, int) for d in s):
            out[name] = tuple(s)
    return out


def shape_bytes(t: onnx.TypeProto | None, shape: tuple[int, ...]) -> int | None:
    """Bytes of a tensor of type ``t`` and this concrete shape; None for an element type numpy lacks (or a
    dim that is not a number)."""
    import numpy as np

    try:
        item = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type)).itemsize
    except Exception:  # noqa: BLE001 - no type, strings, float8...
        return None
    n = element_count(shape)
    return None if n is None else n * item


def concrete_sizes(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]],
                   concrete: dict[str, tuple[int, ...]] | None = None) -> dict[str, int]:
    """Bytes of each main-graph tensor for these input shapes, where inference can tell (for budgets; an
    element type numpy lacks counts 4 bytes an element). ``concrete``: ``concrete_shapes``'s answer, when
    the caller has it already."""
    types = value_types(model)
    return {name: n if (n := shape_bytes(types.get(name), s)) is not None else (element_count(s) or 0) * 4
            for name, s in (concrete if concrete is not None else concrete_shapes(model, shapes)).items()}
