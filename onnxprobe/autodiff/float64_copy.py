"""The float64 copy of a model that the gradient check runs (``autodiff.check``).

``to_float64(model)`` turns every float32 and float16 tensor of the graph and of its If / Loop / Scan bodies (nested
ones too) into float64 (initializers, Constant values, Cast targets, inputs, outputs, a body's value_info), leaving
alone the few slots that must stay float32 (Resize scales). onnxruntime has no double kernel for many ops (Conv,
pooling, Erf...); the caller falls back to float32 when the session cannot be built. Some double kernels compute in
float32 all the same, which a float64 finite difference reads as a wrong gradient: LayerNormalization (float32
statistics) and Shrink (its input cast to float) are written out in double ops, GroupNormalization-21 gets
stash_type double (its float32 default rounded its statistics).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxprobe.graph.builder import opset_version
from onnxprobe.graph.tensor_data import to_array
from onnxprobe.graph.walk import all_graphs

PROMOTED = (TensorProto.FLOAT, TensorProto.FLOAT16)  # the float types the float64 copy computes in double
FLOAT32_SLOTS = {("Resize", 2), ("Resize", 1), ("Upsample", 1)}  # (Resize opset 10: scales is input 1)


def to_float64(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    _expand_layer_norms(out)
    for g in all_graphs(out.graph):
        _double_kernels(g, opset_version(out, "", 1))
    keep32: set[str] = set()  # over every graph: a body's Resize may read its scales from an outer scope
    for g in all_graphs(out.graph):
        for n in g.node:
            for k, i in enumerate(n.input):
                if (n.op_type, k) in FLOAT32_SLOTS and i:
                    keep32.add(i)
    for g in all_graphs(out.graph):
        _graph_to_float64(g, keep32)
    # the main graph's value_info is kept, converted as the bodies' is: the shapes learned from a run (a Loop's
    # carried output, which onnx's inference leaves without a rank) are what the float64 backward graph sums
    # back to; dropped, the check of any model with a Loop fell back to float32 gradients
    return out


def _graph_to_float64(g: onnx.GraphProto, keep32: set[str]) -> None:
    """One graph's float32 and float16 initializers, Constants, Cast targets, inputs, outputs and value_info (a
    body's are its own: its inputs and outputs must match the types its Loop / Scan / If passes). float16 is
    promoted as float32 is: finite differences in half precision drown in its rounding, in float64 they check
    the rules."""
    for init in g.initializer:
        if init.data_type in PROMOTED and init.name not in keep32:
            a = to_array(init).astype(np.float64)
            init.CopyFrom(numpy_helper.from_array(a, init.name))
    for n in g.node:
        if n.op_type == "Constant" and n.output and n.output[0] not in keep32:
            for a in n.attribute:
                if a.name == "value" and a.t.data_type in PROMOTED:
                    a.t.CopyFrom(numpy_helper.from_array(to_array(a.t).astype(np.float64), a.t.name))
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
            if n.op_type == "Cast" and a.name == "to" and a.i in PROMOTED and n.output[0] not in keep32:
                a.i = TensorProto.DOUBLE
            if n.op_type in ("ConstantOfShape",) and a.name == "value" and a.t.data_type in PROMOTED:
                a.t.CopyFrom(numpy_helper.from_array(to_array(a.t).astype(np.float64)))
            if n.op_type in ("EyeLike", "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike") \
                    and a.name == "dtype" and a.i in PROMOTED:
                a.i = TensorProto.DOUBLE
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type in PROMOTED and vi.name not in keep32:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE


def _expand_layer_norms(model: onnx.ModelProto) -> None:
    """onnxruntime has no LayerNormalization kernel whose statistics are float64: write it out with
    ReduceMean / Sub / Mul / Sqrt / Div, which all have double kernels (Mean and InvStdDev included), in
    the main graph and in every If / Loop / Scan body (innermost first: a graph's nodes are rewritten by
    copy, its bodies with them)."""
    from onnxprobe.graph.shapes import value_types

    graphs = [g for g in all_graphs(model.graph) if any(n.op_type == "LayerNormalization" for n in g.node)]
    if not graphs:
        return
    types, opset = value_types(model), opset_version(model, "", 1)
    for g in reversed(graphs):  # (all_graphs yields every graph before its bodies)
        _expand_in(g, types, opset)


def _expand_in(g: onnx.GraphProto, types: dict, opset: int) -> None:
    from onnxprobe.graph.shapes import static_shape

    nodes = []
    for n in g.node:
        if n.op_type != "LayerNormalization":
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

        def mk(op, ins, out, role=None, **kw):  # a node writing one of the node's outputs named by its role: the
            # output's own name may be an inner one's ('mean', 'var'), and two nodes of one name make no model
            nodes.append(helper.make_node(op, ins, [out], name=f"{p}/{role or out.rsplit('/', 1)[-1]}", **kw))
            return out

        # one Constant of the axes for both means: two Constants writing one name left onnx's shape inference
        # without the axes, so the expansion's tensors had no rank and the float64 backward graph could not sum
        # a gradient back to them (grad --check on GPT-2's dynamo export fell back to float32 gradients)
        ax = mk("Constant", [], f"{p}/axes", value=numpy_helper.from_array(np.array(axes, np.int64))) if opset >= 18 else None

        def mean(t, out):
            if ax is not None:
                return mk("ReduceMean", [t, ax], out, keepdims=1)
            return mk("ReduceMean", [t], out, axes=axes, keepdims=1)

        outs = list(n.output) + ["", ""]
        mu = mean(x, f"{p}/mean")  # the optional Mean and InvStdDev outputs too (in float64, not
        # in the float32 stash type, which made Add(float, double) for y = o + isd); the Mean output a copy of the mean
        # Y reads, not that tensor itself: --check perturbs what reads an output, and moving the mean Y subtracts with
        # it measured another function (a right dL/dMean FAILed)
        if outs[1]:
            mk("Identity", [mu], outs[1], role="Mean.out")
        xc = mk("Sub", [x, mu], f"{p}/xc")
        var = mean(mk("Mul", [xc, xc], f"{p}/sq"), f"{p}/var")
        e = mk("Constant", [], f"{p}/eps", value=numpy_helper.from_array(np.array(eps, np.float32)))
        sd = mk("Sqrt", [mk("Add", [var, e], f"{p}/var_eps")], f"{p}/std")
        biased = len(n.input) > 2 and n.input[2]
        y = mk("Mul", [mk("Div", [xc, sd], f"{p}/xhat"), n.input[1]], f"{p}/scaled" if biased else n.output[0],
               role=None if biased else "Y.out")
        if biased:
            mk("Add", [y, n.input[2]], n.output[0], role="Y.out")
        if outs[2]:  # read by nothing inside: its own node already
            mk("Reciprocal", [sd], outs[2], role="InvStdDev.out")
    del g.node[:]
    g.node.extend(nodes)



def _double_kernels(g: onnx.GraphProto, opset: int) -> None:
    """The ops whose double kernel rounds to float32, in graph ``g``: Shrink written out (Where / Less / Greater /
    Add / Sub, each with a double kernel; lambd and bias, float attributes, taken at their float32 values as the model
    has them), GroupNormalization's stash_type set to double."""
    nodes = []
    for n in g.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if n.op_type == "GroupNormalization":  # (opset 18's has no stash_type: it computes in the input's type)
            kept = [a for a in n.attribute if a.name != "stash_type"]
            if len(kept) < len(n.attribute) or opset >= 21:
                del n.attribute[:]
                n.attribute.extend(kept + [helper.make_attribute("stash_type", TensorProto.DOUBLE)])
        if n.op_type != "Shrink":
            nodes.append(n)
            continue
        p, x, y = f"{n.name or n.output[0]}/onnxprobe.expanded", n.input[0], n.output[0]
        lambd, bias = float(np.float32(attrs.get("lambd", 0.5))), float(np.float32(attrs.get("bias", 0.0)))

        def mk(op, ins, out, **kw):
            nodes.append(helper.make_node(op, ins, [out], name=f"{p}/{out.rsplit('/', 1)[-1]}", **kw))
            return out

        def const(v, out):
            return mk("Constant", [], out, value=numpy_helper.from_array(np.array(v, np.float64)))

        lo, hi, b, zero = const(-lambd, f"{p}/lo"), const(lambd, f"{p}/hi"), const(bias, f"{p}/bias"), const(0.0, f"{p}/zero")
        upper = mk("Where", [mk("Greater", [x, hi], f"{p}/above"), mk("Sub", [x, b], f"{p}/minus"), zero], f"{p}/upper")
        mk("Where", [mk("Less", [x, lo], f"{p}/below"), mk("Add", [x, b], f"{p}/plus"), upper], y)
    del g.node[:]
    g.node.extend(nodes)
