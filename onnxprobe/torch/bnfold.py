"""``diff --grad --vs-torch``: the gradients of the parameters of a layer and the BatchNorm an exporter folded
into it, by the chain rule. Both exporters fold each eval-mode BatchNorm into the Conv before it, and dynamo
also into a ConvTranspose and a Linear's Gemm (legacy keeps the BatchNormalization there; neither folds into
a MatMul; measured, torch 2.13): ``W' = W * s`` per output channel (a Conv's and a Gemm's first axis, a
ConvTranspose's second, per group: ``param_values.channel_scales``) and ``b' = (b - mean) * s + beta``, with
``s = gamma / sqrt(var + eps)``.
No initializer holds W, b, gamma or beta, but the ONNX gradients of W' and b' (onnxprobe's backward graph)
give theirs: ``dL/dW = dL/dW' * s``, ``dL/db = dL/db' * s``, ``dL/dbeta = dL/db'`` (b' is read per channel)
and ``dL/dgamma = sum over the channel of dL/dW' * W / sqrt(var + eps) + dL/db' * (b - mean) / sqrt(var + eps)``.
Those are added to the backward graph and compared with torch autograd's gradients of the parameters.

A fold is found by value: a layer's weight that is a torch weight of its shape times one BatchNorm's ``s`` per
output channel, and its bias that BatchNorm's shift of the layer's bias (0 without one). A weight that is such a fold
in most of its values but not all (or a bias that is not that shift) is a folded copy changed: the model is
not an export of the module as it is now (``ParamMap.contradicts``, named ``COPY[PARAMETER]``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import onnx

from onnxprobe.graph.builder import GraphBuilder, all_names, opset_version
from onnxprobe.graph.tensor_data import to_array
from onnxprobe.graph.walk import copied_from
from onnxprobe.match.engine import FOLDED, Pair, Unmatched
from onnxprobe.match.observe import Observable
from onnxprobe.text import some
from onnxprobe.torch.param_values import NOT_AN_EXPORT, channel_scales
from onnxprobe.torch.params import ParamMap
from onnxprobe.torch.pairing import BATCHNORMS
from onnxprobe.torch.runner import to_numpy
from onnxprobe.types import grad_name

LOOSE_RTOL = 0.05  # a fold changed in every value is still told by its parameter and BatchNorm to a few percent
RTOL = 1e-4  # a float32 fold is off by ~1e-7 of the values (measured, dynamo); a 16-bit one is not unfolded


@dataclass
class Fold:
    weight: str  # the folded weight W' (an initializer)
    bias: str | None  # the folded bias b' (None: all zeros, dropped by the exporter)
    conv: str  # the torch Conv's weight W
    conv_bias: str | None  # its bias b (None: the Conv has none)
    bn: str  # the BatchNorm's module path
    gamma: str | None  # its weight and bias (None: not affine)
    beta: str | None
    inv: np.ndarray  # 1 / sqrt(var + eps), float64
    scale: np.ndarray  # s = gamma / sqrt(var + eps)
    w: np.ndarray  # W, float64
    centred: np.ndarray  # b - mean, float64
    op: str = "Conv"  # the fused layer: Conv, ConvTranspose or Gemm
    shared_bias: int = 1  # the folds that read its bias (legacy merges equal folded biases: a fresh net's zeros)

    def per_weight(self, v: np.ndarray) -> np.ndarray:
        """``v`` (one per output channel) laid out along W's output channels (``param_values.channel_scales``)."""
        return channel_scales(self.w.shape, v, transposed=self.op == "ConvTranspose")[0]

    def params(self) -> list[str]:
        return [p for p in (self.conv, self.conv_bias, self.gamma, self.beta) if p]

    def bias_params(self) -> list[str]:
        """The parameters whose gradient needs this fold's own bias gradient: a shared bias's is a sum, so none of
        them is compared; gamma's reads it only where b - mean is not zero (else that term is 0)."""
        return [p for p in (self.conv_bias, self.beta) if p] + ([self.gamma] if self.gamma and np.any(self.centred) else [])


@dataclass
class FoldGrad:
    fold: Fold
    param: str  # the torch parameter
    tensor: str  # its gradient in the backward graph
    name: str  # as reported
    how: str
    sources: tuple[str, ...]  # the folded initializers it is computed from


@dataclass
class BatchNormStats:
    """An eval-mode BatchNorm of the module as an exporter folds it: ``y = x * scale + shift`` per channel, with
    ``scale = gamma * inv``, ``inv = 1 / sqrt(var + eps)`` and ``shift = beta - mean * scale``; float64."""

    path: str
    module: object
    inv: np.ndarray
    gamma: np.ndarray  # ones where the BatchNorm is not affine
    beta: np.ndarray  # zeros where it is not
    mean: np.ndarray

    @property
    def scale(self) -> np.ndarray:
        return self.gamma * self.inv

    @property
    def shift(self) -> np.ndarray:
        return self.beta - self.mean * self.scale


def batchnorm_statistics(mod) -> list[BatchNormStats]:
    """The module's eval-mode BatchNorms with running statistics (``find_folds``, and the (scale, shift) of
    ``param_values.batchnorm_fold`` that tells a folded weight from other values)."""
    out = []
    for path, m in mod.named_modules():
        if type(m).__name__ not in BATCHNORMS or getattr(m, "running_var", None) is None:
            continue
        inv = 1.0 / np.sqrt(to_numpy(m.running_var.detach()).astype(np.float64) + m.eps)
        gamma = to_numpy(m.weight.detach()).astype(np.float64) if m.weight is not None else np.ones_like(inv)
        beta = to_numpy(m.bias.detach()).astype(np.float64) if m.bias is not None else np.zeros_like(inv)
        out.append(BatchNormStats(path, m, inv, gamma, beta, to_numpy(m.running_mean.detach()).astype(np.float64)))
    return out


def _agree(v: np.ndarray, want: np.ndarray, rtol: float = RTOL) -> np.ndarray:
    return np.isclose(v.astype(np.float64), want, rtol=rtol, atol=rtol * float(np.abs(want).max(initial=0.0)))


def find_folds(model: onnx.ModelProto, mod, params: dict[str, np.ndarray], pm: ParamMap) -> list[Fold]:
    """The Conv / ConvTranspose / Gemm + BatchNorm folds of ``model`` (an export of ``mod``) whose weight and bias are folds of the
    module's parameters; a fold changed in some of its values is marked in ``pm`` as a contradiction instead."""
    stats = batchnorm_statistics(mod)
    if not stats:
        return []
    order = {path: k for k, (path, _) in enumerate(mod.named_modules())}
    values = {t.name: to_array(t) for t in model.graph.initializer}
    maybe = pm.derived | pm.folds  # initializers no parameter holds as it is
    # legacy keeps one initializer of equal values and gives the others' names as Identity of it: the folded zero
    # bias of every fresh Conv(bias=False) + BatchNorm is one initializer, which each Conv reads through an Identity
    source = copied_from(model.graph.node, values)
    found: list[Fold] = []
    for n in model.graph.node:
        w_in, b_in = (source.get(n.input[k]) if len(n.input) > k else None for k in (1, 2))
        # no bias at all: dynamo's optimizer drops the all-zero folded bias of a fresh Conv(bias=False) + BatchNorm
        bias_dropped = len(n.input) < 3 or not n.input[2]
        if not _fusable(n) or w_in not in maybe or (b_in is None and not bias_dropped):
            continue
        v = values[w_in]
        vb = values[b_in] if b_in is not None else None
        if v.dtype.itemsize <= 2 or v.ndim < (2 if n.op_type == "Gemm" else 3):
            continue
        tied = _candidates(v, n.op_type, params, pm, stats, RTOL)
        # a fold changed in every value (a weight scaled by 1.01 after the export) agrees with none at float32's
        # rounding: the one it agrees with to a few percent is that fold, changed (it raised an IndexError here)
        loose = not tied
        tied = tied or _candidates(v, n.op_type, params, pm, stats, LOOSE_RTOL)
        best = None if not tied else tied[0] if len(tied) == 1 else _next_batchnorm(tied, order)
        if best is None:
            continue
        frac, p, bn, want = best
        if loose:
            frac = float(_agree(v, want).mean())  # at RTOL: below 1, said as a fold changed in that many values
        path, m, inv, gamma, beta, mean = bn.path, bn.module, bn.inv, bn.gamma, bn.beta, bn.mean
        cb = p.rpartition(".")[0] + ".bias" if p.endswith(".weight") else None
        cb = cb if cb in params and params[cb].shape == inv.shape else None
        b64 = params[cb].astype(np.float64) if cb else np.zeros_like(inv)
        want_b = (b64 - mean) * gamma * inv + beta
        if frac < 1.0:
            _changed(pm, w_in, p, path, int((~_agree(v, want)).sum()), v.size, "weight * gamma / sqrt(var + eps)")
            continue
        if vb is None:  # dropped: a fold whose bias is zero (else the node computes without the BatchNorm's shift)
            if not np.allclose(want_b, 0.0, rtol=0, atol=RTOL * float(np.abs(beta).max(initial=1.0))):
                continue
        elif vb.shape != want_b.shape or not _agree(vb, want_b).all():
            k = int((~_agree(vb, want_b)).sum()) if vb.shape == want_b.shape else vb.size
            _changed(pm, b_in, cb or (f"{path}.bias" if m.bias is not None else p), path, k, vb.size,
                     "(bias - mean) * gamma / sqrt(var + eps) + beta")
            continue
        found.append(Fold(w_in, b_in, p, cb, path, f"{path}.weight" if m.weight is not None else None,
                          f"{path}.bias" if m.bias is not None else None, inv, gamma * inv,
                          params[p].astype(np.float64), b64 - mean, n.op_type))
    # each parameter folded once, and by one weight (a Conv called twice: torch's gradient is a sum)
    count: dict[str, int] = {}
    for f in found:
        for p in f.params():
            count[p] = count.get(p, 0) + 1
    folds = [f for f in found if all(count[p] == 1 for p in f.params())]
    folds = [f for f in folds if sum(g.weight == f.weight for g in folds) == 1]
    for f in folds:  # a bias several folds read (equal values merged): its gradient is the sum of theirs
        f.shared_bias = sum(g.bias == f.bias for g in folds) if f.bias is not None else 1
        if f.shared_bias > 1:
            for q in f.bias_params():
                pm.unused[q] = (f"folded with the BatchNorm {f.bn} into the bias {f.bias}, one initializer that "
                                f"{f.shared_bias} folded layers read (equal values, merged by the exporter): its gradient is "
                                "the sum of theirs, not comparable one by one")
        elif f.bias is None:
            for q in f.bias_params():
                pm.unused[q] = (f"folded with the BatchNorm {f.bn} into a bias of zeros, which the exporter dropped from "
                                f"its {f.op}: no tensor holds that bias's gradient, from which torch's of {q} comes")
    return folds


def _candidates(v: np.ndarray, op: str, params: dict[str, np.ndarray], pm: ParamMap, stats: list[BatchNormStats],
                rtol: float) -> list[tuple]:
    """The (parameter, BatchNorm) folds that ``v``, the weight of a node of ``op``, agrees with best, in at least
    half of its values that are not zero on both sides, within ``rtol``: (agreement, parameter, BatchNormStats,
    the folded values it predicts) each."""
    tied: list[tuple] = []
    for p, pv in params.items():
        if pv.shape != v.shape or p in pm.links:
            continue
        for bn in stats:
            per = channel_scales(v.shape, bn.scale, transposed=op == "ConvTranspose")
            if not per:
                continue
            want = pv.astype(np.float64) * per[0]
            live = (want != 0) | (v != 0)  # zeros agree with any scale: they tell nothing
            frac = float(_agree(v, want, rtol)[live].mean()) if live.any() else 0.0
            if frac >= 0.5 and (not tied or frac > tied[0][0]):
                tied = [(frac, p, bn, want)]
            elif tied and frac == tied[0][0]:
                tied.append((frac, p, bn, want))
    return tied


def _next_batchnorm(tied: list[tuple], order: dict[str, int]) -> tuple | None:
    """Of candidates that fold one parameter with BatchNorms of the same statistics (fresh ones: every scale
    1/sqrt(1 + eps)), whose values therefore cannot tell them apart, the BatchNorm registered next after the
    parameter's module (``Sequential(Conv, BatchNorm, ReLU)``, ``conv1, bn1``), which is the one it feeds; None
    where the candidates fold other parameters or BatchNorms that differ (ambiguous), or no BatchNorm follows.
    ``tied``: (agreement, parameter, BatchNormStats, the folded values it predicts) each."""
    first = tied[0][2]
    if len({p for _, p, _, _ in tied}) != 1 or any(not (np.array_equal(bn.scale, first.scale) and np.array_equal(bn.shift, first.shift))
                                                   for _, _, bn, _ in tied):
        return None
    at = order.get(tied[0][1].rpartition(".")[0], -1)
    after = [t for t in tied if order.get(t[2].path, -1) > at]
    return min(after, key=lambda t: order[t[2].path]) if at >= 0 and after else None


def _fusable(n: onnx.NodeProto) -> bool:
    """A Conv, ConvTranspose or Gemm (``Y = A @ B^T + C``: a Linear, weight [out, in]) with a weight (and a bias, or
    none: dropped by the exporter where it was zeros)."""
    if n.op_type not in ("Conv", "ConvTranspose", "Gemm") or len(n.input) < 2:
        return False
    if n.op_type != "Gemm":
        return True
    at = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
    return at.get("transB", 0) == 1 and not at.get("transA", 0) and at.get("alpha", 1.0) == 1.0 and at.get("beta", 1.0) == 1.0


def _changed(pm: ParamMap, init: str, param: str, bn: str, k: int, size: int, how: str) -> None:
    pm.refused[init] = (f"holds the torch parameter {param} with the BatchNorm {bn} folded in ({how}) but for {k} of "
                        f"its {size} values: the exporter's fold of it, changed; {NOT_AN_EXPORT}")
    pm.contradicts.add(init)
    pm.copies[init] = param
    pm.derived.discard(init)
    pm.folds.discard(init)
    pm.unused[param] = f"its folded copy {init} holds {k} other values: {NOT_AN_EXPORT}"


def add_fold_grads(plan, folds: list[Fold], cands: list[tuple[str, Observable]]) -> tuple[list[FoldGrad], list]:
    """Adds to ``plan``'s backward graph, for each fold whose weight and bias have whole gradients in it, the
    gradients of its torch parameters by the chain rule, and to ``plan.grads`` each under its own name; returns
    them and the candidates (``compare.gradients.candidates``' form) that ``grad_side`` makes observables of."""
    bw = plan.backward.model
    partial = getattr(plan.backward, "partial", {})
    first: dict[str, Observable] = {}
    for t, o in cands:
        first.setdefault(t, o)
    dtypes = {t.name: onnx.helper.tensor_dtype_to_np_dtype(t.data_type) for t in bw.graph.initializer}
    b = GraphBuilder(all_names(bw), opset_version(bw, default=13), nodes=bw.graph.node, scope="onnxprobe_unfold")
    out, extra = [], []
    for f in folds:
        if any(t not in plan.grads or t in partial or t not in first for t in (f.weight, f.bias) if t is not None):
            continue
        gw, gb = plan.grads[f.weight], plan.grads[f.bias] if f.bias is not None else None
        dt = dtypes.get(f.weight, np.dtype(np.float32))
        said_w, said_b = grad_name(f.weight), grad_name(f.bias) if f.bias is not None else ""
        got = [(f.conv, b.node("Mul", [gw, b.const(f.per_weight(f.scale).astype(dt))], f"{f.conv}_grad_unfolded"),
                f"{said_w}*s", f"{said_w} times s = gamma / sqrt(var + eps) of {f.bn}, per output channel", (f.weight,))]
        skip = set(f.bias_params()) if f.shared_bias > 1 or f.bias is None else set()
        if f.conv_bias and f.conv_bias not in skip:
            got.append((f.conv_bias, b.node("Mul", [gb, b.const(f.scale.astype(dt))], f"{f.conv_bias}_grad_unfolded"),
                        f"{said_b}*s", f"{said_b} times s = gamma / sqrt(var + eps) of {f.bn}", (f.bias,)))
        if f.beta and f.beta not in skip:
            got.append((f.beta, b.node("Identity", [gb], f"{f.beta}_grad_unfolded"), said_b, f"{said_b} itself", (f.bias,)))
        if f.gamma and f.gamma not in skip:
            part_w = _per_channel(b, b.node("Mul", [gw, b.const((f.w * f.per_weight(f.inv)).astype(dt))], "unfold_w"), f)
            if gb is None:  # the bias dropped: b - mean is 0 (bias_params), the weight's term alone
                got.append((f.gamma, b.node("Identity", [part_w], f"{f.gamma}_grad_unfolded"), f"{said_w}*W",
                            f"the sum over each channel of {said_w} times W / sqrt(var + eps), of {f.conv} and {f.bn} (its "
                            "bias, b - mean, is 0)", (f.weight,)))
            else:
                part_b = b.node("Mul", [gb, b.const((f.centred * f.inv).astype(dt))], "unfold_b")
                got.append((f.gamma, b.node("Add", [part_w, part_b], f"{f.gamma}_grad_unfolded"),
                            f"{said_w}*W+{said_b}*(b-mean)", f"the sum over each channel of {said_w} times W / sqrt(var + eps) "
                            f"and {said_b} times (b - mean) / sqrt(var + eps), of {f.conv} and {f.bn}", (f.weight, f.bias)))
        for param, tensor, short, how, sources in got:
            plan.grads[tensor] = tensor  # its own key: grad_side reads each candidate's gradient there
            shape = tuple(f.w.shape) if param == f.conv else (len(f.inv),)
            extra.append((tensor, replace(first[f.weight], key=tensor, name=tensor, shape=shape)))
            out.append(FoldGrad(f, param, tensor, f"{short}[{param}]", how, sources))
    return out, extra


def _per_channel(b: GraphBuilder, x: str, f: Fold) -> str:
    """The sum of ``x`` (W's shape) over the values of each output channel: [out]. A Conv's or Gemm's is its first
    axis; a ConvTranspose's [in, out/groups, k...] holds channel ``(i // (in/groups)) * (out/groups) + j`` at [i, j]."""
    if f.op != "ConvTranspose":
        return b.reduce_sum(x, list(range(1, f.w.ndim)), keepdims=0)
    cin, per_group = f.w.shape[:2]
    groups = len(f.inv) // per_group
    x = b.reduce_sum(x, list(range(2, f.w.ndim)), keepdims=0) if f.w.ndim > 2 else x  # [in, out/groups]
    x = b.node("Reshape", [x, b.ints([groups, cin // groups, per_group])], "unfold_groups")
    return b.node("Reshape", [b.reduce_sum(x, [1], keepdims=0), b.ints([len(f.inv)])], "unfold_channels")


def name_fold_grads(side, grads: list[FoldGrad]) -> None:
    """The unfolded gradients' observables of ``side`` (named after their tensor) named as reported."""
    by_probe = {g.tensor: g for g in grads}
    obs = side.observation.observables
    obs[:] = [replace(o, key=by_probe[o.probe].name, name=by_probe[o.probe].name) if o.probe in by_probe else o
              for o in obs]


def pair_fold_grads(obs_a: list[Observable], grads: list[FoldGrad], b_obs) -> tuple[list[Pair], list[Unmatched], set[str], set[str]]:
    """The unfolded gradients paired with torch's gradients of their parameters (``b_obs(a, parameter)``: B's
    observable), the folded weights' and biases' own gradients unmatched (compared through them); and the
    observables and the parameters done."""
    by_probe = {g.tensor: g for g in grads}
    of: dict[str, list[FoldGrad]] = {}
    for g in grads:
        for t in g.sources:
            of.setdefault(grad_name(t), []).append(g)
    pairs, un_a, done = [], [], set()
    for o in obs_a:
        if o.probe in by_probe:
            g = by_probe[o.probe]
            pairs.append(Pair(o, b_obs(o, g.param), "torch-param",
                              f"gradient of the parameter {g.param}, which the exporter folded with the BatchNorm "
                              f"{g.fold.bn} into {g.fold.weight}{f' and {g.fold.bias}' if g.fold.bias else ' (its bias of zeros dropped)'}: "
                              f"by the chain rule, {g.how}"))
            done.add(o.name)
        elif o.name in of:
            f = of[o.name][0].fold
            what = "weight" if o.name == grad_name(f.weight) else "bias"
            un_a.append(Unmatched(o, (
                f"the {what} of a {f.op} that the exporter folded a BatchNormalization of the module ({f.bn}) into: another "
                f"function of the data than any parameter's, not compared itself; the gradients of "
                f"{', '.join(g.param for g in of[o.name])} are computed from it by the chain rule and compared"), FOLDED))
            done.add(o.name)
    return pairs, un_a, done, {by_probe[o.probe].param for o in obs_a if o.probe in by_probe}


def fold_note(grads: list[FoldGrad]) -> list[str]:
    if not grads:
        return []
    params = [g.param for g in grads]
    bns = sorted({g.fold.bn for g in grads})
    return [f"BatchNorm folds: the exporter folded {len(bns)} BatchNorm(s) into the layer before each; the gradients of "
            f"{len(params)} parameters ({some(params, 6, str)}) are computed from the "
            "folded weights' and biases' gradients by the chain rule and compared with torch's"]
