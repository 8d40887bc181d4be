"""Shared pieces of the recurrent rules (rules/recurrent.py, rules/lstm.py): ``Recurrence`` (layout, the
step mask, Y and its gradients, initial states), a loop over the time axis written as a Scan
(or unrolled when the sequence is short and its length static), time reversal within each sequence's
length, the sequence_lens mask, per-direction slices, and the activations with their derivatives
written from their outputs."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from onnxprobe.graph.builder import GraphBuilder

# Sequences of at most this many static steps are unrolled: onnxruntime's Scan costs some tens of
# microseconds per iteration, which dominates the few elementwise ops of a step (measured: bench/grad.py).
UNROLL_STEPS = 4


def time_loop(g, step, states: list[str], seqs: list[str], n_out: int, *, reverse: bool, steps: int | None,
              elem: int) -> tuple[list[str], list[str]]:
    """Run ``step(b, states, slices) -> (states, outputs)`` over axis 0 of ``seqs`` (each slice and state
    is 2-D), from the last step to the first when ``reverse``. Returns the final states and the step
    outputs stacked in time order (n_out of them)."""
    if steps is not None and steps <= UNROLL_STEPS:
        order = range(steps - 1, -1, -1) if reverse else range(steps)
        per_t: dict[int, list[str]] = {}
        for t in order:
            idx = g.const(np.array(t, np.int64))
            xs = [g.b.op("Gather", s, idx, axis=0) for s in seqs]
            states, outs = step(g.b, states, xs)
            per_t[t] = outs
        stacked = []
        for k in range(n_out):
            parts = [g.unsqueeze(per_t[t][k], [0]) for t in range(steps)]
            stacked.append(parts[0] if len(parts) == 1 else g.Concat(*parts, axis=0))
        return states, stacked
    nodes: list = []
    b = GraphBuilder(g.engine.names, g.opset, nodes=nodes, scope=g.b.scope, doc=g.b.doc, strict=True)
    s_in = [g.b.fresh(f"{g.b.scope}/state") for _ in states]
    x_in = [g.b.fresh(f"{g.b.scope}/slice") for _ in seqs]
    s_out, outs = step(b, list(s_in), list(x_in))
    vis = lambda names: [helper.make_tensor_value_info(n, elem, [None, None]) for n in names]  # noqa: E731
    # a body output must be a tensor of the body, and each one its own: an Identity only where not
    made = {o for n in nodes for o in n.output}
    outs_id, seen = [], set()
    for o in list(s_out) + list(outs):
        outs_id.append(o if o in made and o not in seen else b.op("Identity", o))
        seen.add(outs_id[-1])
    body = helper.make_graph(nodes, f"{g.b.scope}/time_loop", vis(s_in) + vis(x_in), vis(outs_id))
    res = [g.b.fresh(f"{g.b.scope}/loop") for _ in outs_id]
    d = 1 if reverse else 0
    node = helper.make_node("Scan", list(states) + list(seqs), res, name=g.b.fresh(f"{g.b.scope}/Scan"), body=body,
                            num_scan_inputs=len(seqs), scan_input_directions=[d] * len(seqs),
                            scan_output_directions=[d] * n_out)
    node.doc_string = g.b.doc
    g.b.nodes.append(node)
    return res[:len(states)], res[len(states):]


def flip(g, t: str, lens: str | None) -> str:
    """Reverse ``t`` (time-major, [T, B, ...]) along time: within each sequence's length when ``lens``
    (int64 [B]) is given, the padding staying at the end, as the reverse direction reads its input."""
    if lens is not None:
        return g.ReverseSequence(t, lens, batch_axis=1, time_axis=0)
    return g.slice(t, [-1], [-(2 ** 63) + 1], [0], [-1])


def step_mask(g, x: str, lens: str | None) -> str | None:
    """[T, B, 1] in the gradient's dtype: 1 where step t is inside sequence b's length, else 0."""
    if lens is None:
        return None
    t = g.Range(g.const(np.array(0, np.int64)), g.squeeze(g.shape(x, 0, 1), [0]), g.const(np.array(1, np.int64)))
    inside = g.Less(g.unsqueeze(t, [1]), g.unsqueeze(lens, [0]))
    return g.unsqueeze(g.Cast(inside, to=g.elem), [2])


def lengths(g, i: int) -> str | None:
    """The sequence_lens input (slot ``i``) as int64, or None when absent."""
    if not g.has(i):
        return None
    s = g.x[i]
    return s if g.engine.elem(s) == TensorProto.INT64 else g.Cast(s, to=TensorProto.INT64)


def direction_slice(g, t: str, d: int, axis: int = 0) -> str:
    """Direction ``d`` of a [D, ...] tensor, the axis dropped."""
    return g.Gather(t, g.const(np.array(d, np.int64)), axis=axis)


def previous(g, seq: str, first: str) -> str:
    """[first, seq[0], ..., seq[T-2]]: each step's previous state (``first``: [1, B, H])."""
    return g.Concat(first, g.slice(seq, [0], [-1], [0]), axis=0)


def stack_directions(g, parts: list[str | None]) -> str | None:
    """[D, ...] from one tensor per direction (None when no direction has one)."""
    if all(p is None for p in parts):
        return None
    if len(parts) == 1:
        return g.unsqueeze(parts[0], [0])
    return g.Concat(*[g.unsqueeze(p, [0]) for p in parts], axis=0)


def flat_gemm(g, a: str, b: str) -> str:
    """sum over (t, n) of a[t, n, :]^T b[t, n, :]: one Gemm of the flattened [T B, k] matrices."""
    return g.Gemm(g.Flatten(a, axis=2), g.Flatten(b, axis=2), transA=1)


ACTIVATIONS = {"Sigmoid", "Tanh", "Relu"}


def activations(g, defaults: list[str]) -> list[str]:
    """The node's activations (per direction, in order), each one of ACTIVATIONS."""
    acts = g.attr("activations")
    acts = [a.decode() if isinstance(a, bytes) else a for a in acts] if acts else None
    n_dir = 2 if _direction(g) == "bidirectional" else 1
    acts = acts or defaults * n_dir
    bad = sorted({a for a in acts if a not in ACTIVATIONS})
    if bad:
        raise g.fail(f"activation {', '.join(bad)} is not supported (only {', '.join(sorted(ACTIVATIONS))})")
    if g.attr("clip") is not None:
        raise g.fail("the clip attribute is not supported")
    return acts


def _direction(g) -> str:
    d = g.attr("direction", "forward")
    return d.decode() if isinstance(d, bytes) else d


def directions(g) -> list[bool]:
    """For each direction of the node: whether it runs in reverse."""
    d = _direction(g)
    return {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[d]


def act(b, name: str, x: str) -> str:
    return b.op(name, x)


def dact(b, name: str, y: str, dtype) -> str:
    """The derivative of activation ``name`` at the point where its output is ``y``."""
    one = b.const(np.array(1.0, dtype))
    if name == "Sigmoid":
        return b.op("Mul", y, b.op("Sub", one, y))
    if name == "Tanh":
        return b.op("Sub", one, b.op("Mul", y, y))
    return b.op("Cast", b.op("Greater", y, b.const(np.array(0.0, dtype))), to=helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


class Recurrence:
    """What the three rules share: layout, the step mask, Y and its gradients, the initial states."""

    def __init__(self, g, n_gates: int, y_from_node: bool = True):
        self.g = g
        self.layout = g.attr("layout", 0)
        x = g.x[0]
        self.x = g.Transpose(x, perm=[1, 0, 2]) if self.layout else x
        rs = g.static_dims(g.x[2])
        self.hidden = int(g.attr("hidden_size") or (rs[2] if rs else 0)) or None
        if self.hidden is None:
            raise g.fail("hidden_size is unknown")
        self.n_gates = n_gates
        xs = g.static_dims(x)
        self.steps = (xs[1] if self.layout else xs[0]) if xs else None
        self.lens = lengths(g, 4)
        self.mask = step_mask(g, self.x, self.lens)
        self.y = None  # [T, D, B, H]: the forward node's Y, or (y_from_node=False) what the rule computes
        if y_from_node:
            y = g.forward_output(0, "Y")
            self.y = g.Transpose(y, perm=[1, 2, 0, 3]) if self.layout else y
        d = g.dys[0]
        self.dy = (g.Transpose(d, perm=[1, 2, 0, 3]) if self.layout else d) if d else None
        self.dstate = [self._state(g.dys[k]) if k < len(g.dys) and g.dys[k] else None for k in (1, 2)]

    def _state(self, t: str | None) -> str | None:
        """A [D, B, H] state ([B, D, H] with layout=1) in the [D, B, H] layout."""
        if t is None:
            return None
        return self.g.Transpose(t, perm=[1, 0, 2]) if self.layout else t

    def zeros_state(self) -> str:
        g = self.g
        return g.ConstantOfShape(g.Concat(g.shape(self.x, 1, 2), g.ints([self.hidden]), axis=0),
                                 value=zero_value(g))

    def initial(self, slot: int, d: int) -> str:
        """Direction d's initial state [B, H] from input ``slot`` (zeros when absent)."""
        g = self.g
        if not g.has(slot):
            return self.zeros_state()
        return direction_slice(g, self._state(g.x[slot]), d)

    def direction(self, d: int, rev: bool) -> dict:
        g = self.g
        y = direction_slice(g, self.y, d, axis=1) if self.y else None
        dy = direction_slice(g, self.dy, d, axis=1) if self.dy else None
        if rev:
            x, dy = flip(g, self.x, self.lens), flip(g, dy, self.lens) if dy else None
            y = flip(g, y, self.lens) if y else None
        else:
            x = self.x
        return {"x": x, "y": y, "dy": dy}

    def masked_dy(self, dy: str | None) -> str | None:
        """dY with the steps past each sequence's length zeroed (Y is 0 there whatever the weights)."""
        if dy is None or self.mask is None:
            return dy
        return self.g.Mul(dy, self.mask)

    def end_state(self, k: int, d: int) -> str | None:
        s = self.dstate[k]
        return direction_slice(self.g, s, d) if s else None

    def time_back(self, t: str, rev: bool) -> str:
        return flip(self.g, t, self.lens) if rev else t

    def x_grad(self, parts: list[str]) -> str:
        g = self.g
        dx = parts[0] if len(parts) == 1 else g.Add(parts[0], parts[1])
        return g.Transpose(dx, perm=[1, 0, 2]) if self.layout else dx

    def state_grad(self, parts: list[str]) -> str | None:
        s = stack_directions(self.g, parts)
        return self.g.Transpose(s, perm=[1, 0, 2]) if (s is not None and self.layout) else s

    def loop(self, step, states, seqs, n_out, reverse):
        g = self.g
        if self.mask is not None:
            seqs = seqs + [self.mask]
        return time_loop(g, step, states, seqs, n_out, reverse=reverse, steps=self.steps, elem=g.elem)


def zero_value(g):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.zeros([1], g.dtype))


def held(b, new: str, old: str, m: str | None) -> str:
    """m new + (1 - m) old: the state held where the sequence has ended."""
    return new if m is None else b.op("Add", old, b.op("Mul", m, b.op("Sub", new, old)))


def masked_grad(b, d: str, m: str | None, dy: str | None = None) -> tuple[str, str | None]:
    """(m d + dy, (1 - m) d): the gradient of the step's new value (the state's, plus Y_t's, which
    ``masked_dy`` has zeroed where the sequence has ended), and the part of the state's that passes to
    the previous step there."""
    if m is None:
        return add(b, d, dy), None
    md = b.op("Mul", d, m)
    return add(b, md, dy), b.op("Sub", d, md)


def add(b, a: str, c: str | None) -> str:
    return a if c is None else b.op("Add", a, c)


def param_grads(g, wants, da: str, x: str, hprev: str) -> dict:
    """dW = sum da^T x, dR = sum da^T h_{t-1}, d(Wb) = sum da, over every step and batch row."""
    out = {}
    if wants(1):
        out["W"] = flat_gemm(g, da, x)
    if wants(2):
        out["R"] = flat_gemm(g, da, hprev)
    if wants(3):
        out["Wb"] = g.reduce_sum(da, [0, 1], keepdims=0)
    return out


def collect(g, rec, per_dir: list[dict], states: tuple[int, ...]) -> dict:
    """The rule's gradients from each direction's: X summed, W / R / B / initial states / P stacked."""
    grads: dict = {}
    if g.wants(0):
        grads[0] = rec.x_grad([p["x"] for p in per_dir])
    for slot, key in ((1, "W"), (2, "R"), (3, "B"), (7, "P")):
        if g.wants(slot) and all(key in p for p in per_dir):
            grads[slot] = stack_directions(g, [p[key] for p in per_dir])
    for k, slot in enumerate(states):
        if g.wants(slot):
            grads[slot] = rec.state_grad([p["h0" if k == 0 else "c0"] for p in per_dir])
    return grads
