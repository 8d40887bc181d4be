"""Saved activations of a quantized model against its float model A (``diff float.onnx --vs-npz q.npz``, where
q.npz is ``layers --save`` of the QDQ model or an int8 runtime's dump): the file holds, beside each float tensor x
under A's name, the value the next layer reads, DequantizeLinear(QuantizeLinear(x)), and its integer codes, under
names of their own. A two-model diff compares A's x with that quantized value, under the criterion of a float
model against a quantized one (``compare.criteria``); against the file, A's x was compared with the raw x before
QuantizeLinear by the float criterion (a false FAIL at 54 dB), and the quantized values were "no counterpart".

The views are found by value, not by name (a dump names them as its runtime does): an array of x's shape whose
values lie on a uniform grid (at most 2^16 levels) and within half a step of x, except where x lies beyond the
grid's ends (the range clips it); of the tensors of A it is the view of, the one it clips least (a quantizer that
folded a Relu into the range holds Relu(x): it views the Relu's output, which it clips nowhere, not x). Codes: an
8- or 16-bit integer array of the view's shape with view = (codes - zero point) * step."""

from __future__ import annotations

import numpy as np

MAX_LEVELS = 1 << 16  # 16-bit quantization at most


def _grid(y: np.ndarray) -> tuple[float, float, float] | None:
    """(step, lowest, highest) of ``y``'s values where they lie on a uniform grid of at most MAX_LEVELS levels."""
    if y.size < 2:
        return None
    if not np.isfinite(y).all():
        return None
    head = np.unique(y.ravel()[:4096])  # a float array of another model's (a dump of other names) fails on its first
    if len(head) >= 2 and _levels(head, float(np.finfo(y.dtype).eps)) is None:  # values, before a sort of them all
        return None
    return _levels(np.unique(y), float(np.finfo(y.dtype).eps))


def _levels(u: np.ndarray, eps: float) -> tuple[float, float, float] | None:
    """(step, lowest, highest) of sorted distinct values ``u`` on a uniform grid: the step is their smallest gap, or
    a fraction of it down to 1/256 where a few values left levels out between them (a [1, 4] logits' four values)."""
    if not 2 <= len(u) <= MAX_LEVELS:
        return None
    u64 = u.astype(np.float64)
    gaps = np.diff(u64)
    least, top = float(gaps.min()), float(np.abs(u64).max())
    if least <= 0:
        return None
    span = float(u64[-1] - u64[0])
    for k in range(1, 257):
        if span / (least / k) >= MAX_LEVELS:
            return None
        step = span / round(span / (least / k))  # the whole span's levels: the gaps' own rounding averages out
        ratio = gaps / step
        # the type rounds each level by up to half its eps of its magnitude (float32: 6e-8, float16: 5e-4): as a
        # share of the step, more on a fine grid
        if np.abs(ratio - np.rint(ratio)).max() <= 1e-3 + eps * top / step:
            return step, float(u64[0]), float(u64[-1])
    return None


def _clipped(x: np.ndarray, y: np.ndarray, grid: tuple[float, float, float]) -> int | None:
    """How many elements of x the grid's ends clip, where ``y`` is x quantized onto ``grid``; else None."""
    step, lo, hi = grid
    eps = max(float(np.finfo(x.dtype).eps), float(np.finfo(y.dtype).eps))
    # another tensor of the shape (most candidates) fails on its first values, before float64 copies of them all
    if _off_grid(x.ravel()[:1024].astype(np.float64), y.ravel()[:1024].astype(np.float64), step, lo, hi, eps) is None:
        return None
    x64, y64 = x.astype(np.float64).ravel(), y.astype(np.float64).ravel()
    if not np.isfinite(x64).all() or np.array_equal(x64, y64):  # a copy of x (a mask on its grid already) is no view
        return None
    return _off_grid(x64, y64, step, lo, hi, eps)


def _off_grid(x64: np.ndarray, y64: np.ndarray, step: float, lo: float, hi: float, eps: float) -> int | None:
    """How many of ``y64`` lie further than half a step from ``x64``, each at an end of the grid that x lies beyond
    (clipped by the range); None where one lies further elsewhere (no quantization of x)."""
    slack = step * (0.5 + 1e-3) + 8 * eps * float(np.abs(x64).max(initial=0.0))
    off = np.abs(y64 - x64) > slack
    if not off.any():
        return 0
    low, high = off & (y64 == lo) & (x64 < lo), off & (y64 == hi) & (x64 > hi)
    return int(off.sum()) if bool((low | high)[off].all()) else None


def quantized_views(arrays: dict[str, np.ndarray], names: set[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(A's tensor -> the saved array that is its quantized value, saved codes -> the view they are the codes of) in
    ``arrays``, for the tensors of ``names`` (model A's float tensors) the file holds under their own names."""
    floats = {n: np.asarray(v) for n, v in arrays.items() if np.asarray(v).dtype.kind == "f" and np.size(v) > 1}
    xs = {n: v for n, v in floats.items() if n in names}
    others = {n: v for n, v in floats.items() if n not in names}
    shapes = {v.shape for v in xs.values()}
    grids = {n: g for n, v in others.items() if v.shape in shapes for g in [_grid(v)] if g is not None}
    best: dict[str, tuple[int, str]] = {}  # view -> (clipped count, A's tensor)
    for y, grid in grids.items():
        for x, v in xs.items():
            if v.shape == others[y].shape:
                c = _clipped(v, others[y], grid)
                if c is not None and c < best.get(y, (v.size + 1, ""))[0]:
                    best[y] = (c, x)
    views: dict[str, str] = {}
    for y, (_, x) in best.items():
        if x not in views:  # one view per tensor: the first found (an Identity's copy views the same values)
            views[x] = y
    codes = {}
    for c, v in arrays.items():
        v = np.asarray(v)
        if v.dtype.kind in "iu" and v.dtype.itemsize <= 2 and c not in names:
            y = next((y for y in views.values() if others[y].shape == v.shape and _codes_of(v, others[y], grids[y][0])), None)
            if y is not None:
                codes[c] = y
    return views, codes


def _codes_of(codes: np.ndarray, y: np.ndarray, step: float) -> bool:
    """Whether ``y`` = (codes - zero point) * step for one zero point."""
    c, y64 = codes.astype(np.float64).ravel(), y.astype(np.float64).ravel()
    zp = float(np.rint(c[0] - y64[0] / step))
    return bool(np.allclose((c - zp) * step, y64, rtol=1e-5, atol=step * 1e-3))
