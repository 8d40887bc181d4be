"""``diff --grad``: weights that one model folds and the other keeps apart (a BatchNormalization folded into
the layer before it, a bias added with an Add after a layer or held in the layer's bias input). Such
weights are other functions of the data, or have no counterpart of their name and shape: a pair filter
refuses what matched them anyway (``folded_weights``), and ``explain_folded`` gives the unmatched ones
cause FOLDED with the reason, which the verdict does not count as missing."""

from __future__ import annotations

import onnx

from onnxprobe.autodiff.select import weights
from onnxprobe.graph.constants import constants
from onnxprobe.graph.tensor_data import tensor_values
from onnxprobe.graph.walk import slot_readers
from onnxprobe.match.engine import DIFFERENT_FUNCTION, FOLDED, NO_COUNTERPART
from onnxprobe.types import element_count, forward_name


def folded_weights(a: onnx.ModelProto, b: onnx.ModelProto):
    """A pair filter for weight gradients: a weight whose layer feeds a BatchNormalization in one model but
    not in the other (the BatchNormalization folded into it) is another function of the data there, and
    its gradient too: such pairs are refused, whatever matched them (node names, structure)."""
    def feeds_bn(model: onnx.ModelProto) -> dict[str, bool]:
        readers = _readers_past_qdq(model)
        out = {}
        for n in model.graph.node:
            for w in n.input[1:]:
                out.setdefault(w, any(c.op_type == "BatchNormalization" and c.input and c.input[0] == t
                                      for t, c in readers(n.output[0])) if n.output else False)
        return out

    bn_a, bn_b = feeds_bn(a), feeds_bn(b)

    def reject(pair) -> str | None:
        if not (pair.a.effective_op.endswith(" weight") and pair.b.effective_op.endswith(" weight")):
            return None
        fa, fb = bn_a.get(forward_name(pair.a.name) or ""), bn_b.get(forward_name(pair.b.name) or "")
        if fa is None or fb is None or fa == fb:
            return None
        folded, plain = ("A", "B") if fb else ("B", "A")
        return (f"a BatchNormalization is folded into this layer's weight in {folded} but follows it in {plain}: "
                "the two weights are different functions of the data, and so are their gradients", FOLDED)

    return reject


FOLDABLE = ("Conv", "ConvTranspose", "Gemm", "MatMul")  # the layers exporters fold a BatchNormalization into


FUSED_LAYERS = ("FusedConv", "FusedGemm", "FusedMatMul")  # onnxruntime's, with their layer's inputs in its slots


def _foldable(op: str) -> bool:
    """A layer of FOLDABLE, or onnxruntime's fusion of one (an optimized copy folds a BatchNormalization into
    the Conv and fuses the activation after it in the same pass: a FusedConv holds the folded weights). Not
    QLinearConv and the like: their inputs 1.. are scales and zero points, not weights."""
    return op in FOLDABLE or op in FUSED_LAYERS


def _readers_past_qdq(model: onnx.ModelProto):
    """A function: tensor -> [(the tensor a node reads, that node)] for the nodes reading it, directly or
    through a QuantizeLinear -> DequantizeLinear pair (a QDQ model quantizes a layer's output before the
    BatchNormalization or Add that follows it: the layer is followed by them all the same)."""
    consumers: dict[str, list] = {}
    for n in model.graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)

    def readers(t: str) -> list:
        out = []
        for c in consumers.get(t, []):
            if c.op_type == "QuantizeLinear" and c.input[0] == t and c.output:
                out += [r for dq in consumers.get(c.output[0], []) if dq.op_type == "DequantizeLinear" and dq.output
                        for r in readers(dq.output[0])]
            else:
                out.append((t, c))
        return out

    return readers


def _producer_past_qdq(model: onnx.ModelProto):
    """A function: tensor -> the node that computes it, looking back through DequantizeLinear <- QuantizeLinear."""
    producer = {o: n for n in model.graph.node for o in n.output if o}

    def of(t: str):
        p = producer.get(t)
        q = producer.get(p.input[0]) if p is not None and p.op_type == "DequantizeLinear" and p.input else None
        if q is not None and q.op_type == "QuantizeLinear" and q.input:
            return of(q.input[0])
        return p

    return of


def _bias_adds(model: onnx.ModelProto) -> dict[str, str]:
    """Weight -> the Add that adds it to a layer's output (Conv, Gemm, MatMul; through Q/DQ): a bias one
    exporter writes as an Add after the layer and another (or onnxruntime's ConvAddFusion) folds into
    the layer's own bias input."""
    producer = _producer_past_qdq(model)
    weights_here = set(weights(model)) | {n.output[0] for n in model.graph.node
                                           if n.op_type == "DequantizeLinear" and n.output}
    made = {o: n for n in model.graph.node for o in n.output if o}

    def weight_of(t: str) -> str | None:
        """The weight ``t`` is, or a reshaped copy of (Paddle: Add(conv, Reshape(offset, [1, C, 1, 1])))."""
        for _ in range(8):
            if t in weights_here:
                return t
            n = made.get(t)
            if n is None or n.op_type not in RESHAPES or not n.input:
                return None
            t = n.input[0]
        return None

    out = {}
    for k, n in enumerate(model.graph.node):
        if n.op_type != "Add" or len(n.input) != 2:
            continue
        for t, b in (n.input, n.input[::-1]):
            p, w = producer(t), weight_of(b)
            if w is not None and p is not None and _foldable(p.op_type):
                out.setdefault(w, n.name or f"Add_{k}")
    return out


RESHAPES = ("Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity")  # a weight's values, in another shape


def _bn_after_layers(model: onnx.ModelProto) -> tuple[dict[str, str], dict[str, str]]:
    """(weight of a layer a BatchNormalization reads the output of -> that BatchNormalization,
    the BatchNormalization's own parameters -> it): what one exporter keeps where another folds."""
    producer = _producer_past_qdq(model)
    layer, own = {}, {}
    for k, n in enumerate(model.graph.node):
        p = producer(n.input[0]) if n.op_type == "BatchNormalization" and n.input else None
        if p is not None and _foldable(p.op_type):
            name = n.name or f"BatchNormalization_{k}"
            for w in p.input[1:]:
                layer.setdefault(w, name)
            for w in n.input[1:]:
                own.setdefault(w, name)
    return layer, own


def explain_folded(matching, a: onnx.ModelProto, b: onnx.ModelProto) -> None:
    """Weight gradients left without a counterpart because one model has a BatchNormalization after a layer
    that the other folded into that layer's weights (legacy torch.onnx.export folds Conv+BN, dynamo may
    not, or the other way round): a known export folding, not a missing weight. In the model that keeps
    the BatchNormalization, its parameters and its layer's weights; in the other, the weights of a layer no
    BatchNormalization follows that have the shape of one of those (the folded weight and bias). Their
    cause becomes FOLDED, which the verdict does not count as unpaired."""
    _explain_bias_adds(matching, a, b)  # first: a layer's bias of the shape of a BatchNormalization's parameters
    _explain_constant_folds(matching, a, b)
    _explain_zero_biases(matching, a, b)
    (la, oa), (lb, ob) = _bn_after_layers(a), _bn_after_layers(b)
    na, nb = len(set(oa.values())), len(set(ob.values()))
    if na == nb:
        return
    keeps, folds = ("A", "B") if na > nb else ("B", "A")
    layer, own = (la, oa) if na > nb else (lb, ob)
    y_layer = lb if na > nb else la
    ux, uy = (matching.unmatched_a, matching.unmatched_b) if na > nb else (matching.unmatched_b, matching.unmatched_a)
    shapes = set()
    for u in ux:
        w = forward_name(u.obs.name) or ""
        if not (u.obs.effective_op.endswith(" weight") and u.cause in (NO_COUNTERPART, FOLDED)):
            continue
        if w in own or w in layer:
            shapes.add(u.obs.shape)
        if u.cause != NO_COUNTERPART:
            continue
        if w in own:
            u.reason = (f"a parameter of the BatchNormalization {own[w]} of {keeps}, which {folds} folds into the layer "
                        f"before it ({max(na, nb)} BatchNormalization(s) after a layer in {keeps}, {min(na, nb)} in "
                        f"{folds}): no weight of {folds} holds it alone")
            u.cause = FOLDED
        elif w in layer:
            u.reason = (f"the weight of a layer the BatchNormalization {layer[w]} follows in {keeps}; {folds} folds it "
                        "into the layer's weights: another function of the data, and so is its gradient")
            u.cause = FOLDED
    for u in uy:
        w = forward_name(u.obs.name) or ""
        if (u.cause == NO_COUNTERPART and u.obs.effective_op.endswith(" weight") and _foldable(u.obs.op_type)
                and w not in y_layer and u.obs.shape in shapes):
            u.reason = (f"a weight of a layer no BatchNormalization follows in {folds}, where {keeps} has one after "
                        f"the layer ({max(na, nb)} BatchNormalization(s) after a layer in {keeps}, {min(na, nb)} in "
                        f"{folds}): it holds the BatchNormalization folded in, another function of the data than "
                        f"{keeps}'s weights, and so is its gradient")
            u.cause = FOLDED


def _constant_sources(model: onnx.ModelProto):
    """A function: tensor -> (the node computing it, the weights it is computed from: initializers and
    Constant outputs) when ``model`` computes it from those alone (a Transpose of a weight, a Reshape of
    one...); else None."""
    producer = {o: n for n in model.graph.node for o in n.output if o}
    inits = {t.name for t in model.graph.initializer}
    body = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)

    def of(tensor: str) -> tuple | None:
        if tensor not in producer or producer[tensor].op_type == "Constant":
            return None
        sources, seen, todo = [], set(), [tensor]
        while todo:
            t = todo.pop()
            if t in seen or not t:
                continue
            seen.add(t)
            n = producer.get(t)
            if t in inits or (n is not None and n.op_type == "Constant"):
                sources.append(t)
            elif n is not None and not any(a.type in body for a in n.attribute):
                todo.extend(n.input)
            else:  # a graph input, or a node with a body: not a constant of the model
                return None
        return producer[tensor], sorted(sources)

    return of


def _explain_constant_folds(matching, a: onnx.ModelProto, b: onnx.ModelProto) -> None:
    """Weight gradients left without a counterpart because one model holds as an initializer a tensor the
    other computes from its weights (onnxruntime's constant folding turns Transpose(W) into an initializer
    named after the Transpose's output: GPT-2 dynamo's 'val_191', its tied lm_head transposed): that weight,
    and the weights the other model computes it from, have no counterpart of their name, and their
    gradients are other functions (a part of the sum over a weight's readers, or its transpose). Their
    cause becomes FOLDED, with the reason, which the verdict does not count as unpaired."""
    for holder, computer, uh, uc, model_c in (("A", "B", matching.unmatched_a, matching.unmatched_b, b),
                                              ("B", "A", matching.unmatched_b, matching.unmatched_a, a)):
        folded: dict[str, str] = {}  # a weight of the computing model -> the holder's folded tensor
        sources_of = _constant_sources(model_c)
        held_by = _reader_counterparts(matching, a, b, holder)
        copy_of, model_h = _copies(model_c), (a if holder == "A" else b)
        merged: dict[str, str] = {}  # an initializer of the computing model -> the holder's parameters it stands for
        for u in uh:
            w = forward_name(u.obs.name) or ""
            if u.cause != NO_COUNTERPART or not u.obs.effective_op.endswith(" weight"):
                continue
            if w in copy_of:  # no folding: the exporter kept one initializer for equal parameters (legacy's dedup)
                src = copy_of[w]
                equal = _equal(model_h, w, src, copy_of)
                merged[src] = group = _stands_for(src, copy_of, model_h) + (", of equal values" if equal else "")
                u.reason = (f"{computer} has no initializer of its own for it: its {w!r} is a copy (Identity) of the "
                            f"initializer {src!r}, one tensor for {holder}'s {group}; that tensor's gradient is "
                            "the sum of theirs, and this one alone has no counterpart: not judged")
                u.cause = FOLDED
                continue
            # of its name (onnxruntime's folding names it after the Transpose's output), or what the paired
            # layer reads in its place (legacy's 'onnx::MatMul_591' where dynamo's lm_head reads Transpose(wte))
            found = sources_of(w) or next((f for t in held_by(w) if (f := sources_of(t))), None)
            if found is None or not found[1]:
                continue
            node, sources = found
            u.reason = (f"a weight of {holder} that {computer} computes from its weights ({node.op_type} {node.name or node.output[0]!r} "
                        f"of {', '.join(sources)}): a constant folding (the exporter's or onnxruntime's) made it an initializer, so its "
                        "gradient is a part of theirs, another function of the data: not judged")
            u.cause = FOLDED
            for s in sources:
                folded.setdefault(s, w)
        for u in uh:  # the holder's namesake of the one initializer: refused as read by fewer nodes, said why
            w = forward_name(u.obs.name) or ""
            if u.cause == DIFFERENT_FUNCTION and u.obs.effective_op.endswith(" weight") and w in merged:
                u.reason = (f"{computer}'s initializer of its name is one tensor for {holder}'s {merged[w]} (the others "
                            f"copy it through Identity): its gradient is the sum of theirs, another function of the data "
                            "than this one's: not judged")
        for u in uc:
            w = forward_name(u.obs.name) or ""
            if u.cause in (NO_COUNTERPART, DIFFERENT_FUNCTION) and u.obs.effective_op.endswith(" weight") and w in merged:
                # read by more nodes than its namesake: the pair was refused (a different function), now said why
                u.reason = (f"one initializer of {computer} for {holder}'s {merged[w]} (the others copy it through "
                            f"Identity): its gradient is the sum of theirs, another function of the data than {holder}'s "
                            f"{w!r} alone: not judged")
                u.cause = FOLDED if u.cause == NO_COUNTERPART else u.cause
            elif u.cause == NO_COUNTERPART and u.obs.effective_op.endswith(" weight") and w in folded:
                u.reason = (f"a weight {holder} holds only folded into the initializer {folded[w]!r}, which {computer} "
                            "computes from it (constant folding): no weight of the same function in both, so it is not judged")
                u.cause = FOLDED


def _copies(model: onnx.ModelProto) -> dict[str, str]:
    """Tensor -> the initializer it copies through Identity nodes alone (legacy torch.onnx.export keeps one
    initializer for parameters of equal values and names the others' Identity copies of it after them)."""
    inits = {t.name for t in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output if o}
    out = {}
    for t, n in producer.items():
        x, depth = t, 0
        while n is not None and n.op_type == "Identity" and n.input and depth < 16:
            x, n, depth = n.input[0], producer.get(n.input[0]), depth + 1
        if depth and x in inits and n is None:
            out[t] = x
    return out


def _stands_for(src: str, copy_of: dict[str, str], holder: onnx.ModelProto) -> str:
    """The holder's parameters that the other model's initializer ``src`` stands for (itself and its copies),
    as said."""
    held = weights(holder)
    names = [t for t in [src, *sorted(t for t, s in copy_of.items() if s == src)] if t in held]
    return ", ".join(repr(t) for t in names)


def _equal(model: onnx.ModelProto, w: str, src: str, copy_of: dict[str, str]) -> bool:
    """``model`` holds ``w`` and the other parameters ``src`` stands for with the same values."""
    held = constants(model.graph)
    group = [t for t in [src, *(t for t, s in copy_of.items() if s == src)] if t in held]
    vals = [tensor_values(held[t]) for t in group]
    return w in group and len(vals) > 1 and all(v.shape == vals[0].shape and (v == vals[0]).all() for v in vals)


def _reader_counterparts(matching, a: onnx.ModelProto, b: onnx.ModelProto, holder: str):
    """A function: a weight of ``holder``'s model -> the tensors the other model's layers read in its place:
    for each node reading it (through Identity), the node the matching pairs its output's gradient with
    (``grad_name`` of the outputs), that node's input in the same slot."""
    mine, other = (a, b) if holder == "A" else (b, a)
    partner = {}
    for p in matching.pairs:
        x, y = (p.a, p.b) if holder == "A" else (p.b, p.a)
        fx, fy = forward_name(x.name), forward_name(y.name)
        if fx and fy:
            partner[fx] = fy
    producer = {o: n for n in other.graph.node for o in n.output if o}
    reading = slot_readers(mine.graph.node)

    def of(w: str, depth: int = 0) -> list[str]:
        out = []
        for n, k in reading.get(w, []):
            if n.op_type == "Identity" and depth < 8:
                out += of(n.output[0], depth + 1)
            elif n.output and (m := producer.get(partner.get(n.output[0], ""))) is not None and m.op_type == n.op_type \
                    and k < len(m.input) and m.input[k]:
                out.append(m.input[k])
        return out

    return of


def _explain_zero_biases(matching, a: onnx.ModelProto, b: onnx.ModelProto) -> None:
    """A weight gradient without a counterpart whose weight is all zeros and read only as a layer's bias (a Gemm's
    or Conv's third input, an Add's operand; through Identity): adding zeros changes nothing, and the other
    model's exporter may have dropped it (dynamo's optimizer removes a fresh GPT-2's zero Conv1D biases, legacy
    keeps them): no weight of the other holds it, which is no disagreement. Its cause becomes FOLDED."""
    for side, model, us in (("A", a, matching.unmatched_a), ("B", b, matching.unmatched_b)):
        held = constants(model.graph)
        reading = slot_readers(model.graph.node)

        def as_bias(t: str, depth: int = 0) -> bool:
            rs = reading.get(t, [])
            return bool(rs) and all(as_bias(n.output[0], depth + 1) if n.op_type == "Identity" and depth < 8 else
                                    (n.op_type in ("Gemm", "Conv", "ConvTranspose") and k == 2) or n.op_type == "Add"
                                    for n, k in rs)

        for u in us:
            w = forward_name(u.obs.name) or ""
            t = held.get(w)
            if u.cause != NO_COUNTERPART or not u.obs.effective_op.endswith(" weight") or t is None \
                    or t.data_location == onnx.TensorProto.EXTERNAL or not as_bias(w):
                continue
            v = tensor_values(t)
            if v.dtype.kind == "f" and v.size and not v.any():
                u.reason = (f"all zeros, read only as a layer's bias in {side}: adding zeros changes nothing, and the other "
                            "model holds no such bias (its exporter dropped it): nothing to compare, not judged")
                u.cause = FOLDED


def _explain_bias_adds(matching, a: onnx.ModelProto, b: onnx.ModelProto) -> None:
    """Weight gradients left without a counterpart because one model adds a layer's bias with an Add after
    the layer (Paddle's exports) and the other holds it in the layer's bias input (onnxruntime's
    ConvAddFusion in a quantized copy; the gradients are the same, but neither name nor shape pairs them): in
    the model with more such Adds, their biases, and in the other, unpaired bias inputs of layers, where
    each has one of the other's sizes (a bias added as [1, C, 1, 1] is a layer's [C]; a bias the other
    model has nowhere stays 'no counterpart'). Their cause becomes FOLDED, as for BatchNormalizations."""
    ba, bb = _bias_adds(a), _bias_adds(b)
    if len(ba) == len(bb):
        return
    keeps, folds = ("A", "B") if len(ba) > len(bb) else ("B", "A")
    adds, held = (ba, _layer_biases(b)) if len(ba) > len(bb) else (bb, _layer_biases(a))
    ux, uy = (matching.unmatched_a, matching.unmatched_b) if len(ba) > len(bb) else (matching.unmatched_b, matching.unmatched_a)

    def unpaired(us, names) -> list:
        return [u for u in us if u.cause == NO_COUNTERPART and u.obs.effective_op.endswith(" weight")
                and (forward_name(u.obs.name) or "") in names and _size(u.obs.shape) is not None]

    xs, ys = unpaired(ux, adds), unpaired(uy, held)
    common = {_size(u.obs.shape) for u in xs} & {_size(u.obs.shape) for u in ys}
    for u in xs:
        if _size(u.obs.shape) in common:
            u.reason = (f"the bias that the Add {adds[forward_name(u.obs.name)]} adds after a layer in {keeps}; {folds} "
                        f"holds it in the layer's own bias input ({len(adds)} bias Add(s) after a layer in {keeps}, "
                        f"{min(len(ba), len(bb))} in {folds}): no weight of {folds} has its name and shape, so it is not judged")
            u.cause = FOLDED
    for u in ys:
        if _size(u.obs.shape) in common:
            u.reason = (f"a layer's bias input holding the bias that {keeps} adds with an Add after the layer "
                        f"(onnxruntime's ConvAddFusion, or an exporter's): no weight of {keeps} has its name and shape, "
                        "so it is not judged")
            u.cause = FOLDED


def _layer_biases(model: onnx.ModelProto) -> set[str]:
    """The bias inputs (the third) of the model's Conv, ConvTranspose and Gemm nodes."""
    return {n.input[2] for n in model.graph.node if _foldable(n.op_type) and len(n.input) > 2 and n.input[2]}


def _size(shape) -> int | None:
    return element_count(shape) if shape is not None else None
