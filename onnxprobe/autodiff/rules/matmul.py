"""Matrix products and softmax."""

from __future__ import annotations

from onnxprobe.autodiff.registry import rule


def _t(g, x: str, r: int) -> str:
    """Swap the last two axes."""
    return g.Transpose(x, perm=list(range(r - 2)) + [r - 1, r - 2])


def _batch(g, y: str, n: int) -> tuple | None:
    s = g.sshape(y)
    return None if s is None else tuple(s[: len(s) - n])


@rule("MatMul", inputs=(0, 1))
def matmul(g):
    """y = a @ b (numpy semantics, batch axes broadcast)  ->  da = dy @ b^T,  db = a^T @ dy, each summed
    over the batch axes its input was broadcast along. A 1-D a is a row (1, K), a 1-D b a column (K, 1).
    With a 2-D b and a batched a, db is one GEMM over the flattened batch: flat(a)^T @ flat(dy)."""
    a, b = g.x
    ra, rb = g.rank(a), g.rank(b)
    dy = g.dy
    if ra == 1 and rb == 1:
        return [g.Mul(dy, b) if g.wants(0) else None, g.Mul(dy, a) if g.wants(1) else None]
    da = db = None
    if ra == 1:  # y = a[None] @ b, with the row axis dropped: (..., N)
        dy2 = g.unsqueeze(dy, [-2])
        if g.wants(0):
            d = g.MatMul(dy2, _t(g, b, rb))  # (..., 1, K)
            lead = list(range(rb - 2))
            d = g.reduce_sum(d, lead, keepdims=0) if lead else d
            da = g.Reshape(d, g.ints([-1]))
        if g.wants(1):
            bs = _batch(g, g.y[0], 1)
            db = g.MatMul(g.unsqueeze(a, [-1]), dy2)  # (K, 1) @ (..., 1, N) -> (..., K, N)
            db = g.sum_to(db, b, None if bs is None else bs + tuple(g.sshape(b)[-2:]))
        return [da, db]
    if rb == 1:  # y = a @ b[:, None], with the column axis dropped: (..., M)
        dy2 = g.unsqueeze(dy, [-1])  # (..., M, 1)
        if g.wants(0):
            da = g.sum_to(g.Mul(dy2, b), a, _sum_shape(g, g.y[0], a, 1))
        if g.wants(1):
            d = g.MatMul(_t(g, a, ra), dy2)  # (..., K, 1)
            lead = list(range(ra - 2))
            d = g.reduce_sum(d, lead, keepdims=0) if lead else d
            db = g.Reshape(d, g.ints([-1]))
        return [da, db]
    if g.wants(0):
        da = g.MatMul(dy, _t(g, b, rb))
        bs = _batch(g, g.y[0], 2)
        sa = g.sshape(a)
        da = g.sum_to(da, a, None if bs is None else bs + tuple(sa[-2:]))
    if g.wants(1):
        if rb == 2 and ra > 2:
            db = g.Gemm(g.Flatten(a, axis=ra - 1), g.Flatten(dy, axis=ra - 1), transA=1)
        else:
            db = g.MatMul(_t(g, a, ra), dy)
            bs = _batch(g, g.y[0], 2)
            db = g.sum_to(db, b, None if bs is None else bs + tuple(g.sshape(b)[-2:]))
    return [da, db]


def _sum_shape(g, y, a, drop):
    s = g.sshape(y)
    sa = g.sshape(a)
    if s is None or sa is None:
        return None
    return tuple(s) + tuple(sa[-1:])


@rule("Gemm", inputs=(0, 1, 2), broadcast=(2,))
def gemm(g):
    """y = alpha A' B' + beta C, A' = A^T if transA, B' = B^T if transB  ->
    dA' = alpha dy B'^T,  dB' = alpha A'^T dy (each a Gemm with the right transposes),  dC = beta dy"""
    a, b = g.x[0], g.x[1]
    ta, tb = g.attr("transA", 0), g.attr("transB", 0)
    alpha, beta = g.attr("alpha", 1.0), g.attr("beta", 1.0)
    dy = g.dy
    al = None if alpha == 1.0 else alpha
    da = db = dc = None
    if g.wants(0):
        da = g.Gemm(dy, b, transB=1 - tb, alpha=al) if not ta else g.Gemm(b, dy, transA=tb, transB=1, alpha=al)
    if g.wants(1):
        db = g.Gemm(a, dy, transA=1 - ta, alpha=al) if not tb else g.Gemm(dy, a, transA=1, transB=ta, alpha=al)
    if g.wants(2):
        dc = dy if beta == 1.0 else g.Mul(dy, g.scalar(beta))
    return [da, db, dc]


def _softmax_axes(g):
    r = g.rank(g.x[0])
    if g.opset >= 13:
        a = g.attr("axis", -1)
        return [a + r if a < 0 else a]
    a = g.attr("axis", 1)
    a = a + r if a < 0 else a
    return list(range(a, r))  # before opset 13 the input is coerced to 2-D at axis


@rule("Softmax")
def softmax(g):
    """y = softmax(x) along axis  ->  dx = y (dy - sum(dy y, axis))"""
    y = g.y[0]
    s = g.reduce_sum(g.Mul(g.dy, y), _softmax_axes(g), keepdims=1)
    return [g.Mul(y, g.Sub(g.dy, s))]


@rule("LogSoftmax")
def log_softmax(g):
    """y = x - logsumexp(x) along axis  ->  dx = dy - exp(y) sum(dy, axis)"""
    s = g.reduce_sum(g.dy, _softmax_axes(g), keepdims=1)
    return [g.Sub(g.dy, g.Mul(g.Exp(g.y[0]), s))]
