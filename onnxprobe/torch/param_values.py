"""How an initializer's values relate to a torch parameter's (``torch.params.map_parameters`` asks): equal by
digest, a BatchNorm folded in, broadcast, a copy changed in a few values, a computed weight up to rounding
(``computed_of``); and the initializers' values read from the model, and whether equal ones are copies of one tied parameter.
Each answer is read from the values alone; which parameter an initializer stands for is decided in
``torch.params``."""

from __future__ import annotations

import numpy as np
import onnx

from onnxprobe.graph.tensor_data import array_digest as digest
from onnxprobe.graph.tensor_data import to_array


def batchnorm_fold(v: np.ndarray, p: np.ndarray, folds: list[tuple[np.ndarray, np.ndarray]]) -> bool:
    """Whether initializer ``v`` is parameter ``p`` with one of the BatchNorms ``folds`` (each its per-channel
    scale and shift: ``y = x * scale + shift``) folded in: a weight scaled along its output channels, or a
    bias scaled and shifted. A float32 fold is off by ~1e-7 of the values (measured, dynamo)."""
    return fold_misses(v, p, folds) == 0


def fold_misses(v: np.ndarray, p: np.ndarray, folds: list[tuple[np.ndarray, np.ndarray]]) -> int | None:
    """How few values of initializer ``v`` miss parameter ``p`` with one of the BatchNorms ``folds`` folded in
    (each value within 1e-4 of it, relative and of the largest: 1e-2 for a 16-bit fold, which rounds at ~1e-3),
    over every fold and layout that fits (0 as soon as one holds); None where none fits."""
    if v.shape != p.shape or not v.ndim:
        return None
    v64, p64 = v.astype(np.float64), p.astype(np.float64)
    rtol = 1e-2 if min(v.dtype.itemsize, p.dtype.itemsize) <= 2 else 1e-4
    best = None
    for scale, shift in folds:
        for per in channel_scales(v.shape, scale):
            want = p64 * per + (shift if v.ndim == 1 else 0)
            k = int((~np.isclose(v64, want, rtol=rtol, atol=rtol * float(np.abs(want).max(initial=0.0)))).sum())
            if k == 0:
                return 0
            best = k if best is None else min(best, k)
    return best


def channel_scales(shape: tuple, scale: np.ndarray, transposed: bool | None = None) -> list[np.ndarray]:
    """``scale`` (one per output channel) laid out to multiply a weight of ``shape`` along its output channels:
    its first axis (a Conv's [out, in/groups, k...], a Gemm's [out, in] with transB, a bias) and, for
    ``transposed`` None or True, a ConvTranspose's [in, out/groups, k...], whose output channel of row i and
    column j is ``(i // (in/groups)) * (out/groups) + j``; the groups are ``len(scale) / shape[1]``. None: both
    layouts that fit (the values decide); False / True: that one only."""
    shape, n, out = tuple(shape), len(scale), []
    if transposed is not True and shape and shape[0] == n:
        out.append(scale.reshape((-1,) + (1,) * (len(shape) - 1)))
    if transposed is not False and len(shape) >= 3 and shape[1] and n % shape[1] == 0:
        groups = n // shape[1]
        if shape[0] % groups == 0:
            rows = np.repeat(scale.reshape(groups, shape[1]), shape[0] // groups, axis=0)  # [in, out/groups]
            out.append(rows.reshape(shape[:2] + (1,) * (len(shape) - 2)))
    return out


def broadcast_axes(p_shape: tuple, v_shape: tuple) -> tuple[int, ...]:
    """The axes of ``v_shape`` that ``np.broadcast_to`` of a ``p_shape`` array adds or expands."""
    lead = len(v_shape) - len(p_shape)
    return tuple(range(lead)) + tuple(lead + k for k, n in enumerate(p_shape) if n == 1 and v_shape[lead + k] != 1)


def broadcast_of(v: np.ndarray, params: dict[str, np.ndarray]) -> list[str]:
    """The parameters whose ``np.broadcast_to`` to ``v``'s shape is ``v`` exactly, more values than they hold;
    a parameter of all-equal values (zeros, ones) is left out: any constant of those values would be its copy."""
    out = []
    for name, p in params.items():
        if p.size >= v.size or p.ndim > v.ndim or p.dtype != v.dtype or p.size < 2:
            continue
        lead = v.ndim - p.ndim
        if any(n not in (1, m) for n, m in zip(p.shape, v.shape[lead:])) or np.all(p == p.flat[0]):
            continue
        if np.array_equal(np.broadcast_to(p, v.shape), v):
            out.append(name)
    return out


def _masked_or_clamped(c: np.ndarray, p: np.ndarray) -> bool:
    """Whether ``c`` (in ``p``'s layout) is what a module computes from ``p`` itself and an exporter folds into a
    constant, not an edit: the values that differ are all zeros (a mask, w * (1 - eye)) or all at c's own bound
    where p is past it (w.clamp(lo, hi))."""
    off = c != p
    new, old = c[off], p[off]
    if not new.size:
        return False
    lo, hi = c.min(), c.max()
    return bool((new == 0).all() or (((new == lo) & (old < lo)) | ((new == hi) & (old > hi))).all())


def changed_copies(v: np.ndarray, params: dict[str, np.ndarray]) -> list[tuple[str, str, int]]:
    """The parameters ``v`` holds, in some layout (as it is, transposed, with unit axes, broadcast), in all but a
    few of their values (at least one, at most a tenth): (parameter, the layout said, how many values differ).
    The values they agree on must not be all one value (zeros, ones): any constant would agree with a bias then.
    A weight the exporter computes from a parameter (scaled, folded, reordered gates) differs in most values."""
    out = []
    for name, p in params.items():
        if p.dtype != v.dtype or p.size < 2 or v.size < p.size:
            continue
        masks = []
        if v.shape == p.shape:
            masks.append(("", v != p))
            if _masked_or_clamped(v, p):
                continue
        if p.ndim == 2 and v.shape == p.T.shape:  # a square one both ways: the fewer values changed tell
            masks.append(("transposed", v.T != p))
            if _masked_or_clamped(v.T, p):
                continue
        if v.shape != p.shape and v.size == p.size and np.squeeze(v).shape == np.squeeze(p).shape:
            masks.append((f"with unit axes added ({'x'.join(map(str, v.shape))})", v.reshape(p.shape) != p))
            if _masked_or_clamped(v.reshape(p.shape), p):
                continue
        lead = v.ndim - p.ndim
        if v.size > p.size and lead >= 0 and all(n in (1, m) for n, m in zip(p.shape, v.shape[lead:])):
            axes = broadcast_axes(p.shape, v.shape)
            off = (v != np.broadcast_to(p, v.shape)).any(axis=axes, keepdims=True).reshape(p.shape)
            masks.append((f"broadcast to {'x'.join(map(str, v.shape))}", off))
        best = None
        for how, off in masks:
            k = int(off.sum())
            kept = p[~off]
            if 1 <= k <= max(1, p.size // 10) and kept.size and kept.min() != kept.max() and (best is None or k < best[2]):
                best = (name, how, k)
        if best is not None:
            out.append(best)
    return out


def rounded(v: np.ndarray, c: np.ndarray) -> bool:
    """``v`` is ``c`` up to float rounding (a few units in the last place of ``v``'s dtype)."""
    if v.shape != c.shape or not v.size or v.dtype.kind != "f":
        return False
    tol = 8 * float(np.finfo(v.dtype).eps)
    return bool(np.allclose(v.astype(np.float64), c.astype(np.float64), rtol=tol, atol=tol * float(np.abs(c).max())))


def computed_of(v: np.ndarray, computed: dict[str, tuple[np.ndarray, list[str]]] | None,
                sources: list[str] | None = None) -> str | None:
    """The first of the ``computed`` weights (name -> (value, the parameters torch computes it from)) that ``v``
    holds up to float rounding, as it is or transposed (a 2-D one a MatMul reads); of those computed from one
    of ``sources`` where given."""
    for c, (cv, srcs) in (computed or {}).items():
        if sources is not None and not set(srcs) & set(sources):
            continue
        if rounded(v, cv) or (cv.ndim == 2 and rounded(v, cv.T)):
            return c
    return None


def copies_of_one(equal: list[str], alike: list[str], owners: dict[str, set[str]] | None, d: tuple,
                   buffers: dict[str, np.ndarray] | None) -> bool:
    """Whether initializers of equal values are copies of one tied parameter (``equal``: the parameters they
    may hold; ``alike``: every parameter of those values): it alone has them, several modules hold it
    (``owners``), and no buffer has them (a fresh BatchNorm's running variance is its weight's ones)."""
    return (len(equal) == 1 and alike == equal and len((owners or {}).get(equal[0]) or ()) > 1
            and not any(digest(b) == d for b in (buffers or {}).values()))


def initializer_values(model: onnx.ModelProto, wanted: set[str]) -> dict[str, np.ndarray]:
    """The values of the ``wanted`` initializers of the main graph, and of its Constant nodes' outputs of those
    names (weights held by Constant nodes)."""
    values = {t.name: to_array(t) for t in model.graph.initializer if t.name in wanted}
    for n in model.graph.node:
        if n.op_type == "Constant" and n.output and n.output[0] in wanted:
            a = next((x for x in n.attribute if x.name == "value"), None)
            if a is not None:
                values[n.output[0]] = to_array(a.t)
    return values


NOT_AN_EXPORT = "the model is not an export of the module as it is now (compare the weights, or re-export)"


def other_values(i: str, v: np.ndarray, p: np.ndarray, folds: list) -> tuple[str, bool]:
    """Why initializer ``i``, named as a torch parameter ``p``, holds other values; and whether that means
    the model contradicts the module (nothing the exporter does explains the values)."""
    head = f"holds other values than the torch parameter {i!r} of the same name "
    k = fold_misses(v, p, folds)
    if k == 0:
        return head + "(the exporter folded a BatchNormalization of the module into it: the fused layer's gradient, not comparable)", False
    if v.dtype != p.dtype and v.shape == p.shape and np.array_equal(v, p.astype(v.dtype)):
        return (f"holds the torch parameter {i!r} rounded to {v.dtype} (the module's is {p.dtype}): the gradients of "
                "another precision are not compared"), False
    if k is not None and k <= v.size // 10:  # a dynamo export's fold under the parameter's name, changed in a few values
        return f"holds the torch parameter {i!r} with a BatchNorm of the module folded in but for {k} of its {v.size} " \
               f"values: the exporter's fold of it, changed; {NOT_AN_EXPORT}", True
    return head + "and no BatchNorm of the module folds into it: " + NOT_AN_EXPORT, True
