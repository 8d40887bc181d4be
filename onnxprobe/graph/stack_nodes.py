"""In-graph metrics of many small pairs at once: ``stack_row`` concatenates K pairs of one static shape (float32,
at most 32 KiB a tensor) into a [K, n] stack per side and computes every pair's row of ``graph.pair_nodes`` along
the stack's second axis, so that a deep model's thousands of small pairs leave the run as a few [K, 4] outputs,
not as their values (a chain of 2,000 MatMul, Add and Tanh of [16, 96]: 16,000 tensors of 6 KiB, 98 MB held on
the host at the run's end, and an output each in onnxruntime's session).

The same quantities as a pair's row (``PAIR_ROW``), with the same care: d = a - b in float32; max |d| read at the
first flat argmax of |d| (GatherElements); max |b|; the allclose excess max(|d| - rtol |b|); max |d| / max(|b|,
REL_TINY); the sums Σd², Σb², Σa² (and Σ|d| with extras) as float32 partial sums over rows of m elements (the
largest divisor of n within [BLOCK_MIN, ABS_ROW_MAX], or n itself when n is at most ABS_ROW_MAX: no float32 sum
runs over more than 1,024 elements, Σ|d| included), added in float64. An introduced error's stack (``light``: A's
tensors against B's nodes recomputed on A's inputs) holds max |d|, its argmax, Σd², Σc² and Σ|d|.

The reader (``compare.fused``) turns each stack row into the pair's sums through the checks a pair's row goes
through (a non-finite or underflowing sum, a cosine that cancels, a maximum near its threshold: that pair is left
to the host).
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np
from onnx import TensorProto

from onnxprobe.graph.stats_nodes import ABS_ROW_MAX, BLOCK_MIN
from onnxprobe.types import element_count

# a shape and criterion shared by fewer pairs than this: they leave the run raw (a stack costs ~30 nodes, each
# raw pair two or three outputs and their values); a stack holds at most STACK_MAX pairs and STACK_BYTES per side
# (its members are held from the first one's making till the last one's: a bound on what the run holds for it)
STACK_MIN = 16
STACK_MAX = 64
STACK_BYTES = 1 << 20
STACK_OPSET = 11  # GatherElements
STACK_LAYOUT = (STACK_MIN, STACK_MAX, STACK_BYTES)  # what a cached merged graph was stacked by (compare.fused_cache's key)


class StackRow(NamedTuple):
    """A stack's outputs: maxima float32 [K, 4] (max |d|, max |b|, excess, max rel; [K, 3] without extras; [K, 1]
    in a light stack: max |d|), argmax int64 [K, 1] (None without extras), sums float64 [K, T] in ``stack_terms``'
    order."""

    maxima: str
    argmax: str | None
    sums: str


@lru_cache(maxsize=1024)  # a model's pairs have few sizes, asked for once per pair
def partial_length(n: int) -> int | None:
    """The length of a stack's float32 partial sums for pairs of ``n`` elements: the largest divisor of n within
    [BLOCK_MIN, ABS_ROW_MAX], n itself when n is at most ABS_ROW_MAX, else None (no stack: such pairs stay raw)."""
    if n <= ABS_ROW_MAX:
        return n
    return next((m for m in range(ABS_ROW_MAX, BLOCK_MIN - 1, -1) if n % m == 0), None)


def stackable(shape, opset: int) -> bool:
    """Whether pairs of ``shape`` (a static shape) can be stacked at this opset."""
    return (opset >= STACK_OPSET and isinstance(shape, (tuple, list)) and len(shape) >= 1
            and all(isinstance(d, (int, np.integer)) and d > 0 for d in shape) and partial_length(element_count(shape)) is not None)


def stack_size(n: int) -> int:
    """At most how many pairs of ``n`` float32 elements one stack holds."""
    return max(1, min(STACK_MAX, STACK_BYTES // (4 * n)))


def stack_terms(light: bool, extras: bool) -> list[str]:
    """The order of a stack's sums: Σd², Σb² (Σc² in a light stack), Σa² (not in a light one: the pair's), Σ|d|
    with extras."""
    return ["dd", "bb", *([] if light else ["aa"]), *(["sum_abs"] if extras else [])]


def stack_row(pb, xs: list[str], ys: list[str], shape, rtol: float, base: str, light: bool = False,
              extras: bool = True, a_stack: str | None = None) -> tuple[StackRow, str]:
    """The stack of the pairs (xs[i], ys[i]), float32 tensors of the static ``shape`` (``stackable``), built with
    ``pb`` (a ``graph.pair_nodes.PairBuilder``): (its outputs, A's [K, n] stack, which a light stack of the same
    xs may take as ``a_stack``). ``rtol`` 0: the excess is max |d|."""
    k, n = len(xs), element_count(shape)
    m = partial_length(n)
    flat = pb.const(np.array([k, n], np.int64))
    rows3 = pb.const(np.array([k, n // m, m], np.int64))

    def stacked(names: list[str], tag: str) -> str:
        cat = pb.node("Concat", names, f"{base}.{tag}.cat", axis=0) if len(names) > 1 else names[0]
        return pb.node("Reshape", [cat, flat], f"{base}.{tag}")

    a = a_stack or stacked(xs, "a")
    b = stacked(ys, "b")
    d = pb.node("Sub", [a, b], f"{base}.d")
    ad = pb.node("Abs", [d], f"{base}.ad")
    if extras:
        argmax = pb.node("ArgMax", [ad], f"{base}.argmax", axis=1, keepdims=1)
        max_abs = pb.node("GatherElements", [ad, argmax], f"{base}.max_abs", axis=1)
    else:
        argmax, max_abs = None, pb.red("ReduceMax", ad, f"{base}.max_abs", axes=[1], keepdims=1)
    of = {"dd": (d, "Mul"), "bb": (b, "Mul"), "aa": (a, "Mul"), "sum_abs": (ad, None)}  # squared, or |d| as it is
    parts = []
    for tag in stack_terms(light, extras):  # float32 partials over rows of m elements, [K, n / m] each, in the reader's order
        t, prep = of[tag]
        x = pb.node("Reshape", [pb.node(prep, [t, t], f"{base}.{tag}.sq") if prep else t, rows3], f"{base}.{tag}.rows")
        parts.append(pb.red("ReduceSum", x, f"{base}.{tag}.part", axes=[2], keepdims=0))
    cat = pb.node("Concat", parts, f"{base}.parts", axis=1) if len(parts) > 1 else parts[0]
    wide = pb.node("Cast", [cat], f"{base}.parts64", to=TensorProto.DOUBLE)
    by_term = pb.node("Reshape", [wide, pb.const(np.array([k, len(parts), n // m], np.int64))], f"{base}.parts3d")
    sums = pb.red("ReduceSum", by_term, f"{base}.sums", axes=[2], keepdims=0)
    if light:
        return StackRow(max_abs, argmax, sums), a
    absb = pb.node("Abs", [b], f"{base}.absb")
    return StackRow(pb.maxima(ad, absb, max_abs, rtol, base, extras, axes=[1], axis=1), argmax, sums), a


__all__ = ["STACK_MIN", "STACK_MAX", "STACK_BYTES", "StackRow", "partial_length", "stackable", "stack_size", "stack_terms",
           "stack_row"]
