"""What a matching of two models' observables gives (``match.engine.match``): the pairs, each with the
strategy that made it and why, and each model's unpaired tensors with the reason and cause left on them."""

from __future__ import annotations

from dataclasses import dataclass

from onnxprobe.match.observe import Observable
from onnxprobe.text import clip, quote
from onnxprobe.types import NO_COUNTERPART


@dataclass
class Pair:
    a: Observable
    b: Observable
    strategy: str
    reason: str

    def __repr__(self) -> str:
        return f"Pair({quote(clip(self.a.name, 80))} <-> {quote(clip(self.b.name, 80))}, strategy={self.strategy!r})"


@dataclass
class Unmatched:
    obs: Observable
    reason: str
    cause: str = NO_COUNTERPART
    kind: str = ""  # the cause in a few words where the cause alone says too little (compare.uncompared), or ""


@dataclass
class Matching:
    pairs: list[Pair]
    unmatched_a: list[Unmatched]
    unmatched_b: list[Unmatched]


def shapes_agree(a: tuple | None, b: tuple | None) -> bool:
    """Whether two shapes may be one: equal ranks and equal dims wherever both are known (None: unknown)."""
    if a is None or b is None:
        return True
    if len(a) != len(b):
        return False
    return all(not (isinstance(x, int) and isinstance(y, int)) or x == y for x, y in zip(a, b))


def shape_words(s) -> str:
    """A shape as the table says it: "2x4", "?" unknown, "scalar" for ()."""
    if s is not None and len(s) == 0:
        return "scalar"  # as the table says it (an empty join read "shapes 2x4 and  differ")
    return "?" if s is None else "x".join(str(d) if d is not None else "?" for d in s)
