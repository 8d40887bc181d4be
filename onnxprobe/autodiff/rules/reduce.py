"""Reductions. ``dy`` (and ``y``) are first given back the reduced axes (keepdims), then broadcast.

Empty axes with noop_with_empty_axes=1 reduce over no axis at all: onnxruntime still applies each op's
element function (ReduceL1 gives |x|, ReduceSumSquare x^2, ReduceLogSum log x), so the rules run with
``axes == []`` (nothing to give back or to count over), not as an identity. A runtime axes input that
comes out empty follows the node's own noop_with_empty_axes (``_noop``)."""

from __future__ import annotations

from onnxprobe.autodiff.registry import rule


def _axes(g):
    """Static axes (normalised), a runtime axes tensor name, or None for 'all axes'."""
    as_input = g.opset >= (13 if g.node.op_type == "ReduceSum" else 18)
    if as_input:
        if not g.has(1):
            return None
        v = g.ints_input(1)
        if v is None:
            return g.x[1]
    else:
        v = g.attr("axes")
        if not v:
            return None
    if not v:
        return None
    return g.norm_axes(v, g.rank(g.x[0]))


def _noop(g) -> int:
    return int(g.attr("noop_with_empty_axes", 0))


def _keep(g, t: str):
    """Give ``t`` (dy or y) back the reduced axes (keepdims)."""
    axes = _axes(g)
    if axes is None and _noop(g):
        return t  # no axis reduced
    if g.attr("keepdims", 1) or axes is None:
        return t  # keepdims, or a scalar when every axis is reduced: both broadcast as they are
    return g.unsqueeze(t, axes)


def _runtime_or(g, fn):
    """``fn(axes)``: static axes, a runtime axes tensor, None for every axis, or [] for none (empty axes
    with noop_with_empty_axes=1)."""
    axes = _axes(g)
    if axes is None and _noop(g):
        return fn([])
    return fn(axes)


def _sum_keep(g, t: str, axes) -> str:
    """sum(t, axes) with keepdims, for the axes of ``_runtime_or``."""
    if isinstance(axes, str):
        return g.reduce_sum_runtime(t, axes, noop=_noop(g))
    return t if axes == [] else g.reduce_sum(t, axes, keepdims=1)


def _as_x(g, t: str) -> str:
    """``t`` (the reduced axes kept, of size 1) broadcast to x's shape. Where x is empty (an empty set reduced,
    [2, 0, 4] over axis 1), by adding x's shape of zeros: onnxruntime's shape inference takes an Expand of a
    constant [2, 1, 4] to [2, 0, 4] for a no-op, declares the empty gradient [2, 1, 4], and refuses the graph
    that reads it (a Where of the statistics: "Incompatible dimensions")."""
    dims = g.static_dims(g.x[0])
    if dims is not None and 0 in dims:
        return g.Add(t, g.zeros_like(g.x[0]))
    return g.Expand(t, g.Shape(g.x[0]))


@rule("ReduceSum")
def reduce_sum(g):
    """y = sum(x, axes)  ->  dx = dy broadcast over the reduced axes"""
    return _runtime_or(g, lambda axes: [_as_x(g, _keep(g, g.dy))])


@rule("ReduceMean")
def reduce_mean(g):
    """y = mean(x, axes)  ->  dx = dy / n broadcast over the reduced axes (n = size(x) / size(y))"""
    x, y = g.x[0], g.y[0]

    def f(axes):
        xs, ys = g.static_dims(x), g.static_dims(y)
        if xs is not None and ys is not None:
            import numpy as np

            n = g.scalar(float(np.prod(ys)) / float(np.prod(xs)) if np.prod(xs) else 0.0)
        else:
            n = g.Div(g.Cast(g.Size(y), to=g.elem), g.Cast(g.Size(x), to=g.elem))
        return [_as_x(g, g.Mul(_keep(g, g.dy), n))]

    return _runtime_or(g, f)


def _argext(g, axes):
    """dx = dy where x == y, split evenly between ties (as torch.amax / amin)"""
    x = g.x[0]
    yk = _keep(g, g.y[0])
    mask = g.Equal(x, yk)
    ties = _sum_keep(g, g.Cast(mask, to=g.elem), axes)
    return [g.Mul(g.Div(_keep(g, g.dy), ties), g.mask(mask))]


@rule("ReduceMax")
def reduce_max(g):
    """y = max(x, axes)  ->  dx = dy where x == y, split evenly between ties"""
    return _runtime_or(g, lambda axes: _argext(g, axes))


@rule("ReduceMin")
def reduce_min(g):
    """y = min(x, axes)  ->  dx = dy where x == y, split evenly between ties"""
    return _runtime_or(g, lambda axes: _argext(g, axes))


@rule("ReduceL2")
def reduce_l2(g):
    """y = sqrt(sum(x^2, axes))  ->  dx = x dy / y  (0 where y == 0)"""
    def f(axes):
        yk = _keep(g, g.y[0])
        q = g.Where(g.Equal(yk, g.scalar(0.0)), g.scalar(0.0), g.Div(_keep(g, g.dy), yk))
        return [g.Mul(g.x[0], q)]

    return _runtime_or(g, f)


@rule("ReduceSumSquare")
def reduce_sum_square(g):
    """y = sum(x^2, axes)  ->  dx = 2 x dy"""
    return _runtime_or(g, lambda axes: [g.Mul(g.x[0], g.Mul(_keep(g, g.dy), g.scalar(2.0)))])


@rule("ReduceL1")
def reduce_l1(g):
    """y = sum(|x|, axes)  ->  dx = dy sign(x)  (0 at x = 0)"""
    return _runtime_or(g, lambda axes: [g.Mul(g.Sign(g.x[0]), _keep(g, g.dy))])


@rule("ReduceLogSumExp")
def reduce_log_sum_exp(g):
    """y = log(sum(exp(x), axes))  ->  dx = dy exp(x - y)  (a softmax over the reduced axes)"""
    return _runtime_or(g, lambda axes: [g.Mul(_keep(g, g.dy), g.Exp(g.Sub(g.x[0], _keep(g, g.y[0]))))])


@rule("ReduceLogSum")
def reduce_log_sum(g):
    """y = log(sum(x, axes))  ->  dx = dy / sum(x) = dy exp(-y)"""
    return _runtime_or(g, lambda axes: [_as_x(g, g.Mul(_keep(g, g.dy), g.Exp(g.Neg(_keep(g, g.y[0])))))])


@rule("ReduceProd")
def reduce_prod(g):
    """y = prod(x, axes)  ->  dx_i = dy prod_{j != i} x_j: y / x_i where the group has no zero; where it has
    one, the product of the others at the zero and 0 elsewhere; 0 where it has two or more"""
    x = g.x[0]

    def f(axes):
        zero = g.Equal(x, g.scalar(0.0))
        nz = g.Where(zero, g.scalar(1.0), x)
        if axes == []:
            p_nz = nz
        elif isinstance(axes, str):
            p_nz = g.ReduceProd(nz, axes, keepdims=1, noop_with_empty_axes=_noop(g))
        else:
            p_nz = g.reduce("ReduceProd", nz, axes, keepdims=1)
        n0 = _sum_keep(g, g.mask(zero), axes)
        no_zero = g.mask(g.Equal(n0, g.scalar(0.0)))
        one_zero = g.Mul(g.mask(g.Equal(n0, g.scalar(1.0))), g.mask(zero))
        others = g.Add(g.Mul(no_zero, g.Div(p_nz, nz)), g.Mul(one_zero, p_nz))
        return [g.Mul(_keep(g, g.dy), others)]

    return _runtime_or(g, f)
