"""Shared pieces of the recurrent rules (rules/recurrent.py): a loop over the time axis written as a Scan
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
    b = GraphBuilder(g.engine.names, g.opset, nodes=nodes, scope=g.b.scope, doc=g.b.doc)
    s_in = [g.b.fresh(f"{g.b.scope}/state") for _ in states]
    x_in = [g.b.fresh(f"{g.b.scope}/slice") for _ in seqs]
    s_out, outs = step(b, list(s_in), list(x_in))
    vis = lambda names: [helper.make_tensor_value_info(n, elem, [None, None]) for n in names]  # noqa: E731
    outs_id = [b.op("Identity", o) for o in list(s_out) + list(outs)]
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
