"""Ops that pass values through unchanged (or only change their float precision), and constants."""

from __future__ import annotations

from onnxprobe.graph.builder import FLOAT_TYPES
from onnxprobe.autodiff.registry import rule


@rule("Identity")
def identity(g):
    """y = x  ->  dx = dy"""
    return [g.dy]


@rule("Dropout")
def dropout(g):
    """inference: y = x  ->  dx = dy  (training_mode=True is refused: the mask is random)"""
    if g.has(2):
        v = g.value(g.x[2])
        if v is None or bool(v.reshape(-1)[0]):
            raise g.fail("Dropout in training mode (random mask) has no reproducible gradient")
    return [g.dy]


@rule("Cast", "CastLike")
def cast(g):
    """y = cast(x) between float types  ->  dx = cast(dy) back to x's type (no gradient through
    integer or boolean casts: the engine never sends one there)"""
    src = g.engine.elem(g.x[0])
    if src is not None and src not in FLOAT_TYPES:
        return [None]
    if src is None or src == g.elem:
        return [g.dy]
    return [g.Cast(g.dy, to=src)]


@rule("Constant", inputs=())
def constant(g):
    """y = a constant: a leaf, like an initializer. Its gradient is the sum of what reaches it; nothing
    flows further"""
    return []
