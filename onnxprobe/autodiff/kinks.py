"""Several kinks along one direction of the gradient check: the tensor's entries taken apart.

At a kink (a Relu input at 0, a MaxPool tie, a value at a Clip bound) the loss has two one-sided slopes along a
direction v, and a valid (sub)gradient g gives <g, v> between them: the check passes it there. That holds for one
kink. With several along v, some convex and some concave (a MaxPool tie whose maximum the loss weighs with a
negative sign), the one-sided slopes are sums of each kink's sides taken in another mix, and a right gradient can
lie outside them: MaxPool over integer-valued pixels, or Clip(-1, 1) with values at both bounds, failed with
gradients equal to torch's. Nor can the parts earn a pass: a part holding one entry of a tie leaves out what the
tie couples (a rule giving a tie's gradient to both entries passes entry by entry). So a direction that fails
where the check measured a kink (``kinked``) is taken apart to look for a disagreement away from the kinks: its
entries in random halves, each checked alone, a half that fails at a kink halved again. A part that fails with
no kink measured fails the gradient; otherwise the gradient gets no verdict, with the parts that agreed away from
every kink counted. A budget of parts (``BUDGET``) bounds the runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

BUDGET = 24  # parts checked at most, for one direction (each a few runs of the model per step tried)


def unit(v: np.ndarray) -> np.ndarray:
    """``v`` scaled to RMS 1, as the check's directions are (one of zeros stays zeros)."""
    return v / max(float(np.sqrt(np.mean(v * v))), 1e-300)


def apart(v: np.ndarray, judge: Callable[[np.ndarray], tuple[bool | None, bool, object]],
          rng: np.random.Generator) -> tuple[object | None, int, int]:
    """(the failing part's detail or None, parts checked, parts that agreed with no kink) for direction ``v`` taken
    apart. ``judge(w)`` checks the gradient along ``w`` (``v`` on some entries, 0 elsewhere) and returns (ok: True /
    False / None, kink: a kink was measured along ``w``, detail)."""
    idx = rng.permutation(np.flatnonzero(v))
    stack = [idx[len(idx) // 2:], idx[:len(idx) // 2]]
    tried = agreed = 0
    while stack and tried < BUDGET:
        part = stack.pop()
        if not part.size:
            continue
        tried += 1
        w = np.zeros(v.shape, np.float64)
        w.flat[part] = v.flat[part]
        ok, kink, detail = judge(w)
        if ok is False and not kink:
            return detail, tried, agreed
        if ok and not kink:
            agreed += 1
        elif ok is False and part.size > 1:
            stack += [part[part.size // 2:], part[:part.size // 2]]
    return None, tried, agreed


def several_kinks(parts: int, agreed: int) -> str:
    """Why a gradient taken apart gets no verdict."""
    return ("the loss has several kinks along the directions tried (ties, values at a bound: MaxPool over equal values, "
            "Clip or Relu at the point), where one-sided differences bound no gradient; taken apart into "
            f"{parts} parts, none disagrees away from the kinks ({agreed} agree there)")
