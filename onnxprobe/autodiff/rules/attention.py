"""Attention (opset 23): scaled dot-product attention over [B, H, L, E] (or [B, L, H E] with the head
counts as attributes), with an additive or boolean mask, is_causal, and grouped key/value heads (GQA).
The attention weights are recomputed from Q and K with standard ops (the node does not output them in
the modes the backward pass needs); past keys and values, softcap and the optional outputs are refused."""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto, numpy_helper

from onnxprobe.autodiff.registry import rule


def _heads(g, t: str, heads: int | None) -> str:
    """[B, H, L, E] from [B, L, H E] (3-D) or as it is (4-D)."""
    if g.rank(t) == 4:
        return t
    if not heads:
        raise g.fail("3-D inputs need q_num_heads and kv_num_heads")
    b4 = g.Reshape(t, g.Concat(g.shape(t, 0, 2), g.ints([heads, -1]), axis=0))
    return g.Transpose(b4, perm=[0, 2, 1, 3])


def _dims4(g, t: str, heads: int | None) -> tuple | None:
    """The static [B, H, L, E] of a _heads result."""
    d = g.static_dims(t)
    if d is None or len(d) == 4:
        return d
    return (d[0], heads, d[1], d[2] // heads) if heads else None


def _unheads(g, t: str, like: str) -> str:
    """The gradient of a _heads result back in ``like``'s layout."""
    if g.rank(like) == 4:
        return t
    return g.Reshape(g.Transpose(t, perm=[0, 2, 1, 3]), g.Shape(like))


def _repeat_kv(g, t: str, groups: int) -> str:
    """[B, Hkv, L, E] -> [B, Hkv groups, L, E]: each key/value head serves ``groups`` query heads."""
    if groups == 1:
        return t
    e5 = g.Concat(g.shape(t, 0, 2), g.ints([groups]), g.shape(t, 2, 4), axis=0)
    rep = g.Expand(g.unsqueeze(t, [2]), e5)
    return g.Reshape(rep, g.Concat(g.shape(t, 0, 1), g.Mul(g.shape(t, 1, 2), g.ints([groups])), g.shape(t, 2, 4), axis=0))


def _sum_groups(g, t: str, like: str, groups: int) -> str:
    if groups == 1:
        return t
    e5 = g.Concat(g.shape(like, 0, 2), g.ints([groups]), g.shape(t, 2, 4), axis=0)
    return g.reduce_sum(g.Reshape(t, e5), [2], keepdims=0)


@rule("Attention", inputs=(0, 1, 2, 3))
def attention(g):
    """S = scale Q K^T + M (M: the additive mask, -inf where a boolean mask or is_causal masks), P =
    softmax(S) over the keys, Y = P V  ->  dV = P^T dY, dP = dY V^T, dS = P (dP - sum(dP P)), dQ = scale dS K,
    dK = scale dS^T Q, dM = dS summed to the mask's shape; a key/value head shared by G query heads sums
    the G heads' gradients (scale: the attribute, or 1 / sqrt(E)); a query row masked over every key has
    P = 0 (onnxruntime's output there is 0) and no gradient"""
    if any(g.has(i) for i in (4, 5)) or any(o for o in g.y[1:]):
        raise g.fail("past key/value inputs and the optional outputs are not supported")
    if g.attr("softcap", 0.0):
        raise g.fail("softcap is not supported")
    q_in, k_in, v_in = g.x[0], g.x[1], g.x[2]
    q = _heads(g, q_in, g.attr("q_num_heads"))
    k = _heads(g, k_in, g.attr("kv_num_heads"))
    v = _heads(g, v_in, g.attr("kv_num_heads"))
    qs, ks = _dims4(g, q_in, g.attr("q_num_heads")), _dims4(g, k_in, g.attr("kv_num_heads"))
    if qs is None or ks is None:
        raise g.unknown_size("needs static head counts and head size")
    groups = qs[1] // ks[1]
    scale = g.attr("scale") or 1.0 / math.sqrt(qs[3])
    kr, vr = _repeat_kv(g, k, groups), _repeat_kv(g, v, groups)
    s = g.Mul(g.MatMul(q, g.Transpose(kr, perm=[0, 1, 3, 2])), g.scalar(scale))
    mask = g.x[3] if g.has(3) else None
    neg = g.scalar(-np.inf)
    if mask is not None:
        s = g.Add(s, g.Where(mask, g.scalar(0.0), neg) if g.engine.elem(mask) == TensorProto.BOOL else mask)
    if g.attr("is_causal", 0):
        ones = g.ConstantOfShape(g.Concat(g.shape(q, 2, 3), g.shape(k, 2, 3), axis=0),
                                 value=numpy_helper.from_array(np.ones([1], np.bool_)))
        s = g.Add(s, g.Where(g.Trilu(ones, upper=0), g.scalar(0.0), neg))
    if mask is not None or g.attr("is_causal", 0):
        # a query row masked over every key: its softmax is 0/0, and onnxruntime's forward writes 0 there
        # (the row contributes nothing); recomputed as it stands it made every q/k/v gradient NaN
        dead = g.IsInf(g.reduce("ReduceMax", s, [3], keepdims=1), detect_positive=0)
        p = g.Mul(g.Softmax(g.Where(dead, g.scalar(0.0), s), axis=-1), g.mask(g.Not(dead)))
    else:
        p = g.Softmax(s, axis=-1)
    dy = g.dy if g.rank(q_in) == 4 else _heads(g, g.dy, g.attr("q_num_heads"))
    dvr = g.MatMul(g.Transpose(p, perm=[0, 1, 3, 2]), dy)
    dp = g.MatMul(dy, g.Transpose(vr, perm=[0, 1, 3, 2]))
    ds = g.Mul(p, g.Sub(dp, g.reduce_sum(g.Mul(dp, p), [3], keepdims=1)))
    dq = _unheads(g, g.Mul(g.MatMul(ds, kr), g.scalar(scale)), q_in) if g.wants(0) else None
    dk = None
    if g.wants(1):
        dkr = g.Mul(g.MatMul(g.Transpose(ds, perm=[0, 1, 3, 2]), q), g.scalar(scale))
        dk = _unheads(g, _sum_groups(g, dkr, k, groups), k_in)
    dv = _unheads(g, _sum_groups(g, dvr, v, groups), v_in) if g.wants(2) else None
    dm = None
    if g.wants(3) and mask is not None and g.engine.is_float(mask):
        dm = g.sum_to(ds, mask, (qs[0], qs[1], qs[2], ks[2]))
    return [dq, dk, dv, dm]


def _rotated_back(g, op: str, sin_slot: int, domain: str = "") -> str:
    """The node itself applied to dy with the sine negated: each pair (x1, x2) is rotated by the orthogonal
    matrix R = [[cos, -sin], [sin, cos]] (the part past rotary_embedding_dim by the identity), so dx = R^T dy
    is the rotation by the opposite angle, with every attribute (interleaved, num_heads, the partial
    rotation) kept as it is."""
    ins = list(g.x)
    ins[0] = g.dy
    ins[sin_slot] = g.Neg(g.x[sin_slot])
    attrs = {a.name: g.attr(a.name) for a in g.node.attribute}
    return g.op(op, *ins, domain=domain, **attrs)


@rule("RotaryEmbedding")
def rotary_embedding(g):
    """y = rope(x; cos, sin): each pair of x rotated by the angle of its position (opset 23)  ->
    dx = rope(dy; cos, -sin), the inverse rotation (the caches get no gradient)"""
    return [_rotated_back(g, "RotaryEmbedding", 2)]


@rule("RotaryEmbedding", domain="com.microsoft")
def ms_rotary_embedding(g):
    """y = rope(x; cos, sin) (onnxruntime's RotaryEmbedding, inputs x, position_ids, cos, sin)  ->
    dx = rope(dy; cos, -sin), the inverse rotation (the caches get no gradient)"""
    if float(g.attr("scale", 1.0)) != 1.0:
        raise g.fail("a scale other than 1 is not supported")
    return [_rotated_back(g, "RotaryEmbedding", 3, "com.microsoft")]


def _ms_mask(g, xq: str, xk: str, slot: int) -> str | None:
    """The additive mask of com.microsoft's Attention / MultiHeadAttention over [B, N, S, L] (S: xq's sequence,
    L: xk's): mask_filter_value (-10000) at the keys that a 1-D mask (key lengths, right padding) or a 2-D / 3-D
    0-1 mask in input ``slot`` masks, and, when unidirectional, at the keys after the query (added to the
    other, as onnxruntime adds them)."""
    filt = g.scalar(float(g.attr("mask_filter_value", -10000.0)))
    zero = g.scalar(0.0)
    add = None
    if g.has(slot):
        m = g.x[slot]
        r = g.rank(m)
        if r == 1:
            md, xd = g.static_dims(m), g.static_dims(xq)
            if md is None or xd is None or md[0] != xd[0]:
                raise g.fail("a 1-D mask_index needs batch_size entries (key lengths): start positions are not supported")
            i64 = lambda v: g.const(np.array(v, np.int64))  # noqa: E731
            keys = g.Range(i64(0), g.squeeze(g.shape(xk, 1, 2), [0]), i64(1))
            keep = g.Less(g.unsqueeze(keys, [0]), g.unsqueeze(g.Cast(m, to=TensorProto.INT64), [1]))
        elif r in (2, 3):
            keep = g.Greater(g.Cast(m, to=g.elem), zero)
        else:
            raise g.fail("a 4-D mask is not supported")
        add = g.Where(g.unsqueeze(keep, [1, 2] if r < 3 else [1]), zero, filt)
    if g.attr("unidirectional", 0):
        ones = g.ConstantOfShape(g.Concat(g.shape(xq, 1, 2), g.shape(xk, 1, 2), axis=0),
                                 value=numpy_helper.from_array(np.ones([1], np.bool_)))
        causal = g.Where(g.Trilu(ones, upper=0), zero, filt)
        add = causal if add is None else g.Add(add, causal)
    return add


def _sdpa_back(g, qkv: tuple, like: tuple, heads: int, scale: float, add: str | None):
    """The gradients of Y = softmax(scale Q K^T + add) V w.r.t. Q, K, V given as [B, S, N H] (``like``: the
    forward tensors with their [B, S] / [B, L] sizes), each back as [B, S, N H]; and dS, the gradient of the
    scores (that of an additive bias)."""
    def split_heads(t, src):
        return g.Transpose(g.Reshape(t, g.Concat(g.shape(src, 0, 2), g.ints([heads, -1]), axis=0)), perm=[0, 2, 1, 3])

    def merge(t, src):
        return g.Reshape(g.Transpose(t, perm=[0, 2, 1, 3]), g.Concat(g.shape(src, 0, 2), g.ints([-1]), axis=0))

    qh, kh, vh = (split_heads(t, src) for t, src in zip(qkv, like))
    s = g.Mul(g.MatMul(qh, g.Transpose(kh, perm=[0, 1, 3, 2])), g.scalar(scale))
    p = g.Softmax(s if add is None else g.Add(s, add), axis=-1)
    dy = split_heads(g.dy, like[0])
    dvh = g.MatMul(g.Transpose(p, perm=[0, 1, 3, 2]), dy)
    dp = g.MatMul(dy, g.Transpose(vh, perm=[0, 1, 3, 2]))
    ds = g.Mul(p, g.Sub(dp, g.reduce_sum(g.Mul(dp, p), [3], keepdims=1)))
    dss = g.Mul(ds, g.scalar(scale))
    return (merge(g.MatMul(dss, kh), like[0]), merge(g.MatMul(g.Transpose(dss, perm=[0, 1, 3, 2]), qh), like[1]),
            merge(dvh, like[2])), ds


@rule("Attention", inputs=(0, 1, 2), broadcast=(2,), domain="com.microsoft")
def ms_attention(g):
    """onnxruntime's fused self-attention (BERT exports its transformer optimizer fuses): [Q K V] = X W + bias,
    split into num_heads heads, S = scale Q K^T + M (M: mask_filter_value where the mask masks a key), P =
    softmax(S), Y = P V with the heads merged  ->  as Attention's: dV = P^T dY, dS = P (dP - sum(dP P)),
    dQ = scale dS K, dK = scale dS^T Q; then d[Q K V] gives dX = d[QKV] W^T, dW = X^T d[QKV], dbias = d[QKV]
    summed over batch and sequence (scale: the attribute, or 1 / sqrt(head size)); past state, attention_bias,
    the present output and 4-D masks are refused"""
    if any(g.has(i) for i in (4, 5, 6)) or any(o for o in g.y[1:]):
        raise g.fail("past state, attention_bias and the present output are not supported")
    if g.attr("do_rotary", 0):
        raise g.fail("do_rotary is not supported")
    x, w = g.x[0], g.x[1]
    heads = int(g.attr("num_heads"))
    sizes = g.attr("qkv_hidden_sizes")
    wd = g.static_dims(w)
    if not sizes and wd is None:
        raise g.unknown_size("needs the weights' size")
    sizes = [int(v) for v in sizes] if sizes else [wd[1] // 3] * 3
    scale = float(g.attr("scale", 0.0)) or 1.0 / math.sqrt(sizes[0] // heads)
    qkv = g.MatMul(x, w)
    if g.has(2):
        qkv = g.Add(qkv, g.x[2])
    q, k, v = g.split(qkv, 2, sizes, 3)
    (dq, dk, dv), _ = _sdpa_back(g, (q, k, v), (x, x, x), heads, scale, _ms_mask(g, x, x, 3))
    dqkv = g.Concat(dq, dk, dv, axis=2)
    dx = g.MatMul(dqkv, g.Transpose(w, perm=[1, 0])) if g.wants(0) else None
    dw = None
    if g.wants(1):
        rows = lambda t, h: g.Reshape(t, g.Concat(g.ints([-1]), h, axis=0))  # noqa: E731 - [B S, H]
        dw = g.MatMul(g.Transpose(rows(x, g.shape(w, 0, 1)), perm=[1, 0]), rows(dqkv, g.ints([sum(sizes)])))
    return [dx, dw, dqkv if g.wants(2) else None]


@rule("MultiHeadAttention", inputs=(0, 1, 2, 3, 5), domain="com.microsoft")
def ms_multi_head_attention(g):
    """onnxruntime's MultiHeadAttention with separate [B, S, D] query and [B, L, D] key / value (CLIP, T5,
    Whisper, Stable Diffusion as its optimizer fuses them): Q, K, V = query, key, value (+ their parts of
    bias), S = scale Q K^T + M + attention_bias, Y = softmax(S) V, heads merged  ->  dQ, dK, dV as
    Attention's, d bias = their sums over batch and sequence, d attention_bias = dS summed to its shape;
    packed or 4-D key / value, past state and the optional outputs are refused"""
    if any(g.has(i) for i in (6, 7, 8, 9)) or any(o for o in g.y[1:]):
        raise g.fail("past state and the present / qk outputs are not supported")
    if not (g.has(1) and g.has(2)) or any(g.rank(g.x[i]) != 3 for i in (0, 1, 2)):
        raise g.fail("packed query / key / value and 4-D key / value are not supported")
    heads = int(g.attr("num_heads"))
    dims = [g.static_dims(g.x[i]) for i in (0, 1, 2)]
    if any(d is None for d in dims):
        raise g.unknown_size("needs the sizes of query, key and value")
    sizes = [d[2] for d in dims]
    scale = float(g.attr("scale", 0.0)) or 1.0 / math.sqrt(sizes[0] // heads)
    qkv = list(g.x[:3])
    if g.has(3):
        qkv = [g.Add(t, part) for t, part in zip(qkv, g.split(g.x[3], 0, sizes, 3))]
    add = _ms_mask(g, g.x[0], g.x[1], 4)
    if g.has(5):
        add = g.x[5] if add is None else g.Add(add, g.x[5])
    grads, ds = _sdpa_back(g, tuple(qkv), tuple(g.x[:3]), heads, scale, add)
    dbias = g.Concat(*[g.reduce_sum(d, [0, 1], keepdims=0) for d in grads], axis=0) if g.wants(3) else None
    dab = g.sum_to(ds, g.x[5], (dims[0][0], heads, dims[0][1], dims[1][1])) if g.wants(5) else None
    return [grads[0], grads[1], grads[2], dbias, None, dab]
