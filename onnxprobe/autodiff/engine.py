"""The backward pass: walk the graph from the loss back to the tensors whose gradient is asked for, and
emit the backward graph as ONNX nodes, one rule per forward node (``onnxprobe.autodiff.registry``).

The shared work is done here, once, so that rules stay short:

- **pruning**: only nodes that lie on a path from a requested tensor to a seeded tensor (through
  differentiable input slots of float tensors) are differentiated, and a rule is told which of its inputs
  need a gradient (``g.wants(i)``); dead nodes, forward or backward, are removed at the end;
- **fan-out**: the gradients of a tensor used by several nodes (or twice by one) are summed with one
  ``Sum`` node;
- **un-broadcasting**: for a rule's broadcasting inputs, the gradient is summed back to the input's own
  shape (ReduceSum over the broadcast axes; with runtime Shape ops when the shapes are dynamic);
- **names**: the gradient of forward tensor ``t`` is named ``t_grad`` (``t_grad.1`` if taken);
  backward nodes are named ``onnxprobe.grad/<forward node>/<Op>`` and their doc_string names the forward
  node, so probes can select them.

Nothing here runs a model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx

from onnxprobe.autodiff import registry
from onnxprobe.autodiff.blocked import blocked_tensors, partial_tensors
from onnxprobe.autodiff.context import NodeGrad
from onnxprobe.autodiff.nested import rename
from onnxprobe.autodiff.no_rule import no_rule_error, seen_from_outside
from onnxprobe.errors import ModelError, NoGradientRule, UnknownShape, UsageError
from onnxprobe.graph.builder import FLOAT_TYPES, GraphBuilder, all_names, default_opset
from onnxprobe.graph.shapes import static_shape, value_types
from onnxprobe.graph.tensor_data import to_array
from onnxprobe.graph.walk import implicit_inputs, needed_nodes, node_display_name, subgraphs, toposort
from onnxprobe.types import BACKWARD_TAG as TAG
from onnxprobe.types import grad_name


def shaped_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """value_types, preferring for each main-graph tensor an entry that carries a shape."""
    types = value_types(model)
    for vi in list(model.graph.value_info) + list(model.graph.output) + list(model.graph.input):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape") and vi.type.tensor_type.elem_type:
            if static_shape(types.get(vi.name)) is None:
                types[vi.name] = vi.type
    return types


def annotate_outputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """Give the graph outputs whose type or shape is missing a value_info entry from onnx shape inference
    (graph.shapes.infer_shapes fills value_info only). In place; returns ``model``."""
    from onnx import shape_inference

    types = shaped_types(model)
    missing = {o.name for o in model.graph.output if static_shape(types.get(o.name)) is None}
    if not missing:
        return model
    try:
        from onnxprobe.graph.skeleton import skeleton

        sk = skeleton(model)
    except Exception:  # noqa: BLE001 - older layouts: infer on the model itself
        sk = model
    try:
        inferred = shape_inference.infer_shapes(sk, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - no shapes: rules fall back to runtime Shape ops or say so
        return model
    for o in inferred.graph.output:
        if o.name in missing and o.type.HasField("tensor_type") and o.type.tensor_type.HasField("shape"):
            model.graph.value_info.append(o)
    return model


@dataclass
class Backward:
    """A model with its backward graph attached. ``grads`` maps each forward tensor whose gradient was
    asked for (and that the loss depends on) to the graph output that holds its gradient."""

    model: onnx.ModelProto
    grads: dict[str, str]
    unused: list[str] = field(default_factory=list)  # asked for, but the loss does not depend on them
    n_forward: int = 0  # nodes kept from the forward graph
    n_backward: int = 0  # nodes added by the backward pass
    all_grads: dict[str, str] = field(default_factory=dict)  # every forward tensor -> its gradient tensor
    stopped: list[str] = field(default_factory=list)  # ops without a rule that stopped the gradient ("skip")
    backward_names: set[str] = field(default_factory=set)  # names of the nodes the backward pass added
    warnings: list[str] = field(default_factory=list)
    # of ``unused``: those the loss does depend on, through an input of an op whose rule gives it no gradient
    # (Clip's bounds, Pad's constant value): tensor -> "Clip 'node' (input 1)"
    blocked: dict[str, str] = field(default_factory=dict)
    # of ``unused``: those the loss depends on only through integer values (a Cast to int64 feeding Gather's
    # indices), which carry no gradient by nature: tensor -> "Cast 'node'" (the op whose integer output it is)
    integer: dict[str, str] = field(default_factory=dict)
    # of ``grads``: those with a way to the loss through an op in ``stopped``, whose gradient is a part of the
    # real one (autodiff.blocked.partial_tensors): tensor -> "Attention 'node'"
    partial: dict[str, str] = field(default_factory=dict)


class Engine:
    def __init__(self, model: onnx.ModelProto, names: set[str] | None = None, unsupported: str = "raise"):
        self.model = model
        self.graph = model.graph
        self.opset = default_opset(model)
        self.types = shaped_types(annotate_outputs(model))
        # a body's engine (If / Loop / Scan) takes its fresh names from the enclosing model's set
        self.names = all_names(model)
        if names is not None:
            names.update(self.names)
            self.names = names
        # a body's gradients are named apart ("onnxprobe.grad/x_grad"): the plain "x_grad" of a tensor the
        # body reads from outside is the name the enclosing model's output of that gradient takes
        self.body = names is not None
        self.unsupported = unsupported
        self.warnings: list[str] = []
        self.reorder = False  # a rule replaced forward nodes (LSTM "expose"): sort the graph when assembling
        self.b = GraphBuilder(self.names, self.opset, scope="onnxprobe.grad", strict=True)
        self.consts: dict[str, np.ndarray] = {}
        for init in self.graph.initializer:
            self.consts[init.name] = init
        for n in self.graph.node:
            if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and n.output:
                self.consts[n.output[0]] = n

    # -- facts about forward tensors -----------------------------------------------------------------
    def elem(self, t: str) -> int | None:
        tp = self.types.get(t)
        if tp is None or not tp.HasField("tensor_type"):
            return None
        return tp.tensor_type.elem_type or None

    def sshape(self, t: str) -> tuple | None:
        if t in self.b.static:
            return self.b.static[t]
        return static_shape(self.types.get(t))

    def is_float(self, t: str) -> bool:
        e = self.elem(t)
        return e is None or e in FLOAT_TYPES

    def const_value(self, t: str) -> np.ndarray | None:
        src = self.consts.get(t)
        if src is None:
            return None
        if isinstance(src, onnx.TensorProto):
            return to_array(src)
        for a in src.attribute:
            if a.name == "value":
                return to_array(a.t)
            if a.name == "value_int":
                return np.array(a.i, np.int64)
            if a.name == "value_ints":
                return np.array(list(a.ints), np.int64)
            if a.name == "value_float":
                return np.array(a.f, np.float32)
            if a.name == "value_floats":
                return np.array(list(a.floats), np.float32)
        return None

    def differentiate_body(self, body: onnx.GraphProto, seeds: dict[str, str], wrt: list[str],
                           input_types: dict[str, onnx.TypeProto] | None = None, where: str = ""):
        """The backward pass of an If / Loop / Scan body (``autodiff.nested``): seeds map body outputs to
        the tensors that hold their gradients, ``wrt`` names body inputs and outer tensors the body reads."""
        from onnxprobe.autodiff.nested import differentiate_body

        return differentiate_body(self, attach_backward, body, seeds, wrt, input_types or {}, where)

    # -- un-broadcasting -----------------------------------------------------------------------------
    def sum_to(self, grad: str, target: str, grad_shape: tuple | None) -> str:
        """Sum ``grad`` (of static shape ``grad_shape`` when known) down to the shape of ``target``."""
        b = self.b
        ts = self.sshape(target)
        if ts is not None and grad_shape is not None and len(ts) == len(grad_shape) and all(
                a == c and a is not None for a, c in zip(ts, grad_shape)):
            return grad
        if ts is None or grad_shape is None:
            raise UnknownShape(f"cannot sum the gradient back to the shape of {target!r}: its rank is unknown (input "
                               "shapes given with --shape NAME=DIMS or --input often let shape inference tell it)")
        k = len(grad_shape) - len(ts)
        if k < 0:
            raise ModelError(f"gradient of {target!r} has a lower rank than the tensor")
        lead = list(range(k))
        tail = list(zip(ts, grad_shape[k:]))
        unknown = [i for i, (a, c) in enumerate(tail) if not isinstance(a, int) and not (a is not None and a == c)]
        if not unknown or self.opset < 13:
            # one ReduceSum over the leading axes and the broadcast ones; when every such axis has size 1 the
            # sum would only copy the tensor (4 ms a tensor on DenseNet's 1x256x56x56): a Squeeze instead
            ones = [k + i for i, (a, c) in enumerate(tail) if a == 1 and c != 1]
            if not ones and all(grad_shape[i] == 1 for i in lead):
                return b.squeeze(grad, lead) if lead else grad  # nothing to sum (or dims unknown before opset 13)
            r = b.reduce_sum(grad, lead + ones, keepdims=0 if not ones else 1)
            return b.squeeze(r, lead) if ones and lead else r
        # dynamic: sum over the axes where the target has size 1 and the gradient has not
        r = b.reduce_sum(grad, lead, keepdims=0) if lead else grad
        tshape, gshape = b.Shape(target), b.Shape(r)
        one = b.ints([1])
        mask = b.And(b.Equal(tshape, one), b.Not(b.Equal(gshape, one)))
        axes = b.Reshape(b.NonZero(mask), b.ints([-1]))
        return b.reduce_sum_runtime(r, axes)


def _differentiable_slots(node: onnx.NodeProto) -> list[int]:
    st = registry.status(node.op_type, node.domain)
    if st == "non-differentiable":
        return []
    if st == "rule":
        r = registry.rule_of(node)
        return [i for i in range(len(node.input)) if r.differentiable(i)]
    return list(range(len(node.input)))  # unknown: assume every input matters, so the engine can say so


def attach_backward(
    model: onnx.ModelProto,
    seeds: dict[str, str],
    wrt: list[str],
    *,
    outputs: list[str] | None = None,
    keep: list[str] = (),
    prune: bool = True,
    fold: bool = True,
    unsupported: str = "raise",
    names: set[str] | None = None,
) -> Backward:
    """Attach the backward graph to (a copy of) ``model``.

    ``seeds`` maps forward tensors to tensors that hold dL/d(that tensor) (usually the loss and a
    Constant 1, or a model output and a graph input). ``wrt`` lists the tensors whose gradients are
    wanted. The returned model's outputs are ``outputs`` (forward tensors, e.g. the loss), then one
    gradient per ``wrt`` tensor that the seeds depend on, then ``keep``. ``model`` should carry inferred
    shapes (``graph.shapes.infer_shapes``): rules use static shapes where they are known. ``fold``:
    fold BatchNormalization into the Conv before it where nothing else needs the Conv's output
    (``autodiff.fold``); the gradients are the same, the backward graph smaller. ``unsupported``: what
    an op without a rule on the way does: "raise" (a ModelError naming it), or "skip" (no gradient flows
    through it; the tensors that only it connects to the loss end up in ``unused``, the op in ``stopped``).
    ``names``: the enclosing model's names, when ``model`` is a control-flow body (fresh names avoid them).
    """
    from onnxprobe.autodiff.fold import fold_batchnorm

    registry.load()
    out = onnx.ModelProto()
    out.CopyFrom(model)
    if out.functions:  # a call of a model-local function is differentiated through its body, inlined
        from onnx.inliner import inline_local_functions

        from onnxprobe.graph.shapes import annotate

        try:
            out = annotate(inline_local_functions(out))
        except Exception:  # noqa: BLE001 - not inlined (a function of another opset): a call is an op without a rule
            pass
    eng = Engine(out, names, unsupported)
    for t in list(seeds) + list(wrt):
        if t not in eng.names:
            raise UsageError(f"no tensor named {t!r} in the model")
    protected = set(seeds) | set(wrt) | set(outputs or []) | set(keep)
    if fold and fold_batchnorm(out, eng.types, protected, eng.opset, eng.b.fresh, set(wrt)):
        eng = Engine(out, names, unsupported)
    nodes = list(out.graph.node)
    rg, slots = requires_grad(eng, nodes, wrt)
    reach, active = on_the_way(nodes, seeds, rg, slots)
    acc = _Gradients(eng, seeds)
    stopped = _differentiate(eng, nodes, active, rg, reach, acc, unsupported, wrt)
    grads_out: dict[str, str] = {}
    unused: list[str] = []
    for t in wrt:
        f = acc.final(t) if t in reach or t in acc.contributions else None
        if f is None:
            unused.append(t)
        else:
            grads_out[t] = f
    blocked, integer = blocked_tensors(eng.is_float, [t for t in unused if t in reach], nodes, reach)
    grads_out, all_grads = acc.apply_renames(grads_out)
    grads_out = _own_tensors(eng, grads_out, acc.seed_values)
    bw = _assemble(out, eng, grads_out, unused, all_grads, stopped, list(outputs or []), list(keep), prune)
    bw.blocked, bw.integer = blocked, integer
    if stopped:
        index = {id(n): k for k, n in enumerate(nodes)}
        cut = [(n, f"{registry.key(n.op_type, n.domain)} {node_display_name(n, index[id(n)])}") for n in active
               if registry.status(n.op_type, n.domain) != "rule"]
        bw.partial = partial_tensors(nodes, cut, rg, set(grads_out))
    return bw


def requires_grad(eng: Engine, nodes: list[onnx.NodeProto], wrt: list[str]) -> tuple[set[str], dict[int, list[int]]]:
    """Forward: the tensors that depend on a requested tensor through differentiable slots, and each
    node's differentiable slots."""
    rg = {t for t in wrt if eng.is_float(t)}
    slots: dict[int, list[int]] = {}
    for n in nodes:
        sl = _differentiable_slots(n)
        slots[id(n)] = sl
        hit = any(i < len(n.input) and n.input[i] in rg for i in sl)
        if not hit and any(True for _ in subgraphs(n)):
            hit = bool(set(implicit_inputs(n)) & rg) and registry.status(n.op_type, n.domain) != "non-differentiable"
        if hit:
            # a straight-through rule (QuantizeLinear) carries the gradient through its integer output
            r = registry.rule_of(n)
            through = r is not None and r.straight_through
            rg.update(o for o in n.output if o and (eng.is_float(o) or through))
    return rg, slots


def on_the_way(nodes: list[onnx.NodeProto], seeds: dict[str, str], rg: set[str],
                slots: dict[int, list[int]]) -> tuple[set[str], list[onnx.NodeProto]]:
    """Backward: the tensors the seeds depend on, and the nodes to differentiate (those between a
    requested tensor and a seed), in reverse topological order."""
    reach = set(seeds)
    active: list[onnx.NodeProto] = []
    for n in reversed(nodes):
        if not any(o in reach for o in n.output if o):
            continue
        reach.update(i for i in n.input if i)
        has_body = any(True for _ in subgraphs(n))
        if has_body:
            reach.update(implicit_inputs(n))
        if any(o in rg and o in reach for o in n.output if o) and any(
                i < len(n.input) and n.input[i] in rg for i in slots[id(n)]):
            active.append(n)
        elif has_body and any(o in rg for o in n.output):
            active.append(n)
    return reach, active


class _Gradients:
    """The gradient contributions to each forward tensor, summed once (fan-out) when a node asks for its
    output gradient; a single contribution is renamed ``<tensor>_grad`` at the end."""

    def __init__(self, eng: Engine, seeds: dict[str, str]):
        self.eng = eng
        self.contributions: dict[str, list[str]] = {}
        for t, s in seeds.items():
            self.contributions.setdefault(t, []).append(s)
        self.done: dict[str, str | None] = {}
        self.made: set[str] = set()  # tensors produced by backward nodes
        self.claimed: set[str] = set()  # backward tensors already renamed after a forward tensor
        self.rename: dict[str, str] = {}
        self.seed_values = set(seeds.values())

    def add(self, t: str, grad: str) -> None:
        self.contributions.setdefault(t, []).append(grad)

    def name_for(self, t: str) -> str:
        return self.eng.b.fresh(f"onnxprobe.grad/{grad_name(t)}" if self.eng.body else grad_name(t))

    def final(self, t: str) -> str | None:
        if t in self.done:
            return self.done[t]
        cs = self.contributions.get(t, [])
        b = self.eng.b
        if not cs:
            self.done[t] = None
        elif len(cs) == 1:
            c = cs[0]
            if c in self.made and c not in self.claimed and c not in self.seed_values:
                self.claimed.add(c)
                self.rename[c] = self.name_for(t)
            self.done[t] = c
        else:
            b.scope, b.doc = f"{TAG}{t}", f"onnxprobe backward: fan-out sum for {t}"
            self.done[t] = b.op("Sum", *cs, out=self.name_for(t))
        return self.done[t]

    def apply_renames(self, grads_out: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
        """Rename single contributions after their forward tensor in the emitted nodes; returns the
        requested gradients and every forward tensor's gradient, under their final names."""
        if self.rename:
            rename(self.eng.b.nodes, self.rename)  # the bodies of backward If / Scan nodes read them too
            for bn in self.eng.b.nodes:
                bn.output[:] = [self.rename.get(v, v) for v in bn.output]
        grads = {t: self.rename.get(v, v) for t, v in grads_out.items()}
        every = {t: self.rename.get(v, v) for t, v in self.done.items() if v is not None}
        return grads, every


def _differentiate(eng: Engine, nodes: list[onnx.NodeProto], active: list[onnx.NodeProto], rg: set[str],
                   reach: set[str], acc: _Gradients, unsupported: str, wrt: list[str]) -> list[str]:
    """Run each active node's rule (reverse topological order), adding the gradients it emits to ``acc``.
    Returns the ops without a rule that stopped the gradient ("skip"), or raises for the first one."""
    index = {id(n): k for k, n in enumerate(nodes)}
    stopped: list[str] = []
    for n in active:
        display = node_display_name(n, index[id(n)])
        st = registry.status(n.op_type, n.domain)
        op = registry.key(n.op_type, n.domain)  # com.microsoft:Attention, not the ONNX Attention that has a rule
        if st != "rule" and unsupported == "skip":
            stopped.append(f"{op} {display}")
            continue
        if st != "rule":
            raise no_rule_error(n, display, rg, nodes, wrt)
        rule = registry.rule_of(n)
        dys = [acc.final(o) if (o and o in rg and o in reach) else None for o in n.output]
        if not any(dys):
            continue
        for o, d in zip(n.output, dys):  # a gradient has its tensor's shape
            if d is not None and d not in eng.b.static and eng.sshape(o) is not None:
                eng.b.static[d] = eng.sshape(o)
        wants = [bool(i < len(n.input) and n.input[i] and n.input[i] in rg and rule.differentiable(i))
                 for i in range(len(n.input))]
        eng.b.scope = f"{TAG}{display}"
        eng.b.doc = f"onnxprobe backward of {n.op_type} node {display}"
        before = len(eng.b.nodes)
        implicit = [t for t in implicit_inputs(n) if t in rg] if any(True for _ in subgraphs(n)) else []
        try:
            grads = rule.fn(NodeGrad(eng, n, display, dys, wants, implicit))
        except NoGradientRule as e:  # a body's op: named with the tensors wanted here, not the body's own
            raise seen_from_outside(e, n, rg, nodes, wrt) from e
        named = {}
        if isinstance(grads, dict):  # int keys: input slots; str keys: outer tensors a body reads
            named = {k: v for k, v in grads.items() if isinstance(k, str) and v is not None and k in implicit}
            grads = [grads.get(i) for i in range(len(n.input))]
        for t, gi in named.items():
            acc.add(t, gi)
        for i, gi in enumerate(list(grads or [])):
            if gi is None or not wants[i]:
                continue
            if i in rule.broadcast:
                gi = eng.sum_to(gi, n.input[i], eng.sshape(n.output[0]))
            acc.add(n.input[i], gi)
        for bn in eng.b.nodes[before:]:
            acc.made.update(bn.output)
    return stopped


def _own_tensors(eng: Engine, grads_out: dict[str, str], seed_values: set[str]) -> dict[str, str]:
    """Every requested gradient gets a tensor of its own, named after it (an Identity where the gradient
    is shared, is a seed, or could not take the name)."""
    eng.b.scope, eng.b.doc = TAG.rstrip("/"), "onnxprobe backward: gradient output"
    seen: set[str] = set()
    out = dict(grads_out)
    for t, v in grads_out.items():
        base = f"onnxprobe.grad/{grad_name(t)}" if eng.body else grad_name(t)  # as Accumulator.name_for
        if not v.startswith(base) or v in seen or v in seed_values:
            v = eng.b.op("Identity", v, out=eng.b.fresh(base))
            out[t] = v
        seen.add(v)
    return out


def _assemble(out: onnx.ModelProto, eng: Engine, grads_out: dict[str, str], unused: list[str], all_grads: dict[str, str],
              stopped: list[str], outputs: list[str], keep: list[str], prune: bool) -> Backward:
    """Append the backward nodes, set the graph outputs (typed), drop what no output needs."""
    g = out.graph
    bw_nodes = eng.b.nodes
    g.node.extend(bw_nodes)
    if eng.reorder:
        nodes = list(g.node)
        del g.node[:]
        g.node.extend(toposort(nodes, {i.name for i in g.input} | {i.name for i in g.initializer}))
    want_outputs = list(dict.fromkeys(outputs + list(grads_out.values()) + keep))
    source = {v: t for t, v in grads_out.items()}
    del g.output[:]
    for name in want_outputs:
        vi = onnx.ValueInfoProto(name=name)
        tp = eng.types.get(source.get(name, name))
        if tp is not None:
            vi.type.CopyFrom(tp)
        g.output.append(vi)
    bw_names = {n.name for n in bw_nodes}
    if prune:
        _prune(out, set(want_outputs))
    n_bw = sum(1 for n in out.graph.node if n.name in bw_names)
    return Backward(out, grads_out, unused, len(out.graph.node) - n_bw, n_bw, all_grads, stopped, bw_names,
                    eng.warnings)


def _prune(model: onnx.ModelProto, outputs: set[str]) -> None:
    """Remove the nodes (forward or backward) that no output needs, and the initializers they used."""
    g = model.graph
    keep = []
    for n in needed_nodes(g.node, outputs):
        c = onnx.NodeProto()
        c.CopyFrom(n)
        keep.append(c)
    need = set(outputs) | {i for n in keep for i in (*n.input, *implicit_inputs(n)) if i}
    del g.node[:]
    g.node.extend(keep)
    need.update(i.name for i in g.input)  # IR < 4: an initializer listed as an input stays
    if any(i.name not in need for i in g.initializer):
        inits = []
        for i in g.initializer:
            if i.name in need:
                c = onnx.TensorProto()
                c.CopyFrom(i)
                inits.append(c)
        del g.initializer[:]
        g.initializer.extend(inits)
