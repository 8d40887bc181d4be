"""Indexed reads and writes: TopK (its values; the indices carry no gradient), GatherND, ScatterND,
ScatterElements (w.r.t. the data and the updates), ReverseSequence, TensorScatter. A gradient read at indices is a
gather, one written at indices a scatter (adding where indices repeat); a scatter without reduction keeps
the last of repeated writes, as onnxruntime does."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, numpy_helper

from onnxprobe.autodiff.registry import rule


def _zeros(g, like: str) -> str:
    return g.ConstantOfShape(g.Shape(like), value=numpy_helper.from_array(np.zeros([1], g.dtype)))


def _i64(g, t: str) -> str:
    return t if g.engine.elem(t) == TensorProto.INT64 else g.Cast(t, to=TensorProto.INT64)


def _reduction(g) -> str:
    r = g.attr("reduction", "none")
    return r.decode() if isinstance(r, bytes) else r


@rule("TopK")
def topk(g):
    """values, indices = TopK(x, k, axis)  ->  dx = zeros with d(values) written at the indices (distinct
    along the axis) by ScatterElements"""
    if g.opset < 11:
        raise g.needs_opset(11, "TopK (a ScatterElements)")
    idx = g.forward_output(1, "indices")
    return [g.ScatterElements(_zeros(g, g.x[0]), idx, g.dy, axis=g.attr("axis", -1))]


@rule("GatherND")
def gather_nd(g):
    """y = x[idx[..., 0], ..., idx[..., K-1]] (a slice of x per index tuple)  ->  dx = zeros with dy added
    at the index tuples (ScatterND, reduction add: repeated tuples add up)"""
    if g.attr("batch_dims", 0):
        raise g.fail("batch_dims > 0 is not supported")
    if g.opset < 16:
        raise g.needs_opset(16, "GatherND (a scatter-add)")
    x, idx = g.x[0], _i64(g, g.x[1])
    k = g.shape(idx, -1) if g.static_dims(idx) is None else g.ints([g.static_dims(idx)[-1]])
    dims = g.Slice(g.Shape(x), g.ints([0]), k)  # the sizes of the indexed axes: negative indices wrap
    idx = g.Where(g.Less(idx, g.const(np.array(0, np.int64))), g.Add(idx, dims), idx)
    return [g.ScatterND(_zeros(g, x), idx, g.dy, reduction="add")]


def _kept(g, nd: bool, data: str, idx: str, updates: str, axis: int = 0) -> str:
    """1 for the updates a scatter without reduction keeps, 0 for those a later one at the same index
    overwrote: each update's position is scattered, as an id, the way the forward scattered it, and read
    back. The spec leaves the order of duplicates undefined; onnxruntime writes in order, so the last one
    is kept, and so it is here (every duplicate got dy, though only one reaches y)."""
    n = g.Size(updates)
    ids = g.Reshape(g.Range(g.const(np.array(0, np.int64)), n, g.const(np.array(1, np.int64))), g.Shape(updates))
    blank = g.ConstantOfShape(g.Shape(data), value=numpy_helper.from_array(np.full([1], -1, np.int64)))
    if nd:
        won = g.GatherND(g.b.op("ScatterND", blank, idx, ids), idx)
    else:
        won = g.GatherElements(g.b.op("ScatterElements", blank, idx, ids, axis=axis), idx, axis=axis)
    return g.mask(g.Equal(won, ids))


@rule("ScatterND", inputs=(0, 2))
def scatter_nd(g):
    """y = data with data[idx tuple] replaced by (reduction add: increased by) updates  ->
    d data = dy, zeroed at the written tuples (add: dy),  d updates = dy[idx tuple] (GatherND); without a
    reduction, 0 for an update a later one at the same tuple overwrote"""
    red = _reduction(g)
    if red not in ("none", "add"):
        raise g.fail(f"reduction={red} is not supported")
    idx = g.x[1]
    dd = du = None
    if g.wants(0):
        dd = g.dy if red == "add" else g.ScatterND(g.dy, idx, _zeros(g, g.x[2]))
    if g.wants(2):
        du = g.GatherND(g.dy, idx)
        if red == "none":
            du = g.Mul(du, _kept(g, True, g.x[0], idx, g.x[2]))
    return [dd, None, du]


@rule("ScatterElements", inputs=(0, 2))
def scatter_elements(g):
    """y = data with data[..., idx[i], ...] (along axis) replaced by (reduction add: increased by)
    updates[i]  ->  d data = dy zeroed at the written positions (add: dy),  d updates = dy gathered at
    them (GatherElements); without a reduction, 0 for an update a later one at the same position overwrote"""
    red = _reduction(g)
    if red not in ("none", "add"):
        raise g.fail(f"reduction={red} is not supported")
    axis = g.attr("axis", 0)
    idx = g.x[1]
    dd = du = None
    if g.wants(0):
        dd = g.dy if red == "add" else g.ScatterElements(g.dy, idx, _zeros(g, g.x[2]), axis=axis)
    if g.wants(2):
        du = g.GatherElements(g.dy, idx, axis=axis)
        if red == "none":
            du = g.Mul(du, _kept(g, False, g.x[0], idx, g.x[2], axis))
    return [dd, None, du]


@rule("ReverseSequence")
def reverse_sequence(g):
    """y = each sequence reversed within its length  ->  dx = dy reversed the same way (its own inverse)"""
    return [g.ReverseSequence(g.dy, g.x[1], batch_axis=g.attr("batch_axis", 1), time_axis=g.attr("time_axis", 0))]


@rule("Scatter", inputs=(0, 2))
def scatter(g):
    """Scatter (opsets 9 and 10) is ScatterElements without a reduction (renamed in opset 11): its gradient
    is ScatterElements' (the model is converted to opset 11 or later first, where the gradient's
    ScatterElements exists)"""
    if g.opset < 11:
        raise g.needs_opset(11, "Scatter (a ScatterElements)")
    return scatter_elements(g)


@rule("Compress")
def compress(g):
    """y = the slices of x along `axis` (no axis: the elements of x flattened) where condition is true; a
    condition shorter than the axis drops the rest  ->  dx[i] = dy[k(i)] where condition[i], k(i) = the
    number of true values before i, else 0: a Gather of dy followed by one zero slice, at k(i) or at
    the zero slice"""
    if g.opset < 11:
        raise g.needs_opset(11, "Compress (a CumSum)")
    x, axis = g.x[0], g.attr("axis")
    flat = axis is None
    ax = 0 if flat else (axis + g.rank(x) if axis < 0 else axis)
    length = g.Reshape(g.Size(x), g.ints([1])) if flat else g.shape(x, ax, ax + 1)
    c = g.Slice(g.Cast(g.x[1], to=TensorProto.INT64), g.ints([0]), length)
    c = g.Pad(c, g.Concat(g.ints([0]), g.Sub(length, g.Shape(c)), axis=0))
    kept = g.reduce_sum(c, [0], keepdims=0)
    at = g.Where(g.Cast(c, to=TensorProto.BOOL), g.Sub(g.b.op("CumSum", c, g.const(np.array(0, np.int64))),
                                                      g.const(np.array(1, np.int64))), kept)
    one = g.Concat(g.shape(g.dy, 0, ax), g.ints([1]), g.shape(g.dy, ax + 1), axis=0)
    padded = g.Concat(g.dy, g.ConstantOfShape(one, value=numpy_helper.from_array(np.zeros([1], g.dtype))), axis=ax)
    dx = g.Gather(padded, at, axis=ax)
    return [g.Reshape(dx, g.Shape(x)) if flat else dx]


@rule("TensorScatter", inputs=(0, 1))
def tensor_scatter(g):
    """y = past_cache with update written along ``axis`` at write_indices[b] + s (mod the cache length when
    mode is circular) for each batch b (opset 24, KV-cache updates)  ->  d update = dy read at those
    positions (GatherElements), d past_cache = dy with them set to 0 (the update overwrote them)"""
    past, upd = g.x[0], g.x[1]
    r = g.rank(past)
    a = g.attr("axis", -2)
    a = a + r if a < 0 else a
    i64 = lambda v: g.const(np.array(v, np.int64))  # noqa: E731
    seq = g.shape(upd, a, a + 1)
    starts = g.unsqueeze(_i64(g, g.x[2]), [1]) if g.has(2) else g.ConstantOfShape(
        g.Concat(g.shape(past, 0, 1), g.ints([1]), axis=0), value=numpy_helper.from_array(np.zeros([1], np.int64)))
    pos = g.Add(starts, g.unsqueeze(g.Range(i64(0), g.squeeze(seq, [0]), i64(1)), [0]))  # [B, S]
    mode = g.attr("mode", "linear")
    if (mode.decode() if isinstance(mode, bytes) else mode) == "circular":
        pos = g.Mod(pos, g.squeeze(g.shape(past, a, a + 1), [0]))
    ones = lambda n: [g.ints([1] * n)] if n else []  # noqa: E731
    pos = g.Reshape(pos, g.Concat(g.shape(past, 0, 1), *ones(a - 1), seq, *ones(r - a - 1), axis=0))
    idx = g.Expand(pos, g.Shape(upd))
    dpast = g.ScatterElements(g.dy, idx, _zeros(g, upd), axis=a) if g.wants(0) else None
    dupd = g.GatherElements(g.dy, idx, axis=a) if g.wants(1) else None
    return [dpast, dupd]
