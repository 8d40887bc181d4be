"""The torch oracle (tests/test_autodiff_torchref.py) for tensor algebra, indexed writes, GroupNormalization,
RMSNormalization, Attention and the com.microsoft ops: each written with torch ops as its definition
reads; torch.autograd differentiates it. Imported only in the torch worker process."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def _blocks(x, b, mode, to_space):
    n, c, h, w = x.shape
    if not to_space:
        t = x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4)
        return t.reshape(n, c * b * b, h // b, w // b)
    if mode == "CRD":
        t = x.reshape(n, c // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
    else:
        t = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
    return t.reshape(n, c // (b * b), h * b, w * b)


def _attention(ins, a):
    q, k, v = ins[0], ins[1], ins[2]
    mask = ins[3] if len(ins) > 3 else None
    three = q.dim() == 3
    if three:
        hq, hk = a["q_num_heads"], a["kv_num_heads"]
        q = q.reshape(q.shape[0], q.shape[1], hq, -1).transpose(1, 2)
        k = k.reshape(k.shape[0], k.shape[1], hk, -1).transpose(1, 2)
        v = v.reshape(v.shape[0], v.shape[1], hk, -1).transpose(1, 2)
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    s = q @ k.transpose(-1, -2) * a.get("scale", 1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        s = s + (torch.where(mask, 0.0, -math.inf) if mask.dtype == torch.bool else mask)
    if a.get("is_causal", 0):
        keep = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril()
        s = s.masked_fill(~keep, -math.inf)
    y = torch.softmax(s, -1) @ v
    return y.transpose(1, 2).reshape(y.shape[0], y.shape[2], -1) if three else y


def _nll(x, t, w, a):
    """The loss as its definition reads: l = -w[t] x[n, t, d] where t != ignore_index (0 elsewhere), summed,
    or divided by the summed w[t] of the labels that count (mean). Written out (gather), not F.nll_loss,
    whose weight has no derivative in torch."""
    t = t.long()
    keep = t != a["ignore_index"] if "ignore_index" in a else torch.ones_like(t, dtype=torch.bool)
    ts = torch.where(keep, t, torch.zeros_like(t))
    xt = x.gather(1, ts.unsqueeze(1)).squeeze(1)
    wt = (w[ts] if w is not None else torch.ones_like(xt)) * keep.to(x.dtype)
    loss = -xt * wt
    red = a.get("reduction", "mean")
    return loss if red == "none" else loss.sum() if red == "sum" else loss.sum() / wt.sum()


def _rope(x4, cos, sin, interleaved, rd):
    """x4 (B, S, N, H); cos, sin (B, S, rd / 2): each pair of the first rd values of a head, as a complex
    number, times cos + i sin (the pairs: neighbours when interleaved, else i and i + rd / 2)."""
    rd = rd or x4.shape[-1]
    rot, rest = x4[..., :rd], x4[..., rd:]
    pairs = rot.reshape(*rot.shape[:-1], rd // 2, 2) if interleaved else torch.stack(rot.split(rd // 2, -1), -1)
    z = torch.view_as_complex(pairs.contiguous()) * torch.complex(cos, sin)[:, :, None, :]
    r = torch.view_as_real(z)
    out = r.reshape(rot.shape) if interleaved else torch.cat([r[..., 0], r[..., 1]], -1)
    return torch.cat([out, rest], -1)


def _rotary(ins, a, ms: bool):
    if ms:
        x, pos, cos, sin = ins
    else:
        x, cos, sin = ins[:3]
        pos = ins[3] if len(ins) > 3 else None
    four = x.dim() == 4
    b, s = x.shape[0], x.shape[2] if four else x.shape[1]
    x4 = x.transpose(1, 2) if four else x.reshape(b, s, a["num_heads"], -1)
    if pos is not None:
        p = pos.reshape(1, 1) + torch.arange(s)[None] if pos.numel() == 1 and ms else pos
        p = p.expand(b, s)
        cos, sin = cos[p], sin[p]
    y = _rope(x4, cos, sin, a.get("interleaved", 0), a.get("rotary_embedding_dim", 0))
    return y.transpose(1, 2) if four else y.reshape(x.shape)


def _center_crop_pad(x, shape, axes):
    pads = [0] * (2 * x.dim())  # F.pad's order: last axis first, (left, right); negative pads crop
    for ax, m in zip(axes, shape):
        ax %= x.dim()
        n = x.shape[ax]
        left = (m - n) // 2 if m >= n else -((n - m) // 2)
        k = 2 * (x.dim() - 1 - ax)
        pads[k], pads[k + 1] = left, (m - n) - left
    return F.pad(x, pads)


def _sdpa(q, k, v, a, mask, bias=None):
    """softmax(scale Q K^T + M (+ bias)) V over [B, S, D] / [B, L, D] tensors with a.num_heads heads; M:
    mask_filter_value where a 1-D (key lengths) or 2-D / 3-D 0-1 mask masks a key, and past the query when
    unidirectional."""
    n, b, sq, sk = a["num_heads"], q.shape[0], q.shape[1], k.shape[1]
    q, k, v = (t.reshape(b, t.shape[1], n, -1).transpose(1, 2) for t in (q, k, v))
    filt = a.get("mask_filter_value", -10000.0)
    add = torch.zeros(b, 1, sq, sk, dtype=q.dtype)
    if mask is not None:
        keep = torch.arange(sk)[None] < mask[:, None] if mask.dim() == 1 else mask > 0
        add = add + torch.where(keep.reshape(b, 1, -1, sk), 0.0, filt)
    if a.get("unidirectional", 0):
        add = add + torch.where(torch.ones(sq, sk, dtype=torch.bool).tril(), 0.0, filt)
    if bias is not None:
        add = add + bias
    sc = (a.get("scale") or 1 / math.sqrt(q.shape[-1])) * q @ k.transpose(-1, -2) + add
    return (torch.softmax(sc, -1) @ v).transpose(1, 2).reshape(b, sq, -1)


def _ms_attention(ins, a):
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 and ins[2] is not None else 0
    sizes = a.get("qkv_hidden_sizes") or [w.shape[1] // 3] * 3
    q, k, v = (x @ w + bias).split(list(sizes), -1)
    return _sdpa(q, k, v, a, ins[3] if len(ins) > 3 else None)


def _ms_multi_head_attention(ins, a):
    q, k, v = ins[:3]
    at = lambda i: ins[i] if len(ins) > i else None  # noqa: E731
    if at(3) is not None:
        q, k, v = (t + part for t, part in zip((q, k, v), at(3).split([q.shape[-1], k.shape[-1], v.shape[-1]])))
    return _sdpa(q, k, v, a, at(4), at(5))


def eval_more(node, ins, a: dict, opset: int) -> list:  # noqa: C901 - one branch per op
    op = node.op_type
    x = ins[0]
    w = ins[2] if len(ins) > 2 else None
    if op == "Attention" and node.domain == "com.microsoft":
        return [_ms_attention(ins, a)]
    if op == "MultiHeadAttention":
        return [_ms_multi_head_attention(ins, a)]
    if op == "DFT":  # torch.fft on the complex signal, n zero-pads or cuts it; ifft divides by n
        if opset >= 20:
            ax = int(ins[2].reshape(-1)[0]) if len(ins) > 2 and ins[2] is not None else -2
        else:
            ax = a.get("axis", 1)
        ax %= x.dim()
        n = int(ins[1].reshape(-1)[0]) if len(ins) > 1 and ins[1] is not None else x.shape[ax]
        xc = torch.complex(x[..., 0], x[..., 1] if x.shape[-1] == 2 else torch.zeros_like(x[..., 0]))
        y = (torch.fft.ifft if a.get("inverse", 0) else torch.fft.fft)(xc, n=n, dim=ax)
        if a.get("onesided", 0):
            y = y.narrow(ax, 0, n // 2 + 1)
        return [torch.view_as_real(y)]
    if op == "TensorScatter":  # torch.scatter writes the update at each batch's positions along the axis
        past, upd = x, ins[1]
        ax = a.get("axis", -2) % past.dim()
        w = ins[2] if len(ins) > 2 and ins[2] is not None else torch.zeros(past.shape[0], dtype=torch.int64)
        pos = w.long()[:, None] + torch.arange(upd.shape[ax])[None]
        if a.get("mode", "linear") == "circular":
            pos = pos % past.shape[ax]
        shape = [past.shape[0]] + [1] * (past.dim() - 1)
        shape[ax] = upd.shape[ax]
        return [torch.scatter(past, ax, pos.reshape(shape).expand(upd.shape), upd)]
    if op == "RotaryEmbedding":
        return [_rotary(ins, a, node.domain == "com.microsoft")]
    if op == "AffineGrid":
        return [F.affine_grid(x, [int(v) for v in ins[1].tolist()], align_corners=bool(a.get("align_corners", 0)))]
    if op == "CenterCropPad":
        shape = [int(v) for v in ins[1].tolist()]
        return [_center_crop_pad(x, shape, a.get("axes", list(range(len(shape)))))]
    if op == "EmbedLayerNormalization":  # ids, segment ids, word, position, segment tables, gamma, beta, mask, position ids
        ids = ins[0].long()
        pids = ins[8].long() if len(ins) > 8 and ins[8] is not None else torch.arange(ids.shape[1])[None]
        s = F.embedding(ids, ins[2]) + F.embedding(pids.expand(ids.shape), ins[3])
        if len(ins) > 4 and ins[4] is not None:
            s = s + F.embedding(ins[1].long(), ins[4])
        y = F.layer_norm(s, s.shape[-1:], ins[5], ins[6], a.get("epsilon", 1e-12))
        return [y, torch.full(ids.shape[:1], ids.shape[1], dtype=torch.int32), s]
    if op == "NegativeLogLikelihoodLoss":
        return [_nll(x, ins[1], w, a)]
    if op == "SoftmaxCrossEntropyLoss":
        lp = torch.log_softmax(x, 1)
        return [_nll(lp, ins[1], w, a), lp]
    if op == "Det":
        return [torch.linalg.det(x)]
    if op == "Einsum":
        return [torch.einsum(a["equation"], *ins)]
    if op == "LpNormalization":
        return [x / torch.linalg.vector_norm(x, ord=a.get("p", 2), dim=a.get("axis", -1), keepdim=True)]
    if op == "MeanVarianceNormalization":
        d = [v % x.dim() for v in a.get("axes", [0, 2, 3])]
        m = x.mean(dim=d, keepdim=True)
        return [(x - m) / torch.sqrt(((x - m) ** 2).mean(dim=d, keepdim=True))]
    if op == "TopK":
        vals, idx = torch.topk(x, int(ins[1].reshape(-1)[0]), dim=a.get("axis", -1), largest=bool(a.get("largest", 1)))
        return [vals, idx]
    if op == "ScatterND":
        idx, upd = ins[1].long(), ins[2]
        k = idx.shape[-1]
        flat_i = idx.reshape(-1, k)
        flat_u = upd.reshape((flat_i.shape[0],) + tuple(x.shape[k:]))
        where = tuple(flat_i[:, j] for j in range(k))
        add = a.get("reduction", "none") == "add"
        return [x.index_put(where, flat_u, accumulate=add)]
    if op == "ScatterElements":
        ax = a.get("axis", 0)
        if a.get("reduction", "none") == "add":
            return [x.scatter_add(ax, ins[1].long(), ins[2])]
        return [x.scatter(ax, ins[1].long(), ins[2])]
    if op in ("DepthToSpace", "SpaceToDepth"):
        return [_blocks(x, a["blocksize"], a.get("mode", "DCR"), op == "DepthToSpace")]
    if op == "ReverseSequence":
        ta, ba = a.get("time_axis", 0), a.get("batch_axis", 1)
        lens = [int(v) for v in ins[1].tolist()]
        parts = []
        for b, n in enumerate(lens):
            s = x.select(ba, b)
            t = ta if ta < ba else ta - 1
            idx = torch.tensor(list(range(n - 1, -1, -1)) + list(range(n, s.shape[t])), dtype=torch.long)
            parts.append(torch.index_select(s, t, idx))
        return [torch.stack(parts, ba)]
    if op == "GroupNormalization":
        return [F.group_norm(x, a["num_groups"], ins[1], ins[2], a.get("epsilon", 1e-5))]
    if op == "RMSNormalization":
        ax = a.get("axis", -1)
        dims = list(range(ax % x.dim(), x.dim()))
        return [x * torch.rsqrt((x * x).mean(dim=dims, keepdim=True) + a.get("epsilon", 1e-5)) * ins[1]]
    if op == "Attention":
        return [_attention(ins, a)]
    if op == "FusedMatMul":
        A = ins[0].transpose(-1, -2) if a.get("transA", 0) else ins[0]
        B = ins[1].transpose(-1, -2) if a.get("transB", 0) else ins[1]
        return [a.get("alpha", 1.0) * (A @ B)]
    if op == "SkipLayerNormalization":
        s = x + ins[1] + (ins[4] if len(ins) > 4 and ins[4] is not None else 0)
        eps = a.get("epsilon", 1e-12)
        y = F.layer_norm(s, s.shape[-1:], ins[2], ins[3] if len(ins) > 3 else None, eps)
        m = s.mean(-1, keepdim=True)
        return [y, m, 1 / torch.sqrt(((s - m) ** 2).mean(-1, keepdim=True) + eps), s]
    if op == "BiasGelu":
        return [F.gelu(x + ins[1])]
    if op == "FastGelu":
        return [F.gelu(x + (ins[1] if len(ins) > 1 and ins[1] is not None else 0), approximate="tanh")]
    if op in ("QuickGelu", "Swish"):
        return [x * torch.sigmoid(a.get("alpha", 1.702 if op == "QuickGelu" else 1.0) * x)]
    if op == "GridSample":
        mode = {"linear": "bilinear"}.get(a.get("mode", "bilinear"), a.get("mode", "bilinear"))
        return [F.grid_sample(x, ins[1], mode=mode, padding_mode=a.get("padding_mode", "zeros"),
                              align_corners=bool(a.get("align_corners", 0)))]
    if op == "Col2Im":  # fold to the padded image, then crop: the pads may differ at the two ends
        size, k = [int(v) for v in ins[1].tolist()], [int(v) for v in ins[2].tolist()]
        n = len(size)
        p = list(a.get("pads", [0] * 2 * n))
        full = F.fold(x, [s + p[i] + p[n + i] for i, s in enumerate(size)], k, dilation=a.get("dilations", 1),
                      stride=a.get("strides", 1))
        return [full[(slice(None), slice(None)) + tuple(slice(p[i], p[i] + s) for i, s in enumerate(size))]]
    if op == "GlobalLpPool":
        p = a.get("p", 2)
        return [(x.abs() ** p).sum(dim=tuple(range(2, x.dim())), keepdim=True) ** (1.0 / p)]
    if op == "SimplifiedLayerNormalization":
        dims = list(range(a.get("axis", -1) % x.dim(), x.dim()))
        inv = torch.rsqrt((x * x).mean(dim=dims, keepdim=True) + a.get("epsilon", 1e-5))
        return [x * inv * ins[1], inv]
    if op == "Compress":  # the kept positions of the (truncated) condition, by index_select
        keep = torch.nonzero(ins[1].reshape(-1)).reshape(-1)
        if a.get("axis") is None:
            return [x.reshape(-1).index_select(0, keep)]
        return [x.index_select(a["axis"] % x.dim(), keep)]
    if op == "MaxUnpool":  # written in order, the last write to a position kept (torch's index_put)
        size = [int(v) for v in ins[2].tolist()] if len(ins) > 2 and ins[2] is not None else None
        if size is None:
            k, s = a["kernel_shape"], a.get("strides", [1] * len(a["kernel_shape"]))
            size = list(x.shape[:2]) + [(d - 1) * st + kk for d, st, kk in zip(x.shape[2:], s, k)]
        out = x.new_zeros(math.prod(size))
        for i, v in zip(ins[1].reshape(-1).tolist(), x.reshape(-1)):
            out = out.index_put((torch.tensor([i]),), v.reshape(1))
        return [out.reshape(size)]
    raise ValueError(op)
