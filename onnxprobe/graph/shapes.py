"""Shape inference that degrades with a warning instead of failing.

``infer_shapes(model)`` returns a new model with ``value_info`` filled in by onnx's shape inference
(data propagation on). If inference fails — an exotic op, a custom domain, a >2 GB model — it tries the
non-strict mode, then gives up and returns an unannotated copy; each step down adds a warning.
"""

from __future__ import annotations

import onnx
from onnx import shape_inference

from onnxprobe.graph.io import is_large


def infer_shapes(model: onnx.ModelProto, warnings: list[str] | None = None) -> onnx.ModelProto:
    warnings = warnings if warnings is not None else []
    if is_large(model):
        return _infer_large(model, warnings)
    for strict in (True, False):
        try:
            return shape_inference.infer_shapes(model, check_type=False, strict_mode=strict, data_prop=True)
        except Exception as e:  # noqa: BLE001 - any failure degrades
            err = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    warnings.append(f"shape inference failed ({err[:200]}); shapes come from the run only")
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def _infer_large(model: onnx.ModelProto, warnings: list[str]) -> onnx.ModelProto:
    """Models over 2 GB cannot be serialised in one piece: infer on a copy without weight data."""
    skeleton = onnx.ModelProto()
    skeleton.CopyFrom(model)
    for init in skeleton.graph.initializer:
        init.ClearField("raw_data")
        for f in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
            init.ClearField(f)
    try:
        inferred = shape_inference.infer_shapes(skeleton, check_type=False, strict_mode=False, data_prop=False)
    except Exception as e:  # noqa: BLE001
        warnings.append(f"shape inference failed on the large model ({str(e)[:200]}); shapes come from the run only")
        out = onnx.ModelProto()
        out.CopyFrom(model)
        return out
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.value_info[:]
    out.graph.value_info.extend(inferred.graph.value_info)
    return out


def value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """Every known tensor type in the model, subgraphs included, keyed by tensor name."""
    types: dict[str, onnx.TypeProto] = {}

    def visit(g: onnx.GraphProto) -> None:
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                types.setdefault(vi.name, vi.type)
        for init in g.initializer:
            t = onnx.helper.make_tensor_type_proto(init.data_type, list(init.dims))
            types.setdefault(init.name, t)
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    visit(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    for sg in a.graphs:
                        visit(sg)

    visit(model.graph)
    return types


def dtype_name(elem_type: int) -> str | None:
    """numpy-style dtype name for an ONNX elem type (bfloat16 and float8 types keep their ONNX name)."""
    if not elem_type:
        return None
    try:
        return str(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:  # noqa: BLE001
        return onnx.TensorProto.DataType.Name(elem_type).lower()


def static_shape(t: onnx.TypeProto | None) -> tuple | None:
    """(1, 'batch', None, ...) from a TypeProto; None when the rank is unknown."""
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    dims = []
    for d in t.tensor_type.shape.dim:
        if d.HasField("dim_value") and d.dim_value >= 0:  # some exporters write -1 for "dynamic"
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return tuple(dims)



def with_input_shapes(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> onnx.ModelProto:
    """A copy whose graph inputs have these concrete shapes, for shape inference to propagate them."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.value_info[:]
    for vi in out.graph.input:
        if vi.name in shapes and vi.type.HasField("tensor_type"):
            vi.type.tensor_type.ClearField("shape")
            vi.type.tensor_type.shape.SetInParent()
            for d in shapes[vi.name]:
                vi.type.tensor_type.shape.dim.add().dim_value = int(d)
    return out


def concrete_sizes(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> dict[str, int]:
    """Bytes of each main-graph tensor for these input shapes, where inference can tell (for budgets)."""
    import numpy as np

    warnings: list[str] = []
    types = value_types(infer_shapes(with_input_shapes(model, shapes), warnings))
    sizes = {}
    for name, t in types.items():
        s = static_shape(t)
        if s is None or not all(isinstance(d, int) for d in s):
            continue
        try:
            item = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type)).itemsize
        except Exception:  # noqa: BLE001
            item = 4
        sizes[name] = int(np.prod(s)) * item
    return sizes
