"""Why a pair has no metrics, and the verdict's words for pairs given in --map that were not compared: said where
a diff's result is assembled (``compare.diff``, ``compare.merge_diff``, ``compare.result``)."""

from __future__ import annotations

from onnxprobe.errors import said
from onnxprobe.types import MAP
from onnxprobe.stats.metrics import PairMetrics
from onnxprobe.text import some


def nothing_measured(shape, m: PairMetrics) -> str:
    """Why a pair (of this shape) with no finite value pair has no metrics, in words."""
    if shape is not None and 0 in shape:
        return f"empty tensor (shape {'x'.join(str(d) for d in shape)}, 0 elements): nothing to compare"
    if m.nonfinite_mismatch:
        return f"NaN/Inf mismatch at {m.nonfinite_mismatch} position(s), and no finite pair to measure"
    n = f"all {m.nonfinite_same} values are" if m.nonfinite_same else "every value is"
    return f"no finite value: {n} NaN/Inf on both sides, at the same positions"


def mapped_not_compared(mapped: list[tuple[str, str, str]]) -> str:
    """The verdict's line for pairs given in --map (A's tensor, B's, why) that were not compared: the
    user asked for each, so no pass is earned by the other pairs (``compare.result``, ``compare.merge_diff``)."""
    names = some(mapped, form=lambda m: f"{m[0]!r} -> {m[1]!r} ({m[2]})")
    return said(lambda say: f"{len(mapped)} of the pairs given in {say(MAP)} could not be compared: {names}")


__all__ = ["mapped_not_compared", "nothing_measured"]
