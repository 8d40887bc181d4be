"""float64 numpy versions of ops onnx.reference lacks, for the gradient tests' finite differences:
LpNormalization (onnx.reference's p=1 sums x, not |x|), MeanVarianceNormalization (without the
spec function's 1e-9, as onnxruntime), GroupNormalization (a function in onnx.reference, whose scale is per group before opset 21, per channel
after) and the com.microsoft ops of onnxruntime's transformer optimizer, as onnxruntime's contrib-op
documentation defines them."""

from __future__ import annotations

import math

import numpy as np
from onnx.reference.op_run import OpRun

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


class GroupNormalization(OpRun):
    op_domain = ""

    def _run(self, x, scale, bias, epsilon=1e-5, num_groups=None, stash_type=None):
        n, c = x.shape[:2]
        xg = x.reshape(n, num_groups, -1)
        m = xg.mean(axis=2, keepdims=True)
        v = ((xg - m) ** 2).mean(axis=2, keepdims=True)
        xhat = ((xg - m) / np.sqrt(v + epsilon)).reshape(x.shape)
        sh = [1, c] + [1] * (x.ndim - 2)
        if scale.shape[0] != c:  # opset 18: per group
            scale, bias = np.repeat(scale, c // num_groups), np.repeat(bias, c // num_groups)
        return ((xhat * scale.reshape(sh) + bias.reshape(sh)).astype(x.dtype),)


class LpNormalization(OpRun):
    """x / ||x||_p with |x| (onnx.reference sums x^p, so its p=1 norm is sum(x), not sum|x|)."""
    op_domain = ""

    def _run(self, x, axis=-1, p=2):
        n = (np.abs(x) ** p).sum(axis=axis, keepdims=True) ** (1.0 / p)
        return ((x / n).astype(x.dtype),)


class MeanVarianceNormalization(OpRun):
    """(x - mean) / sqrt(var) over the axes, without the spec function's 1e-9 (onnxruntime's kernel)."""
    op_domain = ""

    def _run(self, x, axes=None):
        ax = tuple(axes) if axes is not None else (0, 2, 3)
        m = x.mean(axis=ax, keepdims=True)
        return (((x - m) / np.sqrt(((x - m) ** 2).mean(axis=ax, keepdims=True))).astype(x.dtype),)


class Upsample(OpRun):
    """Resize with asymmetric coordinates, x_in = x_out / scale: nearest takes floor(x_in), linear
    interpolates x[floor] and x[floor + 1] (clamped at the edge). onnx.reference has integer nearest only."""
    op_domain = ""

    def _run(self, x, scales=None, mode="nearest"):
        sc = [float(v) for v in (self.scales if scales is None else scales)]
        for ax, s in enumerate(sc):
            n = x.shape[ax]
            pos = np.arange(int(np.floor(n * s))) / s
            i0 = np.minimum(np.floor(pos).astype(np.int64), n - 1)
            if mode == "nearest":
                x = np.take(x, i0, axis=ax)
                continue
            w = np.minimum(pos - i0, 1.0).reshape([-1] + [1] * (x.ndim - 1 - ax))
            x = np.take(x, i0, axis=ax) * (1 - w) + np.take(x, np.minimum(i0 + 1, n - 1), axis=ax) * w
        return (x,)


class GridSample(OpRun):
    """float64 throughout (onnx.reference unnormalizes the grid in float32): i = (g + 1)(L - 1) / 2 with
    align_corners, ((g + 1) L - 1) / 2 without; border clamps i to [0, L - 1]; linear weighs the 2^n pixels
    around i, nearest takes round(i) (half to even); pixels outside the image read 0."""
    op_domain = ""

    def _run(self, x, grid, mode=None, padding_mode="zeros", align_corners=0):
        mode = {"bilinear": "linear", None: "linear"}.get(mode, mode)
        sp = x.shape[2:]
        n = len(sp)
        pts = grid.reshape(grid.shape[0], -1, n)
        y = np.zeros((x.shape[0], x.shape[1], pts.shape[1]))
        for b in range(x.shape[0]):
            for p in range(pts.shape[1]):
                pos = []
                for a in range(n):
                    c, size = float(pts[b, p, n - 1 - a]), sp[a]
                    i = (c + 1) * (size - 1) / 2 if align_corners else ((c + 1) * size - 1) / 2
                    if padding_mode == "border":
                        i = min(max(i, 0.0), size - 1.0)
                    pos.append(i)
                if mode == "nearest":
                    corners = [([int(np.rint(i)) for i in pos], 1.0)]
                else:
                    corners = []
                    for bits in np.ndindex(*[2] * n):
                        q = [int(np.floor(i)) + t for i, t in zip(pos, bits)]
                        corners.append((q, float(np.prod([1 - abs(i - qq) for i, qq in zip(pos, q)]))))
                for q, w in corners:
                    if all(0 <= qq < size for qq, size in zip(q, sp)):
                        y[b, :, p] += w * x[(b, slice(None)) + tuple(q)]
        return (y.reshape(x.shape[:2] + grid.shape[1:-1]).astype(x.dtype),)


class _MS(OpRun):
    op_domain = "com.microsoft"


class Gelu(_MS):
    def _run(self, x, **_):
        return (_gelu(x).astype(x.dtype),)


class BiasGelu(_MS):
    def _run(self, a, b):
        return (_gelu(a + b).astype(a.dtype),)


class FastGelu(_MS):
    def _run(self, x, bias=None):
        return (_gelu_tanh(x + (0 if bias is None else bias)).astype(x.dtype),)


class QuickGelu(_MS):
    def _run(self, x, alpha=1.702):
        return ((x / (1 + np.exp(-alpha * x))).astype(x.dtype),)


class FusedMatMul(_MS):
    def _run(self, a, b, alpha=1.0, transA=0, transB=0, transBatchA=0, transBatchB=0):
        a = np.swapaxes(a, -1, -2) if transA else a
        b = np.swapaxes(b, -1, -2) if transB else b
        return ((alpha * np.matmul(a, b)).astype(a.dtype),)


class SkipLayerNormalization(_MS):
    def _run(self, x, skip, gamma, beta=None, bias=None, epsilon=1e-12):
        s = x + skip + (0 if bias is None else bias)
        m = s.mean(axis=-1, keepdims=True)
        v = ((s - m) ** 2).mean(axis=-1, keepdims=True)
        y = (s - m) / np.sqrt(v + epsilon) * gamma + (0 if beta is None else beta)
        outs = [y.astype(x.dtype), m, 1 / np.sqrt(v + epsilon), s.astype(x.dtype)]
        return tuple(outs[:len(self.onnx_node.output)])


class GlobalLpPool(OpRun):
    """(sum over the spatial axes of |x|^p)^(1/p) per (n, c) (onnx.reference has no GlobalLpPool)."""
    op_domain = ""

    def _run(self, x, p=2):
        ax = tuple(range(2, x.ndim))
        return (((np.abs(x) ** p).sum(axis=ax, keepdims=True) ** (1.0 / p)).astype(x.dtype),)


def _rms(x, scale, axis, eps):
    ax = tuple(range(axis % x.ndim, x.ndim))
    inv = 1 / np.sqrt((x * x).mean(axis=ax, keepdims=True) + eps)
    return x * inv * scale, inv


class SimplifiedLayerNormalization(OpRun):
    """onnxruntime's RMS norm: x / sqrt(mean(x^2) + eps) * scale over the axes from `axis` on, and r."""
    op_domain = ""

    def _run(self, x, scale, axis=-1, epsilon=1e-5, stash_type=1):
        y, inv = _rms(x, scale, axis, epsilon)
        return tuple([y.astype(x.dtype), inv][:len(self.onnx_node.output)])


class SkipSimplifiedLayerNormalization(_MS):
    def _run(self, x, skip, gamma, bias=None, epsilon=1e-12):
        s = x + skip + (0 if bias is None else bias)
        y, inv = _rms(s, gamma, -1, epsilon)
        return tuple([y.astype(x.dtype), inv, inv, s.astype(x.dtype)][:len(self.onnx_node.output)])


_ACT = {"Relu": lambda s, p: np.maximum(s, 0), "Tanh": lambda s, p: np.tanh(s),
        "Sigmoid": lambda s, p: 1 / (1 + np.exp(-s)), "LeakyRelu": lambda s, p: np.where(s > 0, s, p[0] * s),
        "Clip": lambda s, p: np.clip(s, p[0], p[1]), "HardSigmoid": lambda s, p: np.clip(p[0] * s + p[1], 0, 1),
        "Elu": lambda s, p: np.where(s > 0, s, p[0] * (np.exp(np.minimum(s, 0)) - 1)),
        "Softsign": lambda s, p: s / (1 + np.abs(s)), "Softplus": lambda s, p: np.log1p(np.exp(s))}


def _act(s, name, params):
    name = name.decode() if isinstance(name, bytes) else name
    return _ACT[name](s, list(params)) if name else s


class FusedConv(_MS):
    """act(Conv(X, W, B) + Z), the activation's parameters in activation_params."""

    def _run(self, x, w, b=None, z=None, activation=None, activation_params=None, auto_pad="NOTSET", dilations=None,
             group=1, kernel_shape=None, pads=None, strides=None):
        from onnx.reference.ops.op_conv import _conv_implementation

        s = _conv_implementation(x, w, b, auto_pad, dilations, group, kernel_shape or list(w.shape[2:]), pads, strides)
        return (_act(s + (0 if z is None else z), activation, activation_params or [0.01]).astype(x.dtype),)


class FusedGemm(_MS):
    """act(alpha A' B' + beta C), the activation's parameters activation_alpha, activation_beta."""

    def _run(self, a, b, c=None, activation=None, activation_alpha=None, activation_beta=None, activation_gamma=None,
             alpha=1.0, beta=1.0, transA=0, transB=0):
        s = alpha * (a.T if transA else a) @ (b.T if transB else b) + (0 if c is None else beta * c)
        params = [v for v in (activation_alpha, activation_beta) if v is not None]
        return (_act(s, activation, params).astype(a.dtype),)


class QuantizeLinear(_MS):
    """com.microsoft's QuantizeLinear: saturate(round(x / s) + zp) (per tensor or along `axis`)."""

    def _run(self, x, s, zp=None, axis=1, **_):
        sh = [1] * x.ndim
        if np.ndim(s) == 1 and s.size > 1:
            sh[axis] = -1
        z = np.zeros((), np.uint8) if zp is None else zp
        info = np.iinfo(z.dtype)
        q = np.rint(x / s.reshape(sh if np.ndim(s) else [])) + z.astype(np.float64).reshape(sh if np.ndim(z) else [])
        return (np.clip(q, info.min, info.max).astype(z.dtype),)


class DequantizeLinear(_MS):
    def _run(self, q, s, zp=None, axis=1, **_):
        sh = [1] * q.ndim
        if np.ndim(s) == 1 and s.size > 1:
            sh[axis] = -1
        z = 0 if zp is None else zp.astype(np.float64).reshape(sh if np.ndim(zp) else [])
        return ((q.astype(np.float64) - z) * s.reshape(sh if np.ndim(s) else [])).astype(s.dtype),


def _rope(x, cos, sin, interleaved, rd):
    """x: (B, S, N, H); cos, sin: (B, S, rd / 2). Rotates the pairs of x's first rd values per head."""
    rd = rd or x.shape[-1]
    rot, rest = x[..., :rd], x[..., rd:]
    c, s = cos[:, :, None, :], sin[:, :, None, :]
    if interleaved:
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
        out = np.stack([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1).reshape(rot.shape)
    else:
        x1, x2 = rot[..., :rd // 2], rot[..., rd // 2:]
        out = np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
    return np.concatenate([out, rest], axis=-1)


class RotaryEmbedding(_MS):
    """onnxruntime's RoPE: input (B, S, N H) with num_heads, or (B, N, S, H); position_ids (1,) an offset
    (positions offset .. offset + S - 1) or (B, S)."""

    def _run(self, x, pos, cos, sin, interleaved=0, num_heads=0, rotary_embedding_dim=0, scale=1.0,
             is_packed_batching=0):
        four = x.ndim == 4
        b, s = x.shape[0], x.shape[2] if four else x.shape[1]
        x4 = np.swapaxes(x, 1, 2) if four else x.reshape(b, s, num_heads, -1)
        p = pos.reshape(1, 1) + np.arange(s)[None] if pos.size == 1 else pos
        p = np.broadcast_to(p, (b, s))
        y = _rope(x4, cos[p], sin[p], interleaved, rotary_embedding_dim)
        return ((np.swapaxes(y, 1, 2) if four else y.reshape(x.shape)).astype(x.dtype),)


class EmbedLayerNormalization(_MS):
    def _run(self, ids, seg_ids, word, pos, seg, gamma, beta, mask=None, pos_ids=None, epsilon=1e-12,
             mask_index_type=None):
        p = np.arange(ids.shape[1])[None] if pos_ids is None else pos_ids
        s = word[ids] + pos[np.broadcast_to(p, ids.shape)] + (0 if seg is None else seg[seg_ids])
        m = s.mean(axis=-1, keepdims=True)
        v = ((s - m) ** 2).mean(axis=-1, keepdims=True)
        y = (s - m) / np.sqrt(v + epsilon) * gamma + beta
        mi = np.full(ids.shape[0], ids.shape[1], np.int32)
        return tuple([y.astype(word.dtype), mi, s.astype(word.dtype)][:len(self.onnx_node.output)])


class AffineGrid(OpRun):
    """grid[n, ..., i] = theta[n, i] . (x, y[, z], 1), in float64 (onnx.reference returns float32, too coarse
    for a finite difference): coordinates (2 i + 1) / n - 1, or -1 + 2 i / (n - 1) with align_corners."""
    op_domain = ""

    def _run(self, theta, size, align_corners=0):
        sp = [int(v) for v in size[2:]]
        axes = [(-1 + 2 * np.arange(n) / max(n - 1, 1)) if align_corners else (2 * np.arange(n) + 1) / n - 1 for n in sp]
        mesh = np.meshgrid(*axes, indexing="ij")  # D, H, W order
        base = np.stack(list(mesh[::-1]) + [np.ones(sp)], axis=-1)  # (..., x, y[, z], 1)
        return (np.einsum("nij,...j->n...i", theta, base).astype(theta.dtype),)


class Attention(_MS):
    """onnxruntime's fused self-attention: X W + bias split into Q, K, V and heads; scores scale Q K^T plus
    mask_filter_value where a key is masked (a 1-D mask_index: key lengths; 2-D / 3-D: 0-1 masks) and, when
    unidirectional, after the query; softmax; the heads of P V merged."""

    def _run(self, x, w, bias=None, mask=None, *_, num_heads=None, qkv_hidden_sizes=None, unidirectional=0,
             mask_filter_value=-10000.0, scale=None, **__):
        hq, hk, hv = qkv_hidden_sizes if qkv_hidden_sizes is not None else [w.shape[1] // 3] * 3
        qkv = x @ w + (0 if bias is None else bias)
        b, n, length = x.shape[0], num_heads, x.shape[1]
        q, k, v = (t.reshape(b, length, n, -1).transpose(0, 2, 1, 3)
                   for t in (qkv[..., :hq], qkv[..., hq:hq + hk], qkv[..., hq + hk:]))
        sc = (scale or 1 / math.sqrt(hq // n)) * (q @ k.transpose(0, 1, 3, 2))
        if mask is not None:
            keep = (np.arange(length)[None] < mask[:, None]) if mask.ndim == 1 else mask > 0
            sc = sc + np.where(keep[:, None, None] if keep.ndim == 2 else keep[:, None], 0.0, mask_filter_value)
        if unidirectional:
            sc = sc + np.where(np.tril(np.ones((length, length), bool)), 0.0, mask_filter_value)
        e = np.exp(sc - sc.max(-1, keepdims=True))
        y = (e / e.sum(-1, keepdims=True)) @ v
        return (y.transpose(0, 2, 1, 3).reshape(b, length, -1).astype(x.dtype),)


class MultiHeadAttention(_MS):
    """onnxruntime's MultiHeadAttention with [B, S, D] query and [B, L, D] key / value: the heads of
    softmax(scale Q K^T + mask + attention_bias) V, the mask as Attention's (key lengths or 0-1)."""

    def _run(self, q, k, v, bias=None, kpm=None, attn_bias=None, *_, num_heads=None, mask_filter_value=-10000.0,
             scale=None, unidirectional=0, **__):
        if bias is not None:
            d, dk = q.shape[-1], k.shape[-1]
            q, k, v = q + bias[:d], k + bias[d:d + dk], v + bias[d + dk:]
        b, sq, sk, n = q.shape[0], q.shape[1], k.shape[1], num_heads
        qh, kh, vh = (t.reshape(b, t.shape[1], n, -1).transpose(0, 2, 1, 3) for t in (q, k, v))
        sc = (scale or 1 / math.sqrt(q.shape[-1] // n)) * (qh @ kh.transpose(0, 1, 3, 2))
        if kpm is not None:
            keep = (np.arange(sk)[None] < kpm[:, None]) if kpm.ndim == 1 else kpm > 0
            sc = sc + np.where(keep[:, None, None] if keep.ndim == 2 else keep[:, None], 0.0, mask_filter_value)
        if unidirectional:
            sc = sc + np.where(np.tril(np.ones((sq, sk), bool)), 0.0, mask_filter_value)
        if attn_bias is not None:
            sc = sc + attn_bias
        e = np.exp(sc - sc.max(-1, keepdims=True))
        y = (e / e.sum(-1, keepdims=True)) @ vh
        return (y.transpose(0, 2, 1, 3).reshape(b, sq, -1).astype(q.dtype),)


ORACLE_OPS = [MultiHeadAttention, Attention, AffineGrid, RotaryEmbedding, EmbedLayerNormalization, GlobalLpPool, SimplifiedLayerNormalization, SkipSimplifiedLayerNormalization, FusedConv, FusedGemm,
              QuantizeLinear, DequantizeLinear,
              GroupNormalization, GridSample, LpNormalization, MeanVarianceNormalization, Upsample, Gelu, BiasGelu, FastGelu, QuickGelu, FusedMatMul, SkipLayerNormalization]
