"""Forward-graph rewrites made before differentiating, so that the backward graph is smaller and the
forward part runs as fast as onnxruntime runs the plain model.

``fold_batchnorm``: an inference BatchNormalization right after a Conv is an affine map per output
channel, y = a conv(x, W, b) + (beta - a mean) with a = scale / sqrt(var + eps), so it is the Conv
conv(x, W_f, b_f) with W_f = W a and b_f = (b - mean) a + beta. The rewrite computes W_f and b_f with
graph nodes from the original tensors, so the gradients of W, b, scale, beta, mean and var still come
out (through these few small nodes, by the ordinary rules), while the backward pass saves the
BatchNormalization's per-element work (dy a, sum(dy xhat)) and never needs the Conv's raw output; the
forward Conv then fuses with what follows it as in the plain model (onnxruntime folds the same way).
A Conv output that is asked for (``keep``), is a graph output or is read by anything else is left alone.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxprobe.graph.shapes import static_shape
from onnxprobe.graph.walk import all_graphs

TAG = "onnxprobe.fold/"


def _attr(n: onnx.NodeProto, name: str, default=None):
    for a in n.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _uses(g: onnx.GraphProto) -> dict[str, int]:
    """How many times each tensor is read, subgraph reads of outer names included."""
    count: dict[str, int] = {}
    for graph in all_graphs(g):
        for n in graph.node:
            for i in n.input:
                if i:
                    count[i] = count.get(i, 0) + 1
    for o in g.output:
        count[o.name] = count.get(o.name, 0) + 1
    return count


# Folded, the BatchNormalization's gradients cost weight-sized work (dW = dW_f a, da = sum(dW_f W): about
# four passes over W); unfolded, activation-sized work (the forward BatchNormalization, dy a, sum(dy xhat),
# sum(dy): about eight passes over the Conv output, and the Conv no longer fuses with it). Late layers of
# ResNet-like models have far more weights than outputs (3x3x512x512 against 512x7x7): there, folding makes
# forward+backward ~10% slower on ResNet-18 (bench/grad.py), so those pairs stay apart.
FOLD_MAX_WEIGHTS_PER_OUTPUT = 2.0


def _weights_dominate(w_shape, y_shape) -> bool:
    """True when the Conv has more than FOLD_MAX_WEIGHTS_PER_OUTPUT weights per output element (known
    shapes only)."""
    if w_shape is None or y_shape is None or not all(isinstance(v, int) for v in list(w_shape) + list(y_shape)):
        return False
    return int(np.prod(w_shape)) > FOLD_MAX_WEIGHTS_PER_OUTPUT * int(np.prod(y_shape))


def fold_batchnorm(model: onnx.ModelProto, types: dict[str, onnx.TypeProto], keep: set[str], opset: int,
                   fresh, wrt: set[str] = frozenset()) -> int:
    """Fold every eligible Conv -> BatchNormalization pair of the main graph, in place. ``types``: the
    tensor types (shapes where known); ``fresh(base)`` returns an unused name; ``wrt``: the tensors whose
    gradients are wanted. Returns the number folded.

    A pair is left alone when a BatchNormalization parameter's gradient is wanted but the Conv weight's is
    not: folded, those gradients go through dW_f, a whole weight gradient (costly for depthwise Convs),
    where the BatchNormalization rule needs two sums over dy."""
    if opset < 7:
        return 0
    g = model.graph
    uses = _uses(g)
    nodes_in = list(g.node)
    producer = {o: k for k, n in enumerate(nodes_in) for o in n.output if o}
    outputs = {o.name for o in g.output}
    elem = {k: (t.tensor_type.elem_type if t.HasField("tensor_type") else 0) for k, t in types.items()}
    replace: dict[int, list[onnx.NodeProto]] = {}  # node index -> the nodes that take its place
    drop: set[int] = set()
    new_types: list[onnx.ValueInfoProto] = []
    for ib, bn in enumerate(nodes_in):
        if bn.op_type != "BatchNormalization" or bn.domain not in ("", "ai.onnx") or len(bn.input) < 5:
            continue
        if _attr(bn, "training_mode", 0) or _attr(bn, "spatial", 1) != 1 or sum(1 for o in bn.output if o) != 1:
            continue
        x = bn.input[0]
        ic = producer.get(x)
        conv = nodes_in[ic] if ic is not None else None
        if conv is None or ic in drop or conv.op_type != "Conv" or conv.domain not in ("", "ai.onnx") or len(conv.output) != 1:
            continue
        if uses.get(x, 0) != 1 or x in outputs or x in keep:
            continue
        w = conv.input[1]
        if w not in wrt and any(p in wrt for p in bn.input[1:5]):
            continue
        ws = static_shape(types.get(w))
        t = elem.get(x)
        if ws is None or not t or any(elem.get(p) != t for p in list(bn.input[1:5]) + [w]):
            continue
        if w in wrt and _weights_dominate(ws, static_shape(types.get(x))):
            continue
        if len(conv.input) > 2 and conv.input[2] and elem.get(conv.input[2]) != t:
            continue
        nodes, doc = [], f"onnxprobe: BatchNormalization {bn.name or bn.output[0]} folded into Conv {conv.name or x}"
        base = f"{TAG}{bn.name or bn.output[0]}"

        def op(op_type: str, *ins: str, shape=(ws[0],)) -> str:
            out = fresh(f"{base}/{op_type.lower()}")
            nodes.append(helper.make_node(op_type, list(ins), [out], name=fresh(f"{base}/{op_type}"), doc_string=doc))
            new_types.append(helper.make_tensor_value_info(out, t, list(shape)))
            return out

        def const(v) -> str:
            out = fresh(f"{base}/const")
            nodes.append(helper.make_node("Constant", [], [out], name=fresh(f"{base}/Constant"), doc_string=doc,
                                          value=numpy_helper.from_array(v, out)))
            new_types.append(helper.make_tensor_value_info(out, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)))
            return out

        np_t = np.dtype(helper.tensor_dtype_to_np_dtype(t))
        scale, beta, mean, var = bn.input[1:5]
        eps = float(_attr(bn, "epsilon", 1e-5))
        a = op("Mul", scale, op("Reciprocal", op("Sqrt", op("Add", var, const(np.array(eps, np_t))))))
        a_col = op("Reshape", a, const(np.array([-1] + [1] * (len(ws) - 1), np.int64)), shape=[ws[0]] + [1] * (len(ws) - 1))
        w_f = op("Mul", w, a_col, shape=ws)
        if len(conv.input) > 2 and conv.input[2]:
            b_f = op("Add", op("Mul", op("Sub", conv.input[2], mean), a), beta)
        else:
            b_f = op("Sub", beta, op("Mul", mean, a))
        folded = onnx.NodeProto()
        folded.CopyFrom(conv)
        del folded.input[:]
        folded.input.extend([conv.input[0], w_f, b_f])
        folded.output[0] = bn.output[0]
        folded.doc_string = doc
        nodes.append(folded)
        replace[ib] = nodes
        drop.add(ic)
    if not replace:
        return 0
    new_nodes: list[onnx.NodeProto] = []
    for k, n in enumerate(nodes_in):
        if k not in drop:
            new_nodes.extend(replace.get(k, [n]))
    kept = [onnx.NodeProto() for _ in new_nodes]
    for c, n in zip(kept, new_nodes):
        c.CopyFrom(n)
    del g.node[:]
    g.node.extend(kept)
    g.value_info.extend(new_types)
    return len(replace)
