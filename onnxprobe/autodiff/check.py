"""Graph rewrites for the finite-difference gradient check (the check itself runs in ``api.grad_check``).

``perturbable(model, loss, tensors)`` returns the forward + loss graph with one new input per checked
tensor t, ``onnxprobe.delta:<t>``, added to t before anything reads it (t' = t + delta), and the loss as
its only output: L(t + h v) is one run with delta = h v.

``to_float64(model)`` turns every float32 tensor of the graph into float64 (initializers, Constant
values, Cast targets, inputs and outputs), leaving alone the few slots that must stay float32 (Resize
scales). onnxruntime has no double kernel for many ops (Conv, pooling, Erf...); the caller falls back to
float32 when the session cannot be built.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxprobe.graph.walk import implicit_inputs

DELTA = "onnxprobe.delta:"
FLOAT32_SLOTS = {("Resize", 2), ("Resize", 1), ("Upsample", 1)}  # (Resize opset 10: scales is input 1)


def perturbable(model: onnx.ModelProto, loss: str, tensors: dict[str, tuple[int, list]]) -> onnx.ModelProto:
    """``tensors``: name -> (elem type, runtime shape)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    renamed = {t: f"{t}{'.perturbed'}" for t in tensors}
    for n in g.node:
        for k, i in enumerate(n.input):
            if i in renamed:
                n.input[k] = renamed[i]
    new_nodes = []
    for t, (elem, shape) in tensors.items():
        d = DELTA + t
        g.input.append(helper.make_tensor_value_info(d, elem, list(shape)))
        new_nodes.append(helper.make_node("Add", [t, d], [renamed[t]], name=f"onnxprobe.check/{t}"))
    # the Adds go right after the producers: put them first and let a topological sort place them
    nodes = list(g.node) + new_nodes
    del g.node[:]
    g.node.extend(_toposort(nodes, {i.name for i in g.input} | {i.name for i in g.initializer}))
    del g.output[:]
    g.output.append(helper.make_tensor_value_info(loss, 0, None))
    g.output[0].type.tensor_type.elem_type = _elem(model, loss) or TensorProto.FLOAT
    return out


def _elem(model: onnx.ModelProto, name: str) -> int | None:
    for vi in list(model.graph.value_info) + list(model.graph.output):
        if vi.name == name:
            return vi.type.tensor_type.elem_type
    return None


def _toposort(nodes: list, available: set[str]) -> list:
    avail = set(available) | {""}
    out, pending = [], list(nodes)
    while pending:
        rest = []
        for n in pending:
            if all(i in avail for i in n.input) and all(i in avail for i in implicit_inputs(n)):
                out.append(n)
                avail.update(n.output)
            else:
                rest.append(n)
        if len(rest) == len(pending):  # unresolved outer-scope names: keep the original order
            out.extend(rest)
            break
        pending = rest
    return out


def to_float64(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    _expand_layer_norms(out)
    keep32: set[str] = set()
    for n in g.node:
        for k, i in enumerate(n.input):
            if (n.op_type, k) in FLOAT32_SLOTS and i:
                keep32.add(i)
    for init in g.initializer:
        if init.data_type == TensorProto.FLOAT and init.name not in keep32:
            a = numpy_helper.to_array(init).astype(np.float64)
            init.CopyFrom(numpy_helper.from_array(a, init.name))
    for n in g.node:
        if n.op_type == "Constant" and n.output and n.output[0] not in keep32:
            for a in n.attribute:
                if a.name == "value" and a.t.data_type == TensorProto.FLOAT:
                    a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float64), a.t.name))
                elif a.name == "value_float":
                    v = a.f
                    n.ClearField("attribute")
                    n.attribute.append(helper.make_attribute("value", numpy_helper.from_array(np.array(v, np.float64))))
                    break
                elif a.name == "value_floats":
                    v = list(a.floats)
                    n.ClearField("attribute")
                    n.attribute.append(helper.make_attribute("value", numpy_helper.from_array(np.array(v, np.float64))))
                    break
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT and n.output[0] not in keep32:
                a.i = TensorProto.DOUBLE
            if n.op_type in ("ConstantOfShape",) and a.name == "value" and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float64)))
            if n.op_type in ("EyeLike", "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike") \
                    and a.name == "dtype" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.DOUBLE
    for vi in list(g.input) + list(g.output):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT and vi.name not in keep32:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    del g.value_info[:]
    return out


def _expand_layer_norms(model: onnx.ModelProto) -> None:
    """onnxruntime has no LayerNormalization kernel whose statistics are float64: write it out with
    ReduceMean / Sub / Mul / Sqrt / Div, which all have double kernels."""
    from onnxprobe.graph.shapes import static_shape, value_types

    g = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    if not any(n.op_type == "LayerNormalization" for n in g.node):
        return
    types = value_types(model)
    nodes = []
    for n in g.node:
        if n.op_type != "LayerNormalization" or any(o for o in n.output[1:]):
            nodes.append(n)
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        axis, eps = attrs.get("axis", -1), attrs.get("epsilon", 1e-5)
        if axis < 0:
            axes = list(range(axis, 0))
        else:
            shp = static_shape(types.get(n.input[0]))
            if shp is None:
                nodes.append(n)
                continue
            axes = list(range(axis, len(shp)))
        p = f"{n.name or n.output[0]}/onnxprobe.expanded"
        x = n.input[0]

        def mk(op, ins, out, **kw):
            nodes.append(helper.make_node(op, ins, [out], name=f"{p}/{out.rsplit('/', 1)[-1]}", **kw))
            return out

        def mean(t, out):
            if opset >= 18:
                ax = mk("Constant", [], f"{p}/axes", value=numpy_helper.from_array(np.array(axes, np.int64)))
                return mk("ReduceMean", [t, ax], out, keepdims=1)
            return mk("ReduceMean", [t], out, axes=axes, keepdims=1)

        mu = mean(x, f"{p}/mean")
        xc = mk("Sub", [x, mu], f"{p}/xc")
        var = mean(mk("Mul", [xc, xc], f"{p}/sq"), f"{p}/var")
        e = mk("Constant", [], f"{p}/eps", value=numpy_helper.from_array(np.array(eps, np.float32)))
        sd = mk("Sqrt", [mk("Add", [var, e], f"{p}/var_eps")], f"{p}/std")
        y = mk("Mul", [mk("Div", [xc, sd], f"{p}/xhat"), n.input[1]], f"{p}/scaled" if len(n.input) > 2 and n.input[2] else n.output[0])
        if len(n.input) > 2 and n.input[2]:
            mk("Add", [y, n.input[2]], n.output[0])
    del g.node[:]
    g.node.extend(nodes)
