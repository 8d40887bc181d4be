"""Quantization, with the straight-through estimator of quantization-aware training: rounding has a zero
derivative almost everywhere, so a quantized (QDQ) model would pass no gradient at all. As fake
quantization does in QAT, QuantizeLinear passes the gradient through where x lands inside the integer
range and stops it where x saturates; DequantizeLinear is linear in its integer input. The integer tensor
between them carries dL/dq as if q were a real number, so QuantizeLinear -> DequantizeLinear with one
scale gives dx = dy [qmin <= round(x / s) + zp <= qmax]. Scales and zero points get no gradient."""

from __future__ import annotations

from onnx import TensorProto

from onnxprobe.autodiff.registry import rule

RANGES = {
    TensorProto.INT8: (-128, 127), TensorProto.UINT8: (0, 255), TensorProto.INT16: (-32768, 32767),
    TensorProto.UINT16: (0, 65535), TensorProto.INT4: (-8, 7), TensorProto.UINT4: (0, 15),
    TensorProto.INT32: (-(2 ** 31), 2 ** 31 - 1),
}


def _along(g, t: str, axis: int, rank: int) -> str:
    """A scale or zero point as a tensor that broadcasts against the data: a scalar (or one value) as it
    is, a 1-D per-axis tensor reshaped to (1, ..., C, ..., 1) at ``axis``."""
    s = g.sshape(t)
    if s is not None and (len(s) == 0 or (len(s) == 1 and s[0] == 1)):
        return t
    if s is not None and len(s) != 1:
        raise g.fail(f"blocked quantization ({t!r} has shape {list(s)}) is not supported")
    a = axis + rank if axis < 0 else axis
    return g.Reshape(t, g.ints([1] * a + [-1] + [1] * (rank - a - 1)))


def _as_grad_type(g, t: str) -> str:
    return t if g.engine.elem(t) == g.elem else g.Cast(t, to=g.elem)


def _check(g):
    if g.attr("block_size", 0):
        raise g.fail("blocked quantization (block_size) is not supported")


@rule("DequantizeLinear")
def dequantize_linear(g):
    """y = (q - zp) s  ->  dq = dy s (per axis when s is 1-D): the gradient q carries back to the
    QuantizeLinear that made it (straight-through)"""
    _check(g)
    r = g.rank(g.y[0])
    s = _as_grad_type(g, _along(g, g.x[1], g.attr("axis", 1), r))
    return [g.Mul(g.dy, s)]


@rule("QuantizeLinear", straight_through=True)
def quantize_linear(g):
    """q = saturate(round(x / s) + zp)  ->  dx = dq / s where qmin <= round(x / s) + zp <= qmax, else 0
    (the straight-through estimator: rounding passes the gradient, saturation stops it)"""
    _check(g)
    x = g.x[0]
    q_elem = g.engine.elem(g.y[0])
    if q_elem not in RANGES:
        raise g.fail(f"quantization to {TensorProto.DataType.Name(q_elem) if q_elem else 'an unknown type'} is not supported")
    lo, hi = RANGES[q_elem]
    r = g.rank(x)
    axis = g.attr("axis", 1)
    s = _as_grad_type(g, _along(g, g.x[1], axis, r))
    v = g.Round(g.Div(x, s))
    if g.has(2):
        v = g.Add(v, g.Cast(_along(g, g.x[2], axis, r), to=g.elem))
    inside = g.And(g.GreaterOrEqual(v, g.scalar(float(lo))), g.LessOrEqual(v, g.scalar(float(hi)))) if g.opset >= 12 \
        else g.Not(g.Or(g.Less(v, g.scalar(float(lo))), g.Greater(v, g.scalar(float(hi)))))
    return [g.Mul(g.Div(g.dy, s), g.mask(inside))]


# com.microsoft's QuantizeLinear / DequantizeLinear (int16 / uint16 / 4-bit QDQ models of onnxruntime's
# quantization tool): the same maths as the standard ops
rule("DequantizeLinear", domain="com.microsoft")(dequantize_linear)
rule("QuantizeLinear", straight_through=True, domain="com.microsoft")(quantize_linear)
