"""The loss's rounding read from the forward pass, for ``grad --check``: rounding one float activation A (a
relative error of up to eps on each element, independent from element to element) moves the loss, to first
order, by about eps x sqrt(sum (dL/dA * A)^2): the errors add in quadrature. (Their worst case, eps x
sum |dL/dA * A|, all of one sign, read a 10^4-element map's rounding as 100x what it is: PP-OCR cls's
BatchNormalization offsets, resolved to 0.8 % at every step, went unchecked.) A
perturbation of a tensor T is seen by the loss only through the activations downstream of T, so the largest of
those sums is a floor under any change of the loss that finite differences can resolve for T: a weight whose
product is added to 1e14 (x W + B) is absorbed there, and the loss does not move however right its gradient.

The sums of squares are computed inside the backward graph (Cast to double, Mul, Mul, ReduceSum: one scalar per
activation),
so that one run gives them and only scalars leave the session, whatever the size of the model."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from onnxprobe.autodiff.engine import attach_backward, shaped_types
from onnxprobe.graph.walk import implicit_inputs

FLOATS = (TensorProto.FLOAT, TensorProto.DOUBLE)
PREFIX = "onnxprobe_rounding"


def activations(fwd: onnx.ModelProto) -> list[str]:
    """The float node outputs of the main graph, in order (``fwd`` carries inferred shapes)."""
    types = shaped_types(fwd)
    return list(dict.fromkeys(o for n in fwd.graph.node for o in n.output
                              if o and o in types and types[o].tensor_type.elem_type in FLOATS))


def rounding_model(fwd: onnx.ModelProto, seeds: dict[str, str], acts: list[str]) -> tuple[onnx.ModelProto, dict[str, str]]:
    """``fwd`` with its backward graph to ``acts`` and, for each activation the loss depends on, a double scalar
    sum (dL/dA * A)^2 as the only outputs: (model, activation -> its scalar output). ``unsupported`` ops stop the
    gradient (their inputs get no sum: their floor is left out, never made up)."""
    bw = attach_backward(fwd, seeds, acts, outputs=acts, unsupported="skip")  # (outputs: keeps the forward nodes)
    model, g = bw.model, bw.model.graph
    taken = {o for n in g.node for o in n.output} | {i.name for i in g.input} | {i.name for i in g.initializer}
    k, sums = 0, {}
    for t, d in bw.grads.items():
        while f"{PREFIX}/{k}" in taken:
            k += 1
        p = f"{PREFIX}/{k}"
        k += 1
        g.node.extend([helper.make_node("Cast", [t], [p + "/a"], to=TensorProto.DOUBLE, name=p + "/a"),
                       helper.make_node("Cast", [d], [p + "/d"], to=TensorProto.DOUBLE, name=p + "/d"),
                       helper.make_node("Mul", [p + "/a", p + "/d"], [p + "/ad"], name=p + "/ad"),
                       helper.make_node("Mul", [p + "/ad", p + "/ad"], [p + "/sq"], name=p + "/sq"),
                       helper.make_node("ReduceSum", [p + "/sq"], [p], keepdims=0, name=p)])
        sums[t] = p
    del g.output[:]
    g.output.extend(helper.make_tensor_value_info(s, TensorProto.DOUBLE, []) for s in sums.values())
    return model, sums


def downstream_max(fwd: onnx.ModelProto, each: dict[str, float], names: list[str]) -> dict[str, tuple[float, str]]:
    """For each of ``names``: the largest ``each`` over the tensors downstream of it in the main graph, with that
    tensor's name (none where nothing downstream has one)."""
    consumers: dict[str, list] = {}
    for n in fwd.graph.node:
        for i in dict.fromkeys([*n.input, *implicit_inputs(n)]):  # (a body reads outer tensors by name)
            consumers.setdefault(i, []).append(n)
    res = {}
    for name in names:
        seen, todo, best = set(), [name], (0.0, "")
        while todo:
            for n in consumers.get(todo.pop(), []):
                for o in n.output:
                    if o and o not in seen:
                        seen.add(o)
                        todo.append(o)
                        best = max(best, (each.get(o, 0.0), o))
        if best[1]:
            res[name] = best
    return res
