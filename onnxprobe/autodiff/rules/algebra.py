"""Tensor algebra and scans: Einsum (any equation), CumSum, CumProd, Trilu, Det, and the block rearrangements
DepthToSpace / SpaceToDepth; DFT."""

from __future__ import annotations

import string

import numpy as np

from onnxprobe.autodiff.registry import rule


def _parse_einsum(eq: str, ranks: list[int]) -> tuple[list[str], str]:
    """The operands' and the output's subscripts with ``...`` spelled out as letters of their own
    (right-aligned, as the broadcast dims they stand for), and the implicit output made explicit."""
    eq = eq.replace(" ", "")
    lhs, rhs = eq.split("->") if "->" in eq else (eq, None)
    ins = lhs.split(",")
    used = set(eq)
    spare = [c for c in string.ascii_uppercase + string.ascii_lowercase if c not in used]
    n_ell = max((r - (len(s) - 3) for s, r in zip(ins, ranks) if "..." in s), default=0)
    ell = "".join(spare[:n_ell])
    out_ins = []
    for s, r in zip(ins, ranks):
        if "..." in s:
            k = r - (len(s) - 3)
            s = s.replace("...", ell[n_ell - k:])
        out_ins.append(s)
    if rhs is None:
        counts = {c: sum(s.count(c) for s in out_ins) for c in set("".join(out_ins)) - set(ell)}
        rhs = ell + "".join(sorted(c for c, n in counts.items() if n == 1))
    else:
        rhs = rhs.replace("...", ell)
    return out_ins, rhs


def _broadcast(g, x: str, sub: str, sizes: dict[str, int]) -> str:
    """``x`` expanded along the labels it has as size 1 against a larger size in another operand: the
    gradient's Einsum then sees one size per label (onnxruntime's took the 1: b's gradient of bij,bjk->bik
    with a [1, 3, 4] came out [1, 4, 2] for b [2, 4, 2])."""
    dims = g.static_dims(x)
    if dims is None or not any(d == 1 and sizes.get(c, 1) > 1 for c, d in zip(sub, dims)):
        return x
    return g.Expand(x, g.ints([sizes.get(c, d) if d == 1 else d for c, d in zip(sub, dims)]))


@rule("Einsum", inputs=None)
def einsum(g):
    """y = einsum(eq, x_1, ..., x_n)  ->  dx_k = einsum(out, x_j (j != k) -> subscripts of x_k)(dy, x_j):
    every index of x_k either appears in the output or in another operand, and is summed over the rest;
    an index that only x_k has (summed away by the forward) comes back by broadcasting (Expand), and an
    axis x_k had as size 1 against a larger one (an ellipsis's or a label's) is summed back to 1; the other
    operands are expanded along such axes first, so that each label has one size."""
    ranks = [g.rank(x) for x in g.x]
    ins, out = _parse_einsum(g.attr("equation").decode() if isinstance(g.attr("equation"), bytes) else g.attr("equation"),
                             ranks)
    sizes: dict[str, int] = {}
    for s, x in zip(ins, g.x):
        dims = g.sshape(x) or ()
        for c, d in zip(s, dims):
            if isinstance(d, int):
                sizes[c] = max(sizes.get(c, 1), d)
    grads = []
    for k, (sk, xk) in enumerate(zip(ins, g.x)):
        if not g.wants(k):
            grads.append(None)
            continue
        if len(set(sk)) != len(sk):
            raise g.fail(f"operand {k} repeats an index ({sk!r}, a diagonal): not supported")
        others = [(s, _broadcast(g, x, s, sizes)) for j, (s, x) in enumerate(zip(ins, g.x)) if j != k]
        avail = set(out).union(*[set(s) for s, _ in others])
        present = "".join(c for c in sk if c in avail)
        eq_k = ",".join([out] + [s for s, _ in others]) + "->" + present
        d = g.Einsum(g.dy, *[x for _, x in others], equation=eq_k)
        missing = [i for i, c in enumerate(sk) if c not in avail]
        if missing:
            d = g.Expand(g.unsqueeze(d, missing), g.Shape(xk))
        xs = g.sshape(xk) or ()
        ones = [i for i, (c, dim) in enumerate(zip(sk, xs)) if dim == 1 and sizes.get(c, 1) > 1 and c in avail]
        if ones:
            d = g.reduce_sum(d, ones, keepdims=1)
        grads.append(d)
    return grads


@rule("CumSum")
def cumsum(g):
    """y_j = sum of x_i for i <= j along axis (exclusive: i < j; reverse: i >= j, i > j)  ->
    dx = the same cumulative sum of dy in the other direction (exclusive stays exclusive)"""
    return [g.CumSum(g.dy, g.x[1], exclusive=g.attr("exclusive", 0), reverse=1 - g.attr("reverse", 0))]


@rule("CumProd")
def cumprod(g):
    """y_j = product of x_i for i <= j along axis (exclusive: i < j; reverse: i >= j, i > j)  ->
    dx_i = sum over the j whose product holds x_i of dy_j y_j / x_i: S / x, S the cumulative sum of dy y in
    the other direction (as CumSum's rule). Exact with zeros, as y / x is not: before the first zero (in
    the product's direction) S / x; at the first zero z, S' = the same sum of dy y', y' the products with
    x_z read as 1; after it 0 (every product there holds x_z = 0)."""
    x, axis = g.x[0], g.x[1]
    ex, rev = g.attr("exclusive", 0), g.attr("reverse", 0)
    y = g.y[0]
    zero = g.Equal(x, g.scalar(0.0))
    clear = g.Equal(g.CumSum(g.mask(zero), axis, exclusive=1, reverse=rev), g.scalar(0.0))  # no zero before i
    first = g.And(zero, clear)

    def back(prod):
        return g.CumSum(g.Mul(g.dy, prod), axis, exclusive=ex, reverse=1 - rev)

    y1 = g.CumProd(g.Where(first, g.scalar(1.0), x), axis, exclusive=ex, reverse=rev)
    safe = g.Where(zero, g.scalar(1.0), x)
    before = g.Where(g.And(clear, g.Not(zero)), g.Div(back(y), safe), g.scalar(0.0))
    return [g.Where(first, back(y1), before)]


@rule("Trilu")
def trilu(g):
    """y = x with the elements off the (upper or lower) triangle k set to 0  ->  dx = Trilu(dy), same k"""
    return [g.Trilu(g.dy, g.x[1] if g.has(1) else None, upper=g.attr("upper", 1))]


def _block_shapes(g, x: str, b: int, to_space: bool, mode: str):
    """(the 6-D shape of the intermediate, its permutation) of DepthToSpace (``to_space``) or
    SpaceToDepth on a [N, C, H, W] tensor: reshape x to the first, permute."""
    n, c, h, w = (g.shape(x, i, i + 1) for i in range(4))
    bb = g.ints([b])
    if to_space:
        cb = g.Div(c, g.ints([b * b]))
        if mode == "CRD":
            return g.Concat(n, cb, bb, bb, h, w, axis=0), [0, 1, 4, 2, 5, 3]
        return g.Concat(n, bb, bb, cb, h, w, axis=0), [0, 3, 4, 1, 5, 2]
    return g.Concat(n, c, g.Div(h, bb), bb, g.Div(w, bb), bb, axis=0), [0, 3, 5, 1, 2, 4]


def _unblock(g, to_space: bool):
    """dx for y = reshape(transpose(reshape(x, S), P)): reshape dy to transpose(S, P), permute back,
    reshape to x's shape."""
    x = g.x[0]
    b = int(g.attr("blocksize"))
    mode = g.attr("mode", "DCR")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    s6, perm = _block_shapes(g, x, b, to_space, mode)
    permuted = g.Gather(s6, g.ints(perm), axis=0)
    d = g.Transpose(g.Reshape(g.dy, permuted), perm=[int(i) for i in np.argsort(perm)])
    return [g.Reshape(d, g.Shape(x))]


@rule("DepthToSpace")
def depth_to_space(g):
    """y = DepthToSpace(x): x reshaped to 6-D, permuted, reshaped (DCR: [N, b, b, C/b^2, H, W] by (0, 3, 4, 1,
    5, 2); CRD: [N, C/b^2, b, b, H, W] by (0, 1, 4, 2, 5, 3))  ->  dx: dy through the same steps backwards"""
    return _unblock(g, True)


@rule("SpaceToDepth")
def space_to_depth(g):
    """y = SpaceToDepth(x): x reshaped to [N, C, H/b, b, W/b, b], permuted by (0, 3, 5, 1, 2, 4), reshaped
    ->  dx: dy through the same steps backwards (DepthToSpace, DCR)"""
    return _unblock(g, False)


DET_MAX = 64  # the cofactors of an M x M matrix take M^2 (M - 1)^2 values: 16 M at M = 64


@rule("Det")
def det(g):
    """y = det(X), X (..., M, M)  ->  dX = dy cof(X), cof[i, j] = (-1)^(i + j) det(X without row i and
    column j): the cofactors (y X^-T where X is invertible, and still exact where it is singular), as the
    Det of the M^2 minors gathered at once. M = 1: dX = dy."""
    x = g.x[0]
    s = g.sshape(x)
    if s is None or not isinstance(s[-1], int):
        raise g.unknown_size("the matrix size is unknown")
    r, m = len(s), s[-1]
    if m == 0:  # det of a 0x0 matrix is 1, a constant: dX is as empty as X
        return [g.Mul(x, g.scalar(0.0))]
    dyk = g.unsqueeze(g.dy, [r - 2, r - 1])
    if m == 1:
        return [dyk]
    if m > DET_MAX:
        raise g.fail(f"{m}x{m} matrices: the gradient by cofactors would take {m * m * (m - 1) ** 2:,} values a "
                     f"matrix (at most {DET_MAX}x{DET_MAX} is supported)")
    keep = g.const(np.array([[j for j in range(m) if j != i] for i in range(m)], np.int64))  # (M, M - 1)
    rows = g.Gather(x, keep, axis=r - 2)  # (..., i, M - 1 rows, M columns)
    minors = g.Gather(rows, keep, axis=r)  # (..., i, rows, j, M - 1 columns)
    minors = g.Transpose(minors, perm=list(range(r - 2)) + [r - 2, r, r - 1, r + 1])
    sign = (-1.0) ** np.add.outer(np.arange(m), np.arange(m))
    return [g.Mul(g.Mul(g.Det(minors), g.const(sign.astype(g.dtype))), dyk)]


@rule("DFT")
def dft(g):
    """y = F x along ``axis``, F[k, j] = exp(-2 pi i j k / n) (inverse: exp(+2 pi i j k / n) / n), x zero-padded
    or cut to n = dft_length, y cut to its first n / 2 + 1 bins when onesided  ->  dx = F^H dy: dy zero-padded
    back to n bins (onesided), n IDFT(dy) (inverse: DFT(dy) / n), cut or padded back to x's length, its real
    part for a real x (last axis 1). The inverse one-sided DFT is refused."""
    x = g.x[0]
    r = g.rank(x)
    inverse = int(g.attr("inverse", 0))
    if inverse and g.attr("onesided", 0):
        raise g.fail("the inverse one-sided DFT is not supported")
    if g.opset >= 20:
        ax = g.ints_input(2)
        if g.has(2) and ax is None:
            raise g.fail("a computed axis is not supported")
        ax = ax[0] if ax else -2
    else:
        ax = int(g.attr("axis", 1))
    a = ax + r if ax < 0 else ax
    xd = g.static_dims(x)
    if xd is None:
        raise g.unknown_size("needs the input's size")
    length = xd[a]
    n = g.ints_input(1)[0] if g.has(1) and g.ints_input(1) else length
    if g.has(1) and g.ints_input(1) is None:
        raise g.fail("a computed dft_length is not supported")
    dy = g.dy
    if g.attr("onesided", 0):
        pads = [0] * (2 * r)
        pads[r + a] = n - (n // 2 + 1)
        dy = g.pad(dy, pads)
    if g.opset >= 20:
        back = g.DFT(dy, "", g.const(np.array(a, np.int64)), inverse=1 - inverse)
    else:
        back = g.DFT(dy, axis=a, inverse=1 - inverse)
    dx = g.Mul(back, g.scalar(float(n) if not inverse else 1.0 / n))
    if n > length:
        dx = g.slice(dx, [0], [length], [a])
    elif n < length:
        pads = [0] * (2 * r)
        pads[r + a] = length - n
        dx = g.pad(dx, pads)
    if xd[-1] == 1:
        dx = g.slice(dx, [0], [1], [r - 1])
    return [dx]
