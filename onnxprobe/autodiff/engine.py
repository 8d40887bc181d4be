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
from onnx import TensorProto, helper, numpy_helper

from onnxprobe.autodiff import registry
from onnxprobe.autodiff.builder import FLOAT_TYPES, TAG, GraphBuilder, np_dtype
from onnxprobe.errors import ModelError, OpsetTooOld, UsageError
from onnxprobe.graph.builder import default_opset
from onnxprobe.graph.shapes import static_shape, value_types
from onnxprobe.graph.walk import implicit_inputs, node_display_name, subgraphs


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


class NodeGrad:
    """What a rule sees: one forward node, its output gradients, and builders (delegated to the engine's
    GraphBuilder, so ``g.Mul(a, b)``, ``g.reduce_sum(x, [1])``, ``g.const(...)`` all work)."""

    def __init__(self, engine: "Engine", node: onnx.NodeProto, name: str, dys: list[str | None], wants: list[bool]):
        self.engine = engine
        self.node = node
        self.name = name
        self.x = list(node.input)
        self.y = list(node.output)
        self.dys = dys
        self.dy = dys[0] if dys else None
        self._wants = wants
        self.opset = engine.opset
        self.b = engine.b
        # the gradients' dtype: the first output's, or (QuantizeLinear: an integer output) the first input's
        elems = [engine.elem(t) for t in list(node.output[:1]) + list(node.input[:1]) if t]
        self.elem = next((e for e in elems if e in FLOAT_TYPES), None) or next((e for e in elems if e), None) \
            or TensorProto.FLOAT
        self.dtype = np_dtype(self.elem)

    def __getattr__(self, name):
        return getattr(self.b, name)

    # -- the node ------------------------------------------------------------------------------------
    def attr(self, name: str, default=None):
        for a in self.node.attribute:
            if a.name == name:
                return helper.get_attribute_value(a)
        return default

    def has(self, i: int) -> bool:
        return i < len(self.x) and bool(self.x[i])

    def wants(self, i: int) -> bool:
        return i < len(self._wants) and self._wants[i]

    def fail(self, why: str) -> ModelError:
        return ModelError(f"cannot differentiate {self.node.op_type} node {self.name!r}: {why}")

    def needs_opset(self, needed: int, what: str) -> OpsetTooOld:
        """The error for a gradient that needs op versions of opset ``needed`` (grad_plan then converts
        the model and tries again)."""
        return OpsetTooOld(f"cannot differentiate {self.node.op_type} node {self.name!r}: {what} needs opset "
                           f"{needed} or later (model opset {self.opset})", needed)

    # -- static facts --------------------------------------------------------------------------------
    def sshape(self, t: str) -> tuple | None:
        return self.engine.sshape(t)

    def rank(self, t: str) -> int:
        s = self.engine.sshape(t)
        if s is None:
            raise self.fail(f"the rank of {t!r} is unknown (shape inference could not tell)")
        return len(s)

    def static_dims(self, t: str) -> tuple[int, ...] | None:
        """The shape when every dimension is a known integer, else None."""
        s = self.engine.sshape(t)
        if s is None or not all(isinstance(d, int) for d in s):
            return None
        return tuple(s)

    # -- shapes: constants where they are static, Shape / Size ops where they are not -----------------
    def Shape(self, t: str, start: int | None = None, end: int | None = None) -> str:  # noqa: N802 - ONNX op name
        d = self.static_dims(t)
        if d is not None:
            return self.b.ints(list(d)[start:end])  # Python slicing clamps as Shape's start / end do
        return self.b.op("Shape", t, start=start, end=end)

    def shape(self, t: str, start: int | None = None, end: int | None = None) -> str:
        d = self.static_dims(t)
        if d is not None:
            return self.b.ints(list(d)[start:end])
        return self.b.shape(t, start, end)

    def Size(self, t: str) -> str:  # noqa: N802
        d = self.static_dims(t)
        if d is not None:
            return self.b.const(np.array(int(np.prod(d)) if d else 1, np.int64))
        return self.b.op("Size", t)

    def value(self, t: str) -> np.ndarray | None:
        return self.engine.const_value(t)

    def ints_input(self, i: int) -> list[int] | None:
        """A constant integer input (axes, pads, perm...) as a list, or None when it is not constant."""
        if not self.has(i):
            return None
        v = self.value(self.x[i])
        return None if v is None else [int(a) for a in np.asarray(v).reshape(-1)]

    def norm_axes(self, axes, rank: int) -> list[int]:
        return sorted(int(a) + rank if int(a) < 0 else int(a) for a in axes)

    # -- small builders that know the gradient's dtype -----------------------------------------------
    def scalar(self, v: float) -> str:
        return self.b.const(np.array(v, dtype=self.dtype))

    def mask(self, cond: str) -> str:
        """A boolean tensor as 0/1 in the gradient's dtype, to multiply with: ``Mul(dy, mask(c))`` is dy
        where c, else 0 (onnxruntime's Where is an order of magnitude slower than Cast + Mul)."""
        return self.b.Cast(cond, to=self.elem)

    def zeros_like(self, t: str) -> str:
        dims = self.static_dims(t)
        shape = self.b.ints(dims) if dims is not None else self.b.Shape(t)
        return self.b.op("ConstantOfShape", shape, value=numpy_helper.from_array(np.zeros([1], self.dtype)))

    def count(self, t: str, axes: list[int] | None = None) -> str:
        """Number of elements of ``t`` over ``axes`` (all when None), as a scalar of the gradient's dtype."""
        s = self.sshape(t)
        if s is not None:
            ax = range(len(s)) if axes is None else axes
            dims = [s[a] for a in ax]
            if all(isinstance(d, int) for d in dims):
                return self.scalar(float(np.prod(dims)) if dims else 1.0)
        shp = self.b.Shape(t)
        if axes is not None:
            shp = self.b.Gather(shp, self.b.ints(axes), axis=0)
        n = self.b.reduce("ReduceProd", shp, None, keepdims=0)
        return self.b.Cast(n, to=self.elem)

    def sum_to(self, grad: str, target: str, grad_shape: tuple | None) -> str:
        return self.engine.sum_to(grad, target, grad_shape)

    def forward_output(self, k: int, base: str) -> str:
        """Output ``k`` of the forward node, added when the model left it out (e.g. MaxPool's Indices)."""
        while len(self.node.output) <= k:
            self.node.output.append("")
        if not self.node.output[k]:
            self.node.output[k] = self.b.fresh(f"{self.node.output[0]}.{base}")
        self.y = list(self.node.output)
        return self.node.output[k]


class Engine:
    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self.graph = model.graph
        self.opset = default_opset(model)
        self.types = shaped_types(annotate_outputs(model))
        self.names = _all_names(model)
        self.b = GraphBuilder(self.names, self.opset)
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
            return numpy_helper.to_array(src)
        for a in src.attribute:
            if a.name == "value":
                return numpy_helper.to_array(a.t)
            if a.name == "value_int":
                return np.array(a.i, np.int64)
            if a.name == "value_ints":
                return np.array(list(a.ints), np.int64)
            if a.name == "value_float":
                return np.array(a.f, np.float32)
            if a.name == "value_floats":
                return np.array(list(a.floats), np.float32)
        return None

    # -- un-broadcasting -----------------------------------------------------------------------------
    def sum_to(self, grad: str, target: str, grad_shape: tuple | None) -> str:
        """Sum ``grad`` (of static shape ``grad_shape`` when known) down to the shape of ``target``."""
        b = self.b
        ts = self.sshape(target)
        if ts is not None and grad_shape is not None and len(ts) == len(grad_shape) and all(
                a == c and a is not None for a, c in zip(ts, grad_shape)):
            return grad
        if ts is None or grad_shape is None:
            raise ModelError(f"cannot sum the gradient back to the shape of {target!r}: rank unknown")
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


def _all_names(model: onnx.ModelProto) -> set[str]:
    names: set[str] = set()

    def visit(g: onnx.GraphProto) -> None:
        names.update(i.name for i in g.input)
        names.update(i.name for i in g.initializer)
        names.update(o.name for o in g.output)
        for n in g.node:
            names.update(n.input)
            names.update(n.output)
            names.add(n.name)
            for _, sg in subgraphs(n):
                visit(sg)

    visit(model.graph)
    return names


def _differentiable_slots(node: onnx.NodeProto) -> list[int]:
    st = registry.status(node.op_type, node.domain)
    if st == "non-differentiable":
        return []
    if st == "rule":
        r = registry.RULES[node.op_type]
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
    """
    from onnxprobe.autodiff.fold import fold_batchnorm

    registry.load()
    out = onnx.ModelProto()
    out.CopyFrom(model)
    eng = Engine(out)
    for t in list(seeds) + list(wrt):
        if t not in eng.names:
            raise UsageError(f"no tensor named {t!r} in the model")
    protected = set(seeds) | set(wrt) | set(outputs or []) | set(keep)
    if fold and fold_batchnorm(out, eng.types, protected, eng.opset, eng.b.fresh, set(wrt)):
        eng = Engine(out)
    g = out.graph
    nodes = list(g.node)

    # forward: which tensors depend on a requested tensor through differentiable slots
    rg = {t for t in wrt if eng.is_float(t)}
    slots: dict[int, list[int]] = {}
    for n in nodes:
        sl = _differentiable_slots(n)
        slots[id(n)] = sl
        hit = any(i < len(n.input) and n.input[i] in rg for i in sl)
        if not hit and any(True for _ in subgraphs(n)):
            hit = bool(set(implicit_inputs(n)) & rg) and registry.status(n.op_type) != "non-differentiable"
        if hit:
            # a straight-through rule (QuantizeLinear) carries the gradient through its integer output
            through = registry.status(n.op_type, n.domain) == "rule" and registry.RULES[n.op_type].straight_through
            rg.update(o for o in n.output if o and (eng.is_float(o) or through))
    # backward: which tensors the seeds depend on
    reach = set(seeds)
    active: list[onnx.NodeProto] = []
    for n in reversed(nodes):
        if not any(o in reach for o in n.output if o):
            continue
        reach.update(i for i in n.input if i)
        if any(o in rg and o in reach for o in n.output if o) and any(
                i < len(n.input) and n.input[i] in rg for i in slots[id(n)]):
            active.append(n)
        elif any(True for _ in subgraphs(n)) and any(o in rg for o in n.output):
            active.append(n)
    # active is in reverse topological order already

    contributions: dict[str, list[str]] = {}
    for t, s in seeds.items():
        contributions.setdefault(t, []).append(s)
    final: dict[str, str | None] = {}
    bw_made: set[str] = set()  # tensors produced by backward nodes
    claimed: set[str] = set()  # backward tensors already renamed after a forward tensor
    rename: dict[str, str] = {}
    seed_values = set(seeds.values())

    def finalize(t: str) -> str | None:
        if t in final:
            return final[t]
        cs = contributions.get(t, [])
        if not cs:
            final[t] = None
        elif len(cs) == 1:
            c = cs[0]
            if c in bw_made and c not in claimed and c not in seed_values:
                claimed.add(c)
                rename[c] = eng.b.fresh(f"{t}_grad")
            final[t] = c
        else:
            eng.b.scope, eng.b.doc = f"{TAG}{t}", f"onnxprobe backward: fan-out sum for {t}"
            final[t] = eng.b.op("Sum", *cs, out=eng.b.fresh(f"{t}_grad"))
        return final[t]

    index = {id(n): k for k, n in enumerate(nodes)}
    stopped: list[str] = []
    for n in active:
        display = node_display_name(n, index[id(n)])
        st = registry.status(n.op_type, n.domain)
        if st != "rule" and unsupported == "skip":
            stopped.append(f"{n.op_type} {display}")
            continue
        if st != "rule":
            needed = [i for i in n.input if i in rg][:3]
            hint = "it has no gradient" if st == "non-differentiable" else "no gradient rule for it"
            raise ModelError(
                f"cannot differentiate op {n.op_type} at node {display!r} ({hint}); it lies between the loss and "
                f"{', '.join(repr(x) for x in needed)}. Supported ops: {', '.join(registry.supported_ops())}. "
                f"Use --wrt to ask only for gradients that do not pass through it")
        rule = registry.RULES[n.op_type]
        dys = [finalize(o) if (o and o in rg and o in reach) else None for o in n.output]
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
        ctx = NodeGrad(eng, n, display, dys, wants)
        grads = rule.fn(ctx)
        if isinstance(grads, dict):
            grads = [grads.get(i) for i in range(len(n.input))]
        grads = list(grads or [])
        for i, gi in enumerate(grads):
            if gi is None or not wants[i]:
                continue
            if i in rule.broadcast:
                gi = eng.sum_to(gi, n.input[i], eng.sshape(n.output[0]))
            contributions.setdefault(n.input[i], []).append(gi)
        for bn in eng.b.nodes[before:]:
            bw_made.update(bn.output)

    grads_out: dict[str, str] = {}
    unused: list[str] = []
    for t in wrt:
        f = finalize(t) if t in reach or t in contributions else None
        if f is None:
            unused.append(t)
        else:
            grads_out[t] = f
    all_grads = {t: f for t, f in final.items() if f is not None}

    # rename single contributions after their forward tensor
    bw_nodes = eng.b.nodes
    if rename:
        for bn in bw_nodes:
            for k, v in enumerate(bn.input):
                if v in rename:
                    bn.input[k] = rename[v]
            for k, v in enumerate(bn.output):
                if v in rename:
                    bn.output[k] = rename[v]
    resolve = lambda v: rename.get(v, v)  # noqa: E731
    grads_out = {t: resolve(v) for t, v in grads_out.items()}
    all_grads = {t: resolve(v) for t, v in all_grads.items()}
    # every requested gradient gets a tensor of its own, named after it
    eng.b.scope, eng.b.doc = TAG.rstrip("/"), "onnxprobe backward: gradient output"
    outs_seen: set[str] = set()
    for t, v in grads_out.items():
        if not v.startswith(f"{t}_grad") or v in outs_seen or v in seed_values:
            v = eng.b.op("Identity", v, out=eng.b.fresh(f"{t}_grad"))
            grads_out[t] = v
        outs_seen.add(v)
    bw_nodes = eng.b.nodes

    g.node.extend(bw_nodes)
    want_outputs = list(dict.fromkeys(list(outputs or []) + list(grads_out.values()) + list(keep)))
    types = eng.types
    del g.output[:]
    for name in want_outputs:
        vi = onnx.ValueInfoProto(name=name)
        src = next((t for t, v in grads_out.items() if v == name), name)
        tp = types.get(src)
        if tp is not None:
            vi.type.CopyFrom(tp)
        g.output.append(vi)
    bw_names = {n.name for n in bw_nodes}
    if prune:
        _prune(out, set(want_outputs))
    n_bw = sum(1 for n in out.graph.node if n.name in bw_names)
    n_fw = len(out.graph.node) - n_bw
    return Backward(out, grads_out, unused, n_fw, n_bw, all_grads, stopped)


def _prune(model: onnx.ModelProto, outputs: set[str]) -> None:
    """Remove the nodes (forward or backward) that no output needs, and the initializers they used."""
    g = model.graph
    need = set(outputs)
    keep = []
    for n in reversed(list(g.node)):
        if any(o in need for o in n.output if o) or n.op_type in ("If", "Loop", "Scan") and any(o in need for o in n.output):
            c = onnx.NodeProto()
            c.CopyFrom(n)
            keep.append(c)
            need.update(i for i in n.input if i)
            need.update(implicit_inputs(n))
    keep.reverse()
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
