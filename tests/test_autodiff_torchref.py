"""An independent oracle for the gradient tests: ONNX graphs evaluated with torch ops, differentiated by
torch.autograd. Each ONNX op maps to the torch function with the same forward maths; the backward pass
is torch's own, so it shares nothing with onnxprobe's rules.

``run_torch(model, feeds, params)`` evaluates the main graph; ``params`` (name -> tensor, typically
``requires_grad``) replace initializers, Constant outputs or inputs. ``torch_grads(...)`` returns the
gradients of a scalar loss (or of ``sum(y * cotangent)``) with respect to chosen tensors.

torch is a test-only dependency, and it runs in a worker process: ``in_worker(jobs)`` pickles the jobs,
runs ``python tests/test_autodiff_torchref.py JOBS OUT`` and reads the answers back. Importing torch
into the pytest process would raise its peak RSS for the whole session, and Linux hands a parent's peak
RSS down to its children across fork/exec, which would blind tests that measure a child's peak memory.
Without torch, ``in_worker`` skips the calling test.

The tests at the bottom check the oracle itself against onnx.reference on the forward pass.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

torch = F = None  # imported by _load(), only in the worker process (see below)
DTYPES: dict = {}


def _load():
    global torch, F
    if torch is None:
        import torch as _t

        torch, F = _t, _t.nn.functional
        DTYPES.update({1: torch.float32, 2: torch.uint8, 3: torch.int8, 5: torch.int16, 6: torch.int32,
                       7: torch.int64, 9: torch.bool, 10: torch.float16, 11: torch.float64, 16: torch.bfloat16})


class Unsupported(Exception):
    pass


def _attrs(node) -> dict:
    d = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        d[a.name] = v.decode() if isinstance(v, bytes) else v
    return d


def _ints(t) -> list[int]:
    return [int(v) for v in t.reshape(-1).tolist()]


def _axes(node, ins, attrs, opset, idx=1, since=13):
    if opset >= since:
        return _ints(ins[idx]) if len(ins) > idx and ins[idx] is not None else None
    return list(attrs["axes"]) if "axes" in attrs else None


def _norm(axes, r):
    return [a + r if a < 0 else a for a in axes]


def _reduce(fn, x, axes, keep, noop, elementwise=None):
    """``elementwise``: the op over no axis (noop_with_empty_axes=1 with empty axes), as onnxruntime
    computes it: |x| for ReduceL1, x^2 for ReduceSumSquare, log x for ReduceLogSum (default: x)."""
    if axes is None or len(axes) == 0:
        if noop:
            return elementwise(x) if elementwise is not None else x
        axes = list(range(x.dim()))
    axes = _norm(axes, x.dim())
    return fn(x, axes, keep)


def _pads_pool(attrs, x, k, s, d):
    n = len(k)
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pb, pe = [], []
        for i in range(n):
            size = x.shape[2 + i]
            out = -(-size // s[i])
            total = max((out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - size, 0)
            lo, hi = total // 2, total - total // 2
            pb.append(hi if auto == "SAME_LOWER" else lo)
            pe.append(lo if auto == "SAME_LOWER" else hi)
        return pb, pe
    if auto == "VALID":
        return [0] * n, [0] * n
    p = list(attrs.get("pads", [0] * 2 * n))
    return p[:n], p[n:]


def _torch_pad(pb, pe):
    out = []
    for b, e in zip(reversed(pb), reversed(pe)):
        out += [b, e]
    return out


def _conv(x, w, b, attrs):
    n = x.dim() - 2
    k = list(attrs.get("kernel_shape", w.shape[2:]))
    s = list(attrs.get("strides", [1] * n))
    d = list(attrs.get("dilations", [1] * n))
    pb, pe = _pads_pool(attrs, x, k, s, d)
    if any(pb + pe):
        x = F.pad(x, _torch_pad(pb, pe))
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[n]
    return fn(x, w, b, stride=s, dilation=d, groups=attrs.get("group", 1))


def _conv_transpose(x, w, b, attrs):
    n = x.dim() - 2
    s = list(attrs.get("strides", [1] * n))
    d = list(attrs.get("dilations", [1] * n))
    op = list(attrs.get("output_padding", [0] * n))
    p = list(attrs.get("pads", [0] * 2 * n))
    if "output_shape" in attrs or attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise Unsupported("ConvTranspose output_shape/auto_pad")
    fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[n]
    full = fn(x, w, b, stride=s, dilation=d, groups=attrs.get("group", 1), output_padding=op)
    sl = [slice(None), slice(None)] + [slice(p[i], full.shape[2 + i] - p[n + i]) for i in range(n)]
    return full[tuple(sl)]


def _pool(x, attrs, kind):
    n = x.dim() - 2
    k = list(attrs["kernel_shape"])
    s = list(attrs.get("strides", [1] * n))
    d = list(attrs.get("dilations", [1] * n))
    pb, pe = _pads_pool(attrs, x, k, s, d)
    ceil = bool(attrs.get("ceil_mode", 0))
    if kind == "max":
        xp = F.pad(x, _torch_pad(pb, pe), value=-math.inf) if any(pb + pe) else x
        fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[n]
        return fn(xp, k, s, 0, d, ceil_mode=ceil)
    if any(d_ != 1 for d_ in d):
        raise Unsupported("dilated AveragePool")
    xp = F.pad(x, _torch_pad(pb, pe)) if any(pb + pe) else x
    fn = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[n]
    if attrs.get("count_include_pad", 0) or not any(pb + pe):
        return fn(xp, k, s, 0, ceil_mode=ceil, count_include_pad=True)
    ones = F.pad(torch.ones_like(x[:1, :1]), _torch_pad(pb, pe))
    total = fn(xp, k, s, 0, ceil_mode=ceil, count_include_pad=True)
    cnt = fn(ones, k, s, 0, ceil_mode=ceil, count_include_pad=True)
    return total / cnt


def _lp_pool(x, attrs):
    """(sum of |x|^p over each window)^(1/p), the sums a Conv of ones per channel over the zero-padded
    |x|^p (padded further at the end where ceil_mode makes a last window run past the pads)."""
    n = x.dim() - 2
    k = list(attrs["kernel_shape"])
    s = list(attrs.get("strides", [1] * n))
    d = list(attrs.get("dilations", [1] * n))
    p = attrs.get("p", 2)
    pb, pe = _pads_pool(attrs, x, k, s, d)
    for i in range(n):
        size, span = x.shape[2 + i] + pb[i] + pe[i], (k[i] - 1) * d[i] + 1
        out = (-(-(size - span) // s[i]) if attrs.get("ceil_mode", 0) else (size - span) // s[i]) + 1
        if attrs.get("ceil_mode", 0) and (out - 1) * s[i] >= x.shape[2 + i] + pb[i]:
            out -= 1
        pe[i] += max((out - 1) * s[i] + span - size, 0)
    xp = F.pad(x.abs() ** p, _torch_pad(pb, pe))
    w = torch.ones((x.shape[1], 1, *k), dtype=x.dtype)
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[n]
    return conv(xp, w, stride=s, dilation=d, groups=x.shape[1]) ** (1.0 / p)


def _slice(x, starts, ends, axes, steps):
    for st, en, ax, sp in zip(starts, ends, axes, steps):
        dim = x.shape[ax]
        st = st + dim if st < 0 else st
        en = en + dim if en < 0 else en
        if sp > 0:
            st, en = min(max(st, 0), dim), min(max(en, 0), dim)
        else:
            st, en = min(max(st, -1), dim - 1), min(max(en, -1), dim - 1)
        x = torch.index_select(x, ax, torch.tensor(list(range(st, en, sp)), dtype=torch.long))
    return x


def _resize(x, ins, attrs, opset):
    mode = attrs.get("mode", "nearest")
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel" if opset >= 11 else "asymmetric")
    scales = ins[1] if opset < 11 else (ins[2] if len(ins) > 2 else None)
    sizes = ins[3] if opset >= 11 and len(ins) > 3 else None
    r = x.dim()
    if sizes is not None and sizes.numel():
        out = [int(v) for v in sizes.tolist()]
    else:
        sc = scales.tolist()
        out = [int(math.floor(x.shape[i] * sc[i])) for i in range(r)]
    if out[:2] != list(x.shape[:2]):
        raise Unsupported("Resize of batch/channel axes")
    if mode == "linear" and ctm == "asymmetric":  # x_in = x_out / scale (Upsample): gathers per axis
        for ax in range(2, r):
            n, s = x.shape[ax], out[ax] / x.shape[ax] if scales is None else float(scales[ax])
            pos = torch.arange(out[ax], dtype=torch.float64) / s
            i0 = torch.clamp(torch.floor(pos).long(), max=n - 1)
            w = (pos - i0).clamp(max=1.0).to(x.dtype).reshape([-1] + [1] * (r - 1 - ax))
            i1 = torch.clamp(i0 + 1, max=n - 1)
            x = x.index_select(ax, i0) * (1 - w) + x.index_select(ax, i1) * w
        return x
    if mode == "linear":
        if ctm not in ("half_pixel", "align_corners", "pytorch_half_pixel"):
            raise Unsupported(f"Resize linear {ctm}")
        m = {1: "linear", 2: "bilinear", 3: "trilinear"}[r - 2]
        if scales is not None and scales.numel() and ctm != "align_corners":
            return F.interpolate(x, scale_factor=[float(v) for v in scales.tolist()[2:]], mode=m,
                                 align_corners=False, recompute_scale_factor=False)
        return F.interpolate(x, size=out[2:], mode=m, align_corners=ctm == "align_corners")
    if mode == "nearest":
        nm = attrs.get("nearest_mode", "round_prefer_floor")
        if ctm == "asymmetric" and nm == "floor":
            return F.interpolate(x, size=out[2:], mode="nearest")
        if ctm == "half_pixel" and nm in ("round_prefer_ceil", "round_prefer_floor"):
            return F.interpolate(x, size=out[2:], mode="nearest-exact")
    raise Unsupported(f"Resize {mode} {ctm}")


def _expand(x, shape):
    shape = list(shape)
    r = max(len(shape), x.dim())
    xs = [1] * (r - x.dim()) + list(x.shape)
    ss = [1] * (r - len(shape)) + shape
    return x.reshape(xs).expand([max(a, b) for a, b in zip(xs, ss)])


MORE_OPS = {"Einsum", "TopK", "ScatterND", "ScatterElements", "DepthToSpace", "SpaceToDepth", "ReverseSequence",
            "GroupNormalization", "RMSNormalization", "Attention", "FusedMatMul", "SkipLayerNormalization", "BiasGelu",
            "FastGelu", "QuickGelu", "Swish", "LpNormalization", "MeanVarianceNormalization", "NegativeLogLikelihoodLoss",
            "SoftmaxCrossEntropyLoss", "Det", "GridSample", "Col2Im", "GlobalLpPool",
            "SimplifiedLayerNormalization", "Compress", "MaxUnpool", "RotaryEmbedding", "AffineGrid", "CenterCropPad",
            "EmbedLayerNormalization", "MultiHeadAttention", "TensorScatter", "DFT"}


def eval_node(node, ins, opset, env=None):  # noqa: C901 - one branch per op
    op, a = node.op_type, _attrs(node)
    x = ins[0] if ins else None
    if op in ("LSTM", "GRU", "RNN", "If", "Loop", "Scan"):  # tests/torchref_flow.py: recurrent layers, bodies
        from torchref_flow import eval_flow

        return eval_flow(node, ins, a, opset, env or {}, eval_node)
    if op in ("Add", "Sub", "Mul", "Div"):
        return [getattr(torch, op.lower())(ins[0], ins[1])]
    if op == "Pow":
        return [torch.pow(ins[0], ins[1].to(ins[0].dtype) if ins[1].dtype != ins[0].dtype else ins[1])]
    simple = {"Neg": torch.neg, "Sqrt": torch.sqrt, "Reciprocal": torch.reciprocal, "Exp": torch.exp, "Log": torch.log,
              "Abs": torch.abs, "Relu": torch.relu, "Sigmoid": torch.sigmoid, "Tanh": torch.tanh, "Erf": torch.erf,
              "HardSwish": F.hardswish, "Softplus": F.softplus, "Sign": torch.sign, "Floor": torch.floor,
              "Ceil": torch.ceil, "Not": torch.logical_not, "Identity": lambda t: t, "IsNaN": torch.isnan,
              "Round": torch.round, "Sin": torch.sin, "Cos": torch.cos, "Tan": torch.tan, "Asin": torch.asin,
              "Acos": torch.acos, "Atan": torch.atan, "Sinh": torch.sinh, "Cosh": torch.cosh, "Asinh": torch.asinh,
              "Acosh": torch.acosh, "Atanh": torch.atanh, "Softsign": F.softsign, "Mish": F.mish}
    if op in simple:
        return [simple[op](x)]
    if op == "Celu":
        return [F.celu(x, a.get("alpha", 1.0))]
    if op == "ThresholdedRelu":
        return [torch.where(x > a.get("alpha", 1.0), x, torch.zeros_like(x))]
    if op == "Shrink":
        lam, bias = a.get("lambd", 0.5), a.get("bias", 0.0)
        return [torch.where(x > lam, x - bias, torch.where(x < -lam, x + bias, torch.zeros_like(x)))]
    if op == "LeakyRelu":
        return [F.leaky_relu(x, a.get("alpha", 0.01))]
    if op == "PRelu":
        return [torch.where(x > 0, x, x * ins[1])]
    if op == "Elu":
        return [F.elu(x, a.get("alpha", 1.0))]
    if op == "Selu":
        al, ga = a.get("alpha", 1.67326319217681884765625), a.get("gamma", 1.05070102214813232421875)
        # exp of the negative part only: where() passes 0 * inf = NaN back from the branch it drops
        return [torch.where(x > 0, ga * x, ga * al * (torch.exp(torch.clamp(x, max=0)) - 1))]
    if op == "HardSigmoid":
        return [torch.clamp(a.get("alpha", 0.2) * x + a.get("beta", 0.5), 0, 1)]
    if op == "Gelu":
        return [F.gelu(x, approximate=a.get("approximate", "none"))]
    if op == "Clip":
        lo = ins[1] if len(ins) > 1 and ins[1] is not None else a.get("min")
        hi = ins[2] if len(ins) > 2 and ins[2] is not None else a.get("max")
        return [torch.clamp(x, lo, hi)]
    if op in ("Max", "Min"):
        fn = torch.maximum if op == "Max" else torch.minimum
        out = ins[0]
        for t in ins[1:]:
            out = fn(out, t)
        return [out]
    if op in ("Sum", "Mean"):
        out = ins[0]
        for t in ins[1:]:
            out = out + t
        return [out / len(ins) if op == "Mean" else out]
    if op == "Where":
        return [torch.where(ins[0], ins[1], ins[2])]
    if op in ("Softmax", "LogSoftmax"):
        fn = torch.softmax if op == "Softmax" else torch.log_softmax
        if opset >= 13:
            return [fn(x, a.get("axis", -1))]
        ax = a.get("axis", 1)
        ax = ax + x.dim() if ax < 0 else ax
        return [fn(x.reshape(list(x.shape[:ax]) + [-1]), -1).reshape(x.shape)]
    if op == "MatMul":
        return [torch.matmul(ins[0], ins[1])]
    if op == "Gemm":
        A = ins[0].T if a.get("transA", 0) else ins[0]
        B = ins[1].T if a.get("transB", 0) else ins[1]
        y = a.get("alpha", 1.0) * (A @ B)
        if len(ins) > 2 and ins[2] is not None:
            y = y + a.get("beta", 1.0) * ins[2]
        return [y]
    if op == "Conv":
        return [_conv(x, ins[1], ins[2] if len(ins) > 2 else None, a)]
    if op == "ConvTranspose":
        return [_conv_transpose(x, ins[1], ins[2] if len(ins) > 2 else None, a)]
    if op == "MaxPool":
        return [_pool(x, a, "max")]
    if op == "AveragePool":
        return [_pool(x, a, "avg")]
    if op == "LpPool":
        return [_lp_pool(x, a)]
    if op == "GlobalAveragePool":
        return [x.mean(dim=list(range(2, x.dim())), keepdim=True)]
    if op == "GlobalMaxPool":
        return [x.amax(dim=list(range(2, x.dim())), keepdim=True)]
    if op == "BatchNormalization":
        sh = [1, -1] + [1] * (x.dim() - 2)
        sc, b, m, v = (t.reshape(sh) for t in ins[1:5])
        return [sc * (x - m) / torch.sqrt(v + a.get("epsilon", 1e-5)) + b]
    if op == "LRN":  # ONNX's window: [c - floor((size-1)/2), c + ceil((size-1)/2)] (torch's differs for even sizes)
        size = a["size"]
        lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
        sq = F.pad(x * x, [0, 0] * (x.dim() - 2) + [lo, hi])  # pads the channel axis
        s = sum(sq[:, k:k + x.shape[1]] for k in range(size))
        return [x / (a.get("bias", 1.0) + a.get("alpha", 1e-4) / size * s) ** a.get("beta", 0.75)]
    if op in ("LayerNormalization", "InstanceNormalization"):
        if op == "LayerNormalization":
            ax = a.get("axis", -1)
            ax = ax + x.dim() if ax < 0 else ax
            dims = list(range(ax, x.dim()))
            sc, b = ins[1], (ins[2] if len(ins) > 2 else None)
        else:
            dims = list(range(2, x.dim()))
            sh = [-1] + [1] * (x.dim() - 2)
            sc, b = ins[1].reshape(sh), ins[2].reshape(sh)
        m = x.mean(dim=dims, keepdim=True)
        v = ((x - m) ** 2).mean(dim=dims, keepdim=True)
        inv = 1 / torch.sqrt(v + a.get("epsilon", 1e-5))
        y = (x - m) * inv * sc
        return [y + b if b is not None else y] + ([m, inv] if op == "LayerNormalization" else [])
    if op.startswith("Reduce"):
        axes = _axes(node, ins, a, opset, 1, 13 if op == "ReduceSum" else 18)
        keep, noop = bool(a.get("keepdims", 1)), a.get("noop_with_empty_axes", 0)
        fns = {"ReduceSum": lambda t, d, k: t.sum(dim=d, keepdim=k),
               "ReduceMean": lambda t, d, k: t.mean(dim=d, keepdim=k),
               "ReduceMax": lambda t, d, k: t.amax(dim=d, keepdim=k),
               "ReduceMin": lambda t, d, k: t.amin(dim=d, keepdim=k),
               "ReduceL2": lambda t, d, k: torch.sqrt((t * t).sum(dim=d, keepdim=k)),
               "ReduceSumSquare": lambda t, d, k: (t * t).sum(dim=d, keepdim=k),
               "ReduceProd": lambda t, d, k: _prod(t, d, k),
               "ReduceL1": lambda t, d, k: t.abs().sum(dim=d, keepdim=k),
               "ReduceLogSum": lambda t, d, k: torch.log(t.sum(dim=d, keepdim=k)),
               "ReduceLogSumExp": lambda t, d, k: torch.logsumexp(t, dim=d, keepdim=k)}
        elementwise = {"ReduceL1": torch.abs, "ReduceL2": lambda t: torch.sqrt(t * t), "ReduceSumSquare": lambda t: t * t,
                       "ReduceLogSum": torch.log}.get(op)
        return [_reduce(fns[op], x, axes, keep, noop, elementwise)]
    if op == "Reshape":
        shape = _ints(ins[1])
        shape = [x.shape[i] if (s == 0 and not a.get("allowzero", 0)) else s for i, s in enumerate(shape)]
        return [x.reshape(shape)]
    if op == "Flatten":
        ax = a.get("axis", 1)
        ax = ax + x.dim() if ax < 0 else ax
        return [x.reshape(int(np.prod(x.shape[:ax])), -1)]
    if op in ("Squeeze", "Unsqueeze"):
        axes = _axes(node, ins, a, opset)
        if op == "Squeeze":
            axes = _norm(axes, x.dim()) if axes is not None else [i for i, d in enumerate(x.shape) if d == 1]
            return [x.reshape([d for i, d in enumerate(x.shape) if i not in axes])]
        r = x.dim() + len(axes)
        axes = _norm(axes, r)
        shape, it = [], iter(x.shape)
        for i in range(r):
            shape.append(1 if i in axes else next(it))
        return [x.reshape(shape)]
    if op == "Transpose":
        return [x.permute(a.get("perm", list(range(x.dim()))[::-1]))]
    if op == "Concat":
        return [torch.cat([t for t in ins], dim=a["axis"])]
    if op == "Split":
        ax = a.get("axis", 0)
        n = len(node.output)
        if opset >= 13 and len(ins) > 1 and ins[1] is not None:
            sizes = _ints(ins[1])
        elif "split" in a:
            sizes = list(a["split"])
        else:
            dim = x.shape[ax]
            per = -(-dim // n)
            sizes = [per] * (n - 1) + [dim - per * (n - 1)]
        return list(torch.split(x, sizes, dim=ax))
    if op == "Slice":
        if opset < 10:
            st, en = list(a["starts"]), list(a["ends"])
            ax = list(a.get("axes", range(len(st))))
            sp = [1] * len(st)
        else:
            st, en = _ints(ins[1]), _ints(ins[2])
            ax = _ints(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(len(st)))
            sp = _ints(ins[4]) if len(ins) > 4 and ins[4] is not None else [1] * len(st)
        return [_slice(x, st, en, _norm(ax, x.dim()), sp)]
    if op == "Gather":
        ax = a.get("axis", 0)
        ax = ax + x.dim() if ax < 0 else ax
        idx = ins[1].long()
        idx = torch.where(idx < 0, idx + x.shape[ax], idx)
        out = torch.index_select(x, ax, idx.reshape(-1))
        return [out.reshape(list(x.shape[:ax]) + list(idx.shape) + list(x.shape[ax + 1:]))]
    if op == "GatherElements":
        ax = a.get("axis", 0)
        idx = ins[1].long()
        idx = torch.where(idx < 0, idx + x.shape[ax], idx)
        return [torch.gather(x, ax, idx)]
    if op == "GatherND":
        if a.get("batch_dims", 0):
            raise Unsupported("GatherND batch_dims")
        idx = ins[1].long()
        k = idx.shape[-1]
        flat = idx.reshape(-1, k)
        out = x[tuple(flat[:, j] for j in range(k))]
        return [out.reshape(list(idx.shape[:-1]) + list(x.shape[k:]))]
    if op == "Expand":
        return [_expand(x, _ints(ins[1]))]
    if op == "Tile":
        return [x.repeat(_ints(ins[1]))]
    if op == "Pad":
        mode = a.get("mode", "constant")
        if opset < 11:
            pads, value, axes = list(a["pads"]), a.get("value", 0.0), list(range(x.dim()))
        else:
            pads = _ints(ins[1])
            value = float(ins[2].reshape(-1)[0]) if len(ins) > 2 and ins[2] is not None and ins[2].numel() else 0.0
            axes = _norm(_ints(ins[3]), x.dim()) if len(ins) > 3 and ins[3] is not None else list(range(x.dim()))
        k = len(axes)
        pb, pe = [0] * x.dim(), [0] * x.dim()
        for j, ax in enumerate(axes):
            pb[ax], pe[ax] = pads[j], pads[k + j]
        tmode = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}[mode]
        lead = next((i for i in range(x.dim()) if pb[i] or pe[i]), x.dim())
        tp = _torch_pad(pb[lead:], pe[lead:])
        if tmode == "constant":
            return [F.pad(x, tp, value=value)]
        k = x.dim() - lead  # torch pads the last 1-3 axes of a (N, C, ...) tensor
        v = x.reshape([1, -1] + list(x.shape[lead:]))
        out = F.pad(v, tp, mode=tmode)
        return [out.reshape(list(x.shape[:lead]) + list(out.shape[2:]))]
    if op == "Resize":
        return [_resize(x, ins, a, opset)]
    if op == "Upsample":  # Resize with asymmetric coordinates (nearest: floor)
        sc = a["scales"] if "scales" in a else ins[1].tolist()
        ra = dict(mode=a.get("mode", "nearest"), coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        return [_resize(x, [x, torch.tensor(sc)], ra, 10)]
    if op in ("Dropout",):
        return [x] + ([torch.ones_like(x, dtype=torch.bool)] if len(node.output) > 1 else [])
    if op == "Cast":
        return [x.to(DTYPES[a["to"]])]
    if op == "CastLike":
        return [x.to(ins[1].dtype)]
    if op == "Constant":
        t = a.get("value")
        if t is not None:
            return [torch.from_numpy(np.array(numpy_helper.to_array(t)))]
        for k, f in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64), ("value_ints", np.int64)):
            if k in a:
                return [torch.from_numpy(np.array(a[k], dtype=f))]
    if op == "ConstantOfShape":
        v = numpy_helper.to_array(a["value"]) if "value" in a else np.zeros([1], np.float32)
        return [torch.full(_ints(ins[0]), v.reshape(-1)[0].item(), dtype=DTYPES[helper.np_dtype_to_tensor_dtype(v.dtype)])]
    if op == "Shape":
        s = list(x.shape)
        st, en = a.get("start", 0), a.get("end", len(s))
        return [torch.tensor(s[st:en], dtype=torch.int64)]
    if op == "Size":
        return [torch.tensor(x.numel(), dtype=torch.int64)]
    if op in ("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"):
        fn = {"Equal": torch.eq, "Less": torch.lt, "LessOrEqual": torch.le, "Greater": torch.gt, "GreaterOrEqual": torch.ge}[op]
        return [fn(ins[0], ins[1])]
    if op in ("And", "Or", "Xor"):
        return [{"And": torch.logical_and, "Or": torch.logical_or, "Xor": torch.logical_xor}[op](ins[0], ins[1])]
    if op == "Range":
        return [torch.arange(ins[0].item(), ins[1].item(), ins[2].item(), dtype=ins[0].dtype)]
    if op == "OneHot":
        depth = int(ins[1].reshape(-1)[0])
        off, on = ins[2][0], ins[2][1]
        idx = ins[0].long()
        idx = torch.where(idx < 0, idx + depth, idx)
        oh = F.one_hot(idx, depth).to(ins[2].dtype)
        ax = a.get("axis", -1)
        if ax != -1:
            oh = oh.movedim(-1, ax)
        return [oh * (on - off) + off]
    if op == "Trilu":
        k = int(ins[1].item()) if len(ins) > 1 and ins[1] is not None else 0
        return [torch.triu(x, k) if a.get("upper", 1) else torch.tril(x, k)]
    if op == "CumSum":
        ax = int(ins[1].item())
        t = torch.flip(x, [ax]) if a.get("reverse", 0) else x
        c = torch.cumsum(t, ax)
        if a.get("exclusive", 0):
            c = c - t
        return [torch.flip(c, [ax]) if a.get("reverse", 0) else c]
    if op == "CumProd":  # exclusive: the products shifted by one along the axis, 1 first
        ax = int(ins[1].item()) % x.dim()
        t = torch.flip(x, [ax]) if a.get("reverse", 0) else x
        c = torch.cumprod(t, ax)
        if a.get("exclusive", 0):
            c = torch.cat([torch.ones_like(c.narrow(ax, 0, 1)), c.narrow(ax, 0, c.shape[ax] - 1)], ax)
        return [torch.flip(c, [ax]) if a.get("reverse", 0) else c]
    if op in MORE_OPS:  # tests/torchref_more.py: algebra, scatters, norms, attention, com.microsoft ops
        from torchref_more import eval_more

        return eval_more(node, ins, a, opset)
    if op in ("QuantizeLinear", "DequantizeLinear"):
        return [_quant(op, a, ins)]
    raise Unsupported(op)


QRANGE = {"int8": (-128, 127), "uint8": (0, 255)}


def _quant(op, a, ins):
    """QuantizeLinear with torch's fake quantization, whose backward is torch's own straight-through
    estimator (the gradient passes where round(x / s) + zp is inside [qmin, qmax]). The integer tensor is
    kept as float values on the integer grid: fq / s + zp, with fq = fake_quantize(x); DequantizeLinear
    is then (q - zp) s. Per-tensor or per-axis (1-D scale), int8 / uint8."""
    x, s = ins[0], ins[1]
    zp = ins[2] if len(ins) > 2 and ins[2] is not None else torch.zeros((), dtype=torch.uint8)
    axis = a.get("axis", 1)
    if op == "DequantizeLinear":
        shape = [1] * x.dim()
        if s.dim() == 1 and s.numel() > 1:
            shape[axis] = -1
        return (x.to(s.dtype) - zp.to(s.dtype).reshape(shape if zp.dim() else [])) * s.reshape(shape if s.dim() else [])
    kind = str(zp.dtype).replace("torch.", "")
    if kind not in QRANGE:
        raise Unsupported(f"QuantizeLinear to {kind}")
    lo, hi = QRANGE[kind]
    xf = x.float()
    if s.dim() == 1 and s.numel() > 1:
        fq = torch.fake_quantize_per_channel_affine(xf, s.float(), zp.to(torch.int32), axis % x.dim(), lo, hi)
        shape = [1] * x.dim()
        shape[axis] = -1
        return (fq / s.float().reshape(shape) + zp.float().reshape(shape)).to(x.dtype)
    fq = torch.fake_quantize_per_tensor_affine(xf, float(s.reshape(-1)[0]), int(zp.reshape(-1)[0]), lo, hi)
    return (fq / s.float().reshape(-1)[0] + float(zp.reshape(-1)[0])).to(x.dtype)


def _prod(t, d, k):
    for ax in sorted(d, reverse=True):
        t = t.prod(dim=ax, keepdim=k)
    return t


def _opset(model) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def run_torch(model: onnx.ModelProto, feeds: dict, params: dict | None = None, outputs: list[str] | None = None) -> dict:
    """Evaluate the main graph with torch. ``feeds``/``params``: name -> torch.Tensor (numpy is converted)."""
    _load()
    opset = _opset(model)
    env: dict = {}
    for init in model.graph.initializer:
        env[init.name] = torch.from_numpy(np.array(numpy_helper.to_array(init)))
    for k, v in feeds.items():
        env[k] = v if isinstance(v, torch.Tensor) else torch.from_numpy(np.asarray(v))
    params = params or {}
    env.update(params)
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output[0] in params:
            continue
        ins = [env[i] if i else None for i in node.input]
        outs = eval_node(node, ins, opset, env)
        for name, v in zip(node.output, outs):
            if name:
                env[name] = params.get(name, v) if name in params and node.op_type != "Constant" else v
    names = outputs or [o.name for o in model.graph.output]
    return {n: env[n] for n in names}


def torch_grads(model: onnx.ModelProto, feeds: dict, wrt: dict[str, np.ndarray], output: str,
                cotangent: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """d/d(wrt) of sum(output * cotangent) (or of output itself when it is a scalar and no cotangent)."""
    _load()
    params = {k: torch.tensor(np.asarray(v), requires_grad=True) for k, v in wrt.items()}
    feeds = {k: v for k, v in feeds.items() if k not in params}
    y = run_torch(model, feeds, params, [output])[output]
    loss = y if cotangent is None else (y * torch.from_numpy(np.asarray(cotangent))).sum()
    gs = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
    return {k: (np.zeros_like(np.asarray(wrt[k])) if gr is None else gr.detach().numpy()) for k, gr in zip(params, gs)}


# -- the worker ------------------------------------------------------------------------------------------

def _job(job: dict):
    model = onnx.load_from_string(job["model"])
    try:
        if job["kind"] == "forward":
            out = run_torch(model, job["feeds"])
            return {k: v.detach().numpy() for k, v in out.items()}
        total: dict = {}
        for name, cot in job["outputs"]:
            part = torch_grads(model, job["feeds"], job["wrt"], name, cot)
            for k, v in part.items():
                total[k] = total.get(k, 0) + v
        return total
    except Unsupported as e:
        return {"__unsupported__": str(e)}


def in_worker(jobs: list[dict]) -> list[dict]:
    """Run torch jobs in a fresh process. A job: {"kind": "grads", "model": bytes, "feeds": {...},
    "wrt": {name: array}, "outputs": [(output, cotangent), ...]} -> {name: gradient}; or
    {"kind": "forward", "model", "feeds"} -> {output: value}. ``{"__unsupported__": why}`` when the
    oracle has no torch equivalent for an op."""
    import importlib.util
    import pickle
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (test-only dependency: pip install torch)")
    with tempfile.TemporaryDirectory(prefix="onnxprobe-torch-") as d:
        src, dst = Path(d) / "jobs.pkl", Path(d) / "out.pkl"
        src.write_bytes(pickle.dumps(jobs))
        r = subprocess.run([sys.executable, __file__, str(src), str(dst)], capture_output=True, text=True, timeout=1800)
        assert r.returncode == 0, r.stderr[-3000:]
        return pickle.loads(dst.read_bytes())


if __name__ == "__main__":
    import pickle
    import sys
    from pathlib import Path

    _jobs = pickle.loads(Path(sys.argv[1]).read_bytes())
    Path(sys.argv[2]).write_bytes(pickle.dumps([_job(j) for j in _jobs]))
    raise SystemExit(0)


# -- the oracle checks itself against onnx.reference on a few forward graphs ----------------------------

def _one(op, ins, shapes, opset=17, **attrs):
    from conftest import make_model

    vi = [helper.make_tensor_value_info(n, 11, s) for n, s in zip(ins, shapes)]
    return make_model([helper.make_node(op, ins, ["y"], **attrs)], vi,
                      [helper.make_tensor_value_info("y", 11, None)], opset=opset)


@pytest.mark.parametrize("op,shapes,attrs", [
    ("Conv", [[1, 4, 7, 6], [6, 2, 3, 2]], dict(group=2, strides=[2, 1], pads=[1, 0, 0, 1], dilations=[1, 2])),
    ("MaxPool", [[1, 2, 7, 7]], dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("AveragePool", [[1, 2, 7, 7]], dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 0, 0])),
    ("ConvTranspose", [[1, 4, 4, 3], [4, 3, 3, 3]], dict(group=2, strides=[2, 2], pads=[1, 0, 0, 1], output_padding=[1, 0])),
])
def test_oracle_matches_reference_forward(op, shapes, attrs):
    from onnx.reference import ReferenceEvaluator

    names = ["x", "w"][: len(shapes)]
    m = _one(op, names, shapes, **attrs)
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(s) for n, s in zip(names, shapes)}
    got = in_worker([{"kind": "forward", "model": m.SerializeToString(), "feeds": feeds}])[0]["y"]
    if op == "ConvTranspose":  # onnx.reference ignores ConvTranspose's group: compare with onnxruntime (float32)
        import onnxruntime as ort

        m32 = _one(op, names, shapes, **attrs)
        for v in list(m32.graph.input) + list(m32.graph.output):
            v.type.tensor_type.elem_type = 1
        s = ort.InferenceSession(m32.SerializeToString(), providers=["CPUExecutionProvider"])
        want = s.run(None, {k: v.astype(np.float32) for k, v in feeds.items()})[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        return
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
