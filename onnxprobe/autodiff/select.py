"""Which gradients to compute: the weights and the probed activations, with the same selection flags as
``layers`` (``--op Conv`` picks the gradients of Conv outputs and of the weights Conv nodes read), and
``--wrt`` to name tensors directly.

Weights are the float tensors fixed before any input arrives that hold at least two values: the
initializers and the outputs of Constant nodes. Scalar constants (the 3.0 of x ** 3, an epsilon) are not
weights; name them with ``--wrt`` to get their gradient.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import onnx

from onnxprobe.graph.builder import FLOAT_TYPES
from onnxprobe.errors import UsageError, hinted_setting_error, setting_error
from onnxprobe.graph.constants import constant_of, constants
from onnxprobe.graph.select import Selection, check_criteria, node_positions, op_matches, parse_range, select
from onnxprobe.graph.shapes import dtype_name, static_shape, value_types
from onnxprobe.graph.tensor_data import to_array
from onnxprobe.graph.walk import all_graphs, first_readers, implicit_inputs, subgraphs, walk
from onnxprobe.text import matches, one_glob_each, some
from onnxprobe.types import TensorRef, element_count


@dataclass(frozen=True)
class Target:
    """A forward tensor whose gradient is wanted."""

    ref: TensorRef  # the forward tensor (node: its producer, or for a weight the first node that reads it)
    kind: str  # "weight" | "activation" | "input"


QUANT_OPS = ("QuantizeLinear", "DequantizeLinear")
WRT = ("wrt", "--wrt")  # GradSpec's field and its flag, named by the messages about it


def quantization_params(model: onnx.ModelProto) -> set[str]:
    """Tensors read only as the scale or zero point of QuantizeLinear / DequantizeLinear: they get no
    gradient by design (the straight-through estimator passes none to them)."""
    only: dict[str, bool] = {}
    for n in model.graph.node:
        for k, i in enumerate(n.input):
            only[i] = only.get(i, True) and n.op_type in QUANT_OPS and k >= 1
    return {t for t, q in only.items() if q}


def weights(model: onnx.ModelProto, smallest: int = 2) -> dict[str, np.ndarray | None]:
    """Float weights of the main graph: name -> value (None when it cannot be read cheaply), of at least
    ``smallest`` values (single values are constants of the formula, such as an epsilon, unless a --wrt
    names one). Scales and zero points of quantization are not weights here (``quantization_params``)."""
    qparams = quantization_params(model)
    # initializers, then Constant values in every form of the op (value, value_floats...): graph.constants
    return {name: None for name, t in constants(model.graph).items()
            if t.data_type in FLOAT_TYPES and element_count(t.dims) >= smallest and name not in qparams}


def weight_value(model: onnx.ModelProto, name: str) -> np.ndarray | None:
    """The value of an initializer or Constant, in the main graph or in a body (autodiff.hoist moves a
    body's Constants to the main graph: they are weights of the model the user gave all the same)."""
    for g in all_graphs(model.graph):  # a body's dense initializers are moved as its Constants are
        for init in g.initializer:
            if init.name == name:
                return to_array(init)
    main = list(model.graph.node)
    in_bodies = (s.node for s in walk(model) if s.chain) if any(True for n in main for _ in subgraphs(n)) else ()
    for n in itertools.chain(main, in_bodies):
        if n.op_type == "Constant" and n.output and n.output[0] == name:
            t = constant_of(n)
            return None if t is None else to_array(t)
    return None


def _is_float(types: dict, name: str) -> bool:
    tp = types.get(name)
    if tp is None or not tp.HasField("tensor_type"):
        return True
    return tp.tensor_type.elem_type in FLOAT_TYPES or not tp.tensor_type.elem_type


def targets(model: onnx.ModelProto, selection: Selection | None = None, wrt: tuple[str, ...] = ()) -> list[Target]:
    """Resolve the selection (and ``wrt`` globs) to forward tensors, in topological order. ``model``
    should carry inferred shapes."""
    sel = selection or Selection()
    sites = walk(model)
    main = [s for s in sites if not s.chain]
    types = value_types(model)
    w = weights(model)
    lo, hi = parse_range(sel.range, node_positions(sites), len(sites) - 1) if sel.range else (0, len(sites) - 1)
    consumers: dict[str, list] = {}
    for s in main:
        for i in list(s.node.input) + implicit_inputs(s.node):  # a body reads weights of the main graph too
            consumers.setdefault(i, []).append(s)

    def ref(name: str, site, kind: str) -> TensorRef:
        tp = types.get(name)
        return TensorRef(
            name=name, node=site.name if site else "", op_type=site.node.op_type if site else "",
            index=site.index if site else -1, dtype=dtype_name(tp.tensor_type.elem_type) if tp is not None else None,
            shape=static_shape(tp), is_output=name in {o.name for o in model.graph.output},
        )

    def weight_selected(name: str) -> bool:
        cs = [c for c in consumers.get(name, []) if lo <= c.index <= hi]
        if not cs:
            return False
        if sel.is_default or sel.all:
            return True
        for c in cs:
            if op_matches(c.node.op_type, sel.ops, c.node.domain):
                return True
            if any(matches(c.name, gl) or matches(name, gl) for gl in sel.names):
                return True
        return False

    chosen: dict[str, Target] = {}
    for name in w:
        if name in consumers and weight_selected(name):
            chosen[name] = Target(ref(name, consumers[name][0], "weight"), "weight")
    explicit = not sel.is_default or bool(sel.range)
    check_criteria([model], sel)  # an --op or --name that matches nothing is refused, weights chosen or not
    try:
        acts = select(model, sel)
    except UsageError:
        if not chosen:
            raise
        acts = []
    producer = {o: s for s in main for o in s.node.output if o}
    for r in acts:
        if r.scope or r.name in w or not _is_float(types, r.name):
            continue
        chosen.setdefault(r.name, Target(r, "activation"))
    inputs = {i.name for i in model.graph.input} - {i.name for i in model.graph.initializer}
    if sel.all:  # every gradient: the float graph inputs' too (dL/dx, a saliency map), as --wrt names them
        for i in model.graph.input:
            cs = [c for c in consumers.get(i.name, []) if lo <= c.index <= hi]
            # one no node reads is taken too (without --range, which it lies outside): the loss does not depend
            # on it, which the notes say as they do of one read only by a Shape
            unread = not sel.range and i.name not in consumers
            if i.name in inputs and (cs or unread) and _is_float(types, i.name) and types.get(i.name) is not None:
                chosen.setdefault(i.name, Target(ref(i.name, cs[0] if cs else None, "input"), "input"))
    if not chosen and not wrt:  # nothing to differentiate: no report of zero rows (an empty table read as a pass)
        raise UsageError(_none_differentiable(sel, acts, types, w))
    if wrt:
        pool = list(w) + [i for i in inputs if _is_float(types, i)] + [
            o for s in main for o in s.node.output if o and _is_float(types, o)]
        # a learnable scalar (a clamp's bound): named by --wrt only, by its name or a pattern that matches it (a
        # glob such as 'onnx::Clip_*' matched none of them, and the exact name did)
        single = [n for n in weights(model, smallest=1) if n not in w and n in consumers]
        w = {**w, **{n: None for n in single if any(matches(n, pat) for pat in wrt)}}
        picked: dict[str, Target] = {}
        for pat in wrt:
            hits = [n for n in pool if matches(n, pat)] + [n for n in single if matches(n, pat)]
            if not hits:
                names = pool + single
                raise hinted_setting_error(UsageError, WRT, f"{pat!r}: no float weight, input or node output of the main graph matches it",
                                           lambda say: f"; {listed}" if (listed := one_glob_each(WRT, pat, names, say)) else "")
            for n in hits:
                # --all means every tensor: a graph input it names is kept (the flags select node outputs and
                # weights, and --all read as an intersection dropped the inputs --wrt names)
                # so is a one-element constant it names whose reader the flags select: a weight by being named, it
                # was in no list the flags chose from (--wrt lo --all or --op Clip left nothing)
                if explicit and n not in chosen and not (sel.all and n in inputs) and not (n in single and weight_selected(n)):
                    continue
                if n in chosen:
                    picked[n] = chosen[n]
                elif n in w:
                    picked[n] = Target(ref(n, consumers.get(n, [None])[0], "weight"), "weight")
                elif n in inputs:
                    picked[n] = Target(ref(n, (consumers.get(n) or [None])[0], "input"), "input")
                else:
                    picked[n] = Target(ref(n, producer.get(n), "activation"), "activation")
        if not picked:
            raise setting_error(UsageError, WRT, ": the selection flags leave none of the tensors it names")
        chosen = picked
    return sorted(chosen.values(), key=lambda t: (t.ref.index, t.kind != "weight", t.ref.name))


def _none_differentiable(sel: Selection, acts: list[TensorRef], types: dict, w: dict) -> str:
    """Why a selection holds no tensor that gets a gradient: its tensors are integers or booleans, lie inside
    If/Loop/Scan bodies (no gradient row), or are weights no selected node reads."""
    ints = [r for r in acts if not r.scope and r.name not in w and not _is_float(types, r.name)]
    body = [r for r in acts if r.scope]
    why = []
    if ints:
        shown = some(ints, form=lambda r: f"{r.name!r} ({r.dtype or 'not float'})")
        why.append(f"{len(ints)} integer or boolean tensor(s), which carry no gradient: {shown}")
    if body:
        why.append(f"{len(body)} tensor(s) inside If/Loop/Scan bodies, which grad gives no row ({body[0].key}; "
                   "`layers --all` shows their statistics)")
    return (f"the selection ({sel.describe()}) holds no tensor that gets a gradient row"
            + (f": {'; '.join(why)}" if why else " (no float weight, input or node output)"))


def named_targets(model: onnx.ModelProto, names: list[str]) -> list[Target]:
    """Targets for exact tensor names of the main graph (no globs, no selection): weights, graph inputs
    and node outputs, in topological order. Unknown names raise UsageError."""
    main = [s for s in walk(model) if not s.chain]
    types = value_types(model)
    w = weights(model)
    inputs = {i.name for i in model.graph.input} - {i.name for i in model.graph.initializer}
    producer = {o: s for s in main for o in s.node.output if o}
    consumer = first_readers(main)
    outputs = {o.name for o in model.graph.output}
    out = []
    for name in dict.fromkeys(names):
        site = producer.get(name) or consumer.get(name)
        if name in w or (name not in producer and name not in inputs and name in consumer):
            kind = "weight"
        elif name in inputs:
            kind = "input"
        elif name in producer:
            kind = "activation"
        else:
            raise UsageError(f"no tensor named {name!r} in the main graph")
        tp = types.get(name)
        ref = TensorRef(name=name, node=site.name if site else "", op_type=site.node.op_type if site else "",
                        index=site.index if site else -1, dtype=dtype_name(tp.tensor_type.elem_type) if tp is not None else None,
                        shape=static_shape(tp), is_output=name in outputs)
        out.append(Target(ref, kind))
    return sorted(out, key=lambda t: (t.ref.index, t.kind != "weight", t.ref.name))
