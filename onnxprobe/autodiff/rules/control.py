"""Control flow: If, Loop and Scan. Each body is differentiated as a model of its own
(``g.engine.differentiate_body``, autodiff/nested.py); the values its backward nodes read are exposed by
the forward node itself (extra If outputs, extra Loop / Scan scan outputs holding each iteration's value),
so nothing is computed twice, and the gradients of the outer tensors a body reads (weights of the outer
scope) come back as extra outputs of the backward node."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxprobe.autodiff.nested import BodyGrad, rename
from onnxprobe.autodiff.registry import rule
from onnxprobe.errors import UnknownShape, first_line
from onnxprobe.graph.builder import GraphBuilder, np_dtype
from onnxprobe.graph.shapes import infer_shapes, static_shape, value_types
from onnxprobe.graph.walk import outer_reads


def _elem(types: dict, t: str, default: int) -> int:
    tp = types.get(t)
    if tp is not None and tp.HasField("tensor_type") and tp.tensor_type.elem_type:
        return tp.tensor_type.elem_type
    return default


def _vi(name: str, elem: int, shape=None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _typed_like(name: str, types: dict, t: str, default: int, rank: bool = True) -> onnx.ValueInfoProto:
    """A value_info for ``name`` with ``t``'s element type (and rank, with unknown dimensions)."""
    return _vi(name, _elem(types, t, default), _rank_of(types, t) if rank else None)


def _rank_of(types: dict, t: str, drop: int = 0) -> list | None:
    """Unknown dimensions of ``t``'s rank (less ``drop``), for a body input's type; None when unknown."""
    tp = types.get(t)
    if tp is None or not tp.HasField("tensor_type") or not tp.tensor_type.HasField("shape"):
        return None
    return [None] * max(len(tp.tensor_type.shape.dim) - drop, 0)


def _zeros(b: GraphBuilder, like: str, elem: int, fill: float = 0.0) -> str:
    return b.op("ConstantOfShape", b.op("Shape", like), value=numpy_helper.from_array(np.full([1], fill, np_dtype(elem))))


def _body_builder(g, nodes: list) -> GraphBuilder:
    return GraphBuilder(g.engine.names, g.opset, nodes=nodes, scope=g.b.scope, doc=g.b.doc, strict=True)


def _graph_attr(node: onnx.NodeProto, name: str) -> onnx.AttributeProto:
    return next(a for a in node.attribute if a.name == name)


def _replace_nodes(gr: onnx.GraphProto, nodes: list) -> None:
    copies = []
    for n in nodes:
        c = onnx.NodeProto()
        c.CopyFrom(n)
        copies.append(c)
    del gr.node[:]
    gr.node.extend(copies)


def _expose(g, gr: onnx.GraphProto, t: str, nodes: list) -> str:
    """The body output that carries forward value ``t`` out of ``gr`` (an Identity where ``t`` is not a
    node output of the body, or is one of its outputs already)."""
    produced = {o for n in gr.node for o in n.output}
    if t in produced and t not in {o.name for o in gr.output}:
        return t
    b = _body_builder(g, nodes)
    return b.op("Identity", t, out=g.b.fresh(f"{t}.exposed"))


@rule("If", inputs=())
def if_(g):
    """y = then(...) if c else else(...), both bodies reading outer tensors w  ->  the backward If on the
    same c: its then body is the backward pass of the then body (dw = its gradient w.r.t. w, zeros for a w
    that body does not read), its else body that of the else body. The values each backward body reads are
    extra outputs of the forward If (the other branch returns empty tensors there)."""
    node, types = g.node, g.engine.types
    wrt = list(g.implicit)
    res, bodies, failed, pre = {}, {}, {}, {}
    for name in ("then_branch", "else_branch"):
        body = _graph_attr(node, name).g
        bodies[name] = body
        seeds, pre[name] = {}, []
        for k, d in enumerate(g.dys):
            if d and k < len(body.output):
                if body.output[k].name in seeds:
                    raise g.fail(f"its {name} returns one tensor as two outputs")
                seeds[body.output[k].name] = _seed_of_rank(g, body.output[k], node.output[k], d, pre[name])
        try:
            res[name] = g.engine.differentiate_body(body, seeds, wrt, where=f"the {name.split('_')[0]} branch of If {g.name!r}")
        except UnknownShape as e:
            failed[name] = e
    if len(failed) == 2:
        raise failed["then_branch"]
    for name, e in failed.items():  # e.g. a branch the feed does not take: no run tells its shapes
        g.engine.warnings.append(f"the {name.split('_')[0]} branch of If {g.name!r} has no backward pass ({first_line(e)}): "
                                 "a run that takes it gets NaN gradients")
        res[name] = BodyGrad(list(bodies[name].node), [], {}, [])
    wrt = [w for w in wrt if any(r.grads.get(w) for r in res.values())]
    if not wrt:
        return {}
    # expose: forward If outputs += then's needed values, else's needed values
    saved = {name: {t: g.b.fresh(f"{t}.saved") for t in r.needed} for name, r in res.items()}
    for o in list(saved["then_branch"].values()) + list(saved["else_branch"].values()):
        node.output.append(o)
    for name, body in bodies.items():
        r = res[name]
        extra = []
        outs = []
        for other in ("then_branch", "else_branch"):
            for t in res[other].needed:
                if other == name:
                    outs.append(_expose(g, body, t, extra))
                else:  # the other branch's value: an empty tensor of its type; a bool one element (False), as it
                    # may be an If's condition in the backward body, which onnxruntime's optimizer folds where the
                    # forward If's condition is a constant (an empty condition there fails the session)
                    e = _elem(res[other].types, t, g.elem)
                    b = _body_builder(g, extra)
                    size = 1 if e == TensorProto.BOOL else 0
                    outs.append(b.op("Constant", value=numpy_helper.from_array(np.zeros([size], np_dtype(e)))))
        _replace_nodes(body, r.forward + extra)
        for o, (other, t) in zip(outs, [(o_, t_) for o_ in ("then_branch", "else_branch") for t_ in res[o_].needed]):
            body.output.append(_typed_like(o, res[other].types, t, g.elem, rank=other == name))
    # the backward If
    outs = {w: g.b.fresh(f"{w}.grad.if") for w in wrt}
    graphs = {}
    for name, r in res.items():
        nodes = pre[name] + list(r.backward)
        rename(nodes, saved[name])
        b = _body_builder(g, nodes)
        gouts = []
        for w in wrt:
            e = _elem(types, w, g.elem)
            v = r.grads.get(w)
            v = b.op("Identity", v) if v else _zeros(b, w, e, np.nan if name in failed else 0.0)
            gouts.append(_vi(v, e))
        graphs[name] = helper.make_graph(nodes, f"{node.name or 'If'}.grad.{name}", [], gouts)
    bn = helper.make_node("If", [g.x[0]], list(outs.values()), name=g.b.fresh(f"{g.b.scope}/If"),
                          then_branch=graphs["then_branch"], else_branch=graphs["else_branch"])
    bn.doc_string = g.b.doc
    g.b.nodes.append(bn)
    return dict(outs)


def _seed_of_rank(g, out: onnx.ValueInfoProto, outer: str, d: str, nodes: list) -> str:
    """The gradient of a branch's output: the If output's, reshaped to the branch's own static shape where
    their ranks differ (AffineGrid's expanded function returns a [1] start in one branch, a scalar in the
    other): onnxruntime's type inference gives the seed the rank of the branch the run took, and the backward
    pass of the other branch, built for its own rank, then failed to load. The branch that runs returns
    the If output, so the Reshape keeps every element (-1 for one dimension inference leaves unknown)."""
    mine = static_shape(out.type) if out.type.HasField("tensor_type") else None
    if mine is None:
        mine = static_shape(g.engine.types.get(out.name))
    theirs = g.engine.types.get(outer)
    tt = theirs.tensor_type if theirs is not None and theirs.HasField("tensor_type") else None
    if mine is None or tt is None or not tt.HasField("shape") or len(tt.shape.dim) == len(mine):
        return d
    dims = [x if isinstance(x, int) else -1 for x in mine]  # one dimension shape inference cannot tell: -1
    if dims.count(-1) > 1:
        return d
    b = _body_builder(g, nodes)
    return b.op("Reshape", d, b.ints(dims))


def _float_states(g, first: int, count: int) -> list[int]:
    """The float carried states (their gradient flows back through the iterations)."""
    return [k for k in range(count) if g.engine.is_float(g.x[first + k])]


def _seeds(g, names: dict[int, str], base: str) -> dict[int, str]:
    return {k: g.b.fresh(f"{v}.{base}") for k, v in names.items()}


def _seed_map(g, outs: list[str], fresh: dict[int, str]) -> dict[str, str]:
    seeds = {}
    for k, s in fresh.items():
        if outs[k] in seeds:
            raise g.fail("its body returns one tensor as two outputs")
        seeds[outs[k]] = s
    return seeds


def _expose_steps(g, body: onnx.GraphProto, r, needed: list[str], scan: bool) -> dict[str, str]:
    """Each iteration's value of ``needed`` becomes an extra scan output of the forward node (axis 0,
    forward direction); returns forward value -> the node's new output (the stacked values)."""
    node, extra, exposed = g.node, [], {}
    for t in needed:
        exposed[t] = (_expose(g, body, t, extra), g.b.fresh(f"{t}.saved"))
    n_scan_out = len(body.output) - (len(node.input) - _num_scan_inputs(node) if scan else 0)
    _replace_nodes(body, r.forward + extra)
    for t, (o, outer) in exposed.items():
        body.output.append(_typed_like(o, r.types, t, g.elem))
        node.output.append(outer)
    if scan and exposed:
        for a in ("scan_output_directions", "scan_output_axes"):
            _extend_ints(node, a, n_scan_out, [0] * len(exposed))
    return {t: outer for t, (_, outer) in exposed.items()}


def _num_scan_inputs(node: onnx.NodeProto) -> int:
    return next(a.i for a in node.attribute if a.name == "num_scan_inputs")


def _extend_ints(node: onnx.NodeProto, name: str, existing: int, extra: list[int]) -> None:
    for a in node.attribute:
        if a.name == name:
            a.ints.extend(extra)
            return
    node.attribute.append(helper.make_attribute(name, [0] * existing + extra))


class _Reverse:
    """The backward Scan, iterating in reverse: carried gradient states, accumulated gradients of outer
    tensors, scan inputs (output gradients, exposed values) and scan outputs (input-slice gradients)."""

    def __init__(self, g, r):
        self.g, self.r = g, r
        self.nodes: list = []
        self.b = _body_builder(g, self.nodes)
        self.states, self.acc, self.scans, self.outs = [], [], [], []
        self.renames: dict[str, str] = {}

    def state(self, inner: str, init: str, value: str | None, elem: int, like: str) -> None:
        self.states.append((inner, init, value, elem, _rank_of(self.g.engine.types, like)))

    def accumulate(self, w: str, contribution: str, elem: int) -> None:
        self.acc.append((w, contribution, elem, _rank_of(self.g.engine.types, w)))

    def scan(self, inner: str, outer: str, direction: int, axis: int, elem: int, rank: list | None) -> None:
        self.scans.append((inner, outer, direction, axis, elem, rank))

    def step_value(self, t: str, outer: str, direction: int, axis: int, elem: int, rank: list | None) -> None:
        """A forward value read by the backward body: each iteration's slice of ``outer``."""
        inner = self.g.b.fresh(f"{t}.step")
        self.renames[t] = inner
        self.scan(inner, outer, direction, axis, elem, rank)

    def scan_out(self, value: str, direction: int, axis: int, elem: int, rank: list | None = None) -> None:
        self.outs.append((value, direction, axis, elem, rank))

    def emit(self, guard: bool = False) -> list[str]:
        """The backward Scan; ``guard`` (a Loop, which may run zero times): inside an If that, with no
        iteration, passes the initial states through and gives zero accumulated gradients (onnxruntime's
        Scan refuses a scan input of 0 slices: 'Invalid dim0_offset of 0')."""
        g, b = self.g, self.b
        bw = list(self.r.backward)
        rename(bw, self.renames)
        self.nodes[:0] = bw
        ins = [_vi(s[0], s[3], s[4]) for s in self.states]
        outs = []
        # the body's outputs declare their ranks: onnxruntime's Scan wants every output shaped, and a gradient
        # summed back over runtime axes (a carried value whose dimensions are not known) has no inferred one
        for inner, _, value, elem, rank in self.states:
            v = b.op("Identity", value) if value else _zeros(b, inner, elem)
            outs.append(_vi(v, elem, rank))
        acc_in = []
        for w, c, elem, rank in self.acc:
            a = g.b.fresh(f"{w}.grad.acc")
            acc_in.append(_zeros(g.b, w, elem))
            ins.append(_vi(a, elem, rank))
            outs.append(_vi(b.op("Add", a, c), elem, rank))
        ins += [_vi(s[0], s[4], s[5]) for s in self.scans]
        outs += [_vi(b.op("Identity", v), e, rank) for v, _, _, e, rank in self.outs]
        node = g.node
        body = helper.make_graph(self.nodes, f"{node.name or node.op_type}.grad.body", ins, outs)
        attrs = dict(body=body, num_scan_inputs=len(self.scans), scan_input_directions=[s[2] for s in self.scans])
        if any(s[3] for s in self.scans):
            attrs["scan_input_axes"] = [s[3] for s in self.scans]
        if self.outs:
            attrs["scan_output_directions"] = [o[1] for o in self.outs]
            if any(o[2] for o in self.outs):
                attrs["scan_output_axes"] = [o[2] for o in self.outs]
        res = [g.b.fresh(f"{g.b.scope}/grad") for _ in outs]
        inputs = [s[1] for s in self.states] + acc_in + [s[1] for s in self.scans]
        guard = guard and self.scans and not self.outs
        inner = [g.b.fresh(f"{r}.ran") for r in res] if guard else res
        bn = helper.make_node("Scan", inputs, inner, name=g.b.fresh(f"{g.b.scope}/Scan"), **attrs)
        bn.doc_string = g.b.doc
        if not guard:
            g.b.nodes.append(bn)
            return res
        elems = [o.type.tensor_type.elem_type for o in outs]
        ran = helper.make_graph([bn], f"{body.name}.ran", [], [_vi(t, e) for t, e in zip(inner, elems)])
        idle_nodes: list = []
        ib = _body_builder(g, idle_nodes)
        idle_out = [ib.op("Identity", t) for t in inputs[:len(outs)]]
        idle = helper.make_graph(idle_nodes, f"{body.name}.idle", [], [_vi(t, e) for t, e in zip(idle_out, elems)])
        steps = g.b.op("Greater", g.b.op("Size", self.scans[0][1]), g.b.const(np.array(0, np.int64)))
        node = helper.make_node("If", [steps], res, name=g.b.fresh(f"{g.b.scope}/If"), then_branch=ran, else_branch=idle)
        node.doc_string = g.b.doc
        g.b.nodes.append(node)
        return res


@rule("Loop", inputs=tuple(range(2, 4096)))
def loop(g):
    """v_N, s = Loop(M, cond, v_0): v_{i+1}, s_i = body(i, cond_i, v_i), reading outer tensors w  ->  a
    Scan over the iterations in reverse: (dv_i, dw_i) = the body's backward pass at iteration i applied
    to (dv_{i+1}, ds_i), from dv_N = the gradient of the Loop's final values; dv_0 is v_0's gradient and
    dw = sum of dw_i. The values an iteration's backward reads are extra scan outputs of the forward Loop
    (one slice per iteration; the iteration number is always one, so the backward Scan knows the count)."""
    node = g.node
    body = _graph_attr(node, "body").g
    n = len(g.x) - 2
    v_in = [i.name for i in body.input[2:2 + n]]
    outs = [o.name for o in body.output[1:]]
    states = _float_states(g, 2, n)
    after = _after_one_iteration(g, body, states)
    for k in states:  # the backward Scan carries dv in one shape: a value that grows (Concat) has none
        first, last = g.sshape(g.x[2 + k]), g.sshape(node.output[k]) if k < len(node.output) and node.output[k] else None
        # the end's shape is known from a run (grad); without one (--export keeps dynamic dimensions), the
        # body's shape inference on the initial shape tells one iteration's (dynamic ones given sizes)
        start, grown, said = (first, last, "") if _fixed(first) and _fixed(last) else after.get(k, (None, None, ""))
        when = "at the end" if grown is last else "after one iteration"
        if _fixed(start) and _fixed(grown) and start != grown:
            raise g.fail(f"its carried value {v_in[k]!r} changes shape between iterations ({_dims(start)} at the start, "
                         f"{_dims(grown)} {when}{said}): its gradient cannot be carried back through the iterations")
    dv = _seeds(g, {k: outs[k] for k in states}, "grad.next")
    ds = _seeds(g, {n + j: outs[n + j] for j in range(len(outs) - n) if g.dys[n + j]}, "grad.step")
    wrt = [v_in[k] for k in states] + list(g.implicit)
    in_types = {v_in[k]: g.engine.types[g.x[2 + k]] for k in range(n) if g.x[2 + k] in g.engine.types}
    r = g.engine.differentiate_body(body, _seed_map(g, outs, {**dv, **ds}), wrt, in_types, f"the body of Loop {g.name!r}")
    needed = list(dict.fromkeys([body.input[0].name] + r.needed))  # the iteration number gives the count
    saved = _expose_steps(g, body, r, needed, scan=False)
    rev = _Reverse(g, r)
    for k in states:
        e = _elem(g.engine.types, g.x[2 + k], g.elem)
        rev.state(dv[k], g.dys[k] or g.zeros_like(g.x[2 + k]), r.grads.get(v_in[k]), e, g.x[2 + k])
    acc = [w for w in g.implicit if r.grads.get(w)]
    for w in acc:
        rev.accumulate(w, r.grads[w], _elem(g.engine.types, w, g.elem))
    for k, s in ds.items():
        rev.scan(s, g.dys[k], 1, 0, _elem(g.engine.types, node.output[k], g.elem), _rank_of(g.engine.types, node.output[k], 1))
    for t, outer in saved.items():
        rev.step_value(t, outer, 1, 0, _elem(r.types, t, TensorProto.INT64 if t == body.input[0].name else g.elem),
                       _rank_of(r.types, t))
    res = rev.emit(guard=True)
    grads: dict = {2 + k: res[j] for j, k in enumerate(states) if g.wants(2 + k)}
    grads.update({w: res[len(states) + j] for j, w in enumerate(acc)})
    return grads


def _after_one_iteration(g, body: onnx.GraphProto, states: list[int]) -> dict[int, tuple]:
    """State k -> (its initial shape, the shape ONNX shape inference gives the body's output for it, what
    sizes its dynamic dimensions were given) when the body reads the states' initial shapes and the outer
    tensors as they are outside, dynamic dimensions given sizes (one per name, distinct primes): a state
    whose shape one iteration changes (v <- Concat(v, 2 v)), which a body declared with unknown dimensions
    hides."""
    sizes: dict = {}

    def sized(tp: onnx.TypeProto) -> onnx.TypeProto:
        out = onnx.TypeProto()
        out.CopyFrom(tp)
        if out.HasField("tensor_type") and out.tensor_type.HasField("shape"):
            for d in out.tensor_type.shape.dim:
                if not d.HasField("dim_value"):
                    key = d.dim_param or object()
                    d.dim_value = sizes.setdefault(key, _PRIMES[len(sizes) % len(_PRIMES)])
        return out

    m = onnx.ModelProto()
    m.ir_version = g.engine.model.ir_version
    m.opset_import.extend(g.engine.model.opset_import)
    gr = m.graph
    gr.CopyFrom(body)
    del gr.value_info[:]  # the enclosing inference's, made with the states' declared (unknown) dimensions
    for o in gr.output:
        o.type.tensor_type.ClearField("shape")
    start, said = {}, {}
    for k in states:
        tp = g.engine.types.get(g.x[2 + k])
        if tp is None or k + 2 >= len(gr.input) or 1 + k >= len(body.output):
            continue
        gr.input[k + 2].type.CopyFrom(sized(tp))
        start[k] = static_shape(gr.input[k + 2].type)
        dims = tp.tensor_type.shape.dim if tp.HasField("tensor_type") else []
        given = [f"{d.dim_param or '?'}={v}" for d, v in zip(dims, start[k] or ()) if not d.HasField("dim_value")]
        said[k] = f" (its dynamic dimensions given sizes: {', '.join(given)})" if given else ""
    declared = {i.name for i in gr.input} | {i.name for i in gr.initializer}
    for t in dict.fromkeys(outer_reads(body)):
        if t not in declared and g.engine.types.get(t) is not None:
            gr.input.append(helper.make_value_info(t, sized(g.engine.types[t])))
    try:
        types = value_types(infer_shapes(m, []))
    except Exception:  # noqa: BLE001 - a body inference cannot read tells nothing
        return {}
    return {k: (start[k], static_shape(types.get(body.output[1 + k].name)), said[k]) for k in start}


_PRIMES = (3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47)


def _fixed(shape) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


def _dims(shape) -> str:
    return "x".join(map(str, shape)) or "scalar"


def _ints_attr(node: onnx.NodeProto, name: str, n: int) -> list[int]:
    for a in node.attribute:
        if a.name == name:
            return list(a.ints)
    return [0] * n


@rule("Scan", inputs=None)
def scan(g):
    """s_N, y = Scan(s_0, x): s_{t+1}, y_t = body(s_t, x_t) (each x and y in its own direction and axis),
    reading outer tensors w  ->  a Scan in the opposite directions: (ds_t, dx_t, dw_t) = the body's backward
    pass at step t applied to (ds_{t+1}, dy_t), from ds_N = the gradient of the final states; dx is the
    scan output of the dx_t, ds_0 the initial states' gradient, dw = sum of dw_t. The values a step's
    backward reads are extra scan outputs of the forward Scan; the x_t it reads are x again, reversed."""
    node = g.node
    if g.opset < 9:
        raise g.needs_opset(11, "Scan (opset 8's form has sequence_lens)")
    body = _graph_attr(node, "body").g
    m = _num_scan_inputs(node)
    n = len(g.x) - m
    k_out = len(body.output) - n
    in_dirs, in_axes = _ints_attr(node, "scan_input_directions", m), _ints_attr(node, "scan_input_axes", m)
    out_dirs, out_axes = _ints_attr(node, "scan_output_directions", k_out), _ints_attr(node, "scan_output_axes", k_out)
    s_in = [i.name for i in body.input[:n]]
    x_in = [i.name for i in body.input[n:]]
    outs = [o.name for o in body.output]
    states = _float_states(g, 0, n)
    ds = _seeds(g, {k: outs[k] for k in states}, "grad.next")
    dy = _seeds(g, {n + j: outs[n + j] for j in range(k_out) if g.dys[n + j]}, "grad.step")
    xw = [i for i in range(m) if g.wants(n + i)]
    wrt = [s_in[k] for k in states] + [x_in[i] for i in xw] + list(g.implicit)
    in_types = {s_in[k]: g.engine.types[g.x[k]] for k in range(n) if g.x[k] in g.engine.types}
    r = g.engine.differentiate_body(body, _seed_map(g, outs, {**ds, **dy}), wrt, in_types, f"the body of Scan {g.name!r}")
    saved = _expose_steps(g, body, r, [t for t in r.needed if t not in x_in], scan=True)
    rev = _Reverse(g, r)
    for k in states:
        e = _elem(g.engine.types, g.x[k], g.elem)
        rev.state(ds[k], g.dys[k] or g.zeros_like(g.x[k]), r.grads.get(s_in[k]), e, g.x[k])
    acc = [w for w in g.implicit if r.grads.get(w)]
    for w in acc:
        rev.accumulate(w, r.grads[w], _elem(g.engine.types, w, g.elem))
    for k, s in dy.items():
        j = k - n
        rev.scan(s, g.dys[k], 1 - out_dirs[j], out_axes[j], _elem(g.engine.types, node.output[k], g.elem),
                 _rank_of(g.engine.types, node.output[k], 1))
    for t, outer in saved.items():
        rev.step_value(t, outer, 1, 0, _elem(r.types, t, g.elem), _rank_of(r.types, t))
    for i, t in enumerate(x_in):
        if t in r.needed:
            rev.step_value(t, g.x[n + i], 1 - in_dirs[i], in_axes[i], _elem(g.engine.types, g.x[n + i], g.elem),
                           _rank_of(g.engine.types, g.x[n + i], 1))
    if not rev.scans and m:
        # a backward pass that reads no step's values (s_{t+1} = s_t + x_t) still runs once per step: the
        # forward's first scan input, unread, gives the backward Scan its number of iterations
        rev.scan(g.b.fresh(f"{x_in[0]}.steps"), g.x[n], 1 - in_dirs[0], in_axes[0],
                 _elem(g.engine.types, g.x[n], g.elem), _rank_of(g.engine.types, g.x[n], 1))
    dx_slots = [i for i in xw if r.grads.get(x_in[i])]
    for i in dx_slots:
        rev.scan_out(r.grads[x_in[i]], 1 - in_dirs[i], in_axes[i], _elem(g.engine.types, g.x[n + i], g.elem),
                     _rank_of(g.engine.types, g.x[n + i], 1))
    res = rev.emit()
    grads: dict = {k: res[j] for j, k in enumerate(states) if g.wants(k)}
    grads.update({w: res[len(states) + j] for j, w in enumerate(acc)})
    grads.update({n + i: res[len(states) + len(acc) + j] for j, i in enumerate(dx_slots)})
    return grads
