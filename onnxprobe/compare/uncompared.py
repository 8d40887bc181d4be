"""What a diff left uncompared, grouped by cause: tensors left unmatched (with ``match.engine``'s cause, or
the few words ``Unmatched.kind`` gives where that cause says too little) and pairs that could not be measured.
When nothing was compared the verdict says these causes, counted, one example each: "no tensor of A could be
paired with one of B" was said of pairs made and then left uncompared for a reason (a gradient upstream of a
Python number), and of tensors refused for their shape, which only --json told."""

from __future__ import annotations

from onnxprobe.compare.sides import GRADIENT_STOPPED
from onnxprobe.errors import in_words, said
from onnxprobe.match.engine import (
    COPY, DIFFERENT_FUNCTION, FOLDED, NO_COUNTERPART, NO_GRADIENT, NO_NUMBERS, NOT_OBSERVABLE, OTHER_SHAPE, OTHER_VALUES,
)
from onnxprobe.text import some
from onnxprobe.types import NO_SCALE

# a cause in words, as the verdict groups by it (``Unmatched.kind`` says more where one cause has several origins)
CAUSE_WORDS = {
    OTHER_SHAPE: "the candidate has another shape",
    DIFFERENT_FUNCTION: "the candidate is another function of the data",
    NOT_OBSERVABLE: "not observable on the other side",
    FOLDED: "folded into another tensor on the other side",
    COPY: "the values of another tensor of its model",
    NO_GRADIENT: "no gradient on the other side",
    OTHER_VALUES: "a weight holding other values than the torch parameter of its name",
    GRADIENT_STOPPED: "the gradient stops at an op without a gradient rule",
    NO_NUMBERS: "no numbers to measure",
    NO_SCALE: "integer codes of no known scale, compared on neither side",
    NO_COUNTERPART: "no counterpart",
}
GENERIC = (NO_COUNTERPART,)  # a cause that tells nothing more than "unmatched": listed after the others
# causes listed after even those: tensors that no model compares (a weight's codes moved, with no scale to read
# them by), which the footer's first examples would otherwise be filled with (a quantized model has many)
LAST = (NO_SCALE,)


def unmatched_order(items: list) -> list:
    """``items`` (Unmatched, or their JSON dicts) with those of a specific cause first, each group in its order
    (those of the ``LAST`` causes after the "no counterpart" ones)."""
    def cause(u) -> str:
        return u["cause"] if isinstance(u, dict) else u.cause
    return sorted(items, key=lambda u: (cause(u) in LAST, cause(u) in GENERIC))


def unmeasured_cause(runtime_shapes: bool, measured: bool, scoped: bool) -> tuple[str, str]:
    """A pair that was not measured: (cause, words), from what it holds (not its problem's words): shapes that
    differed at run time, metrics with nothing in them, a value inside an If branch, or none."""
    if runtime_shapes:
        return "runtime-shapes", "the shapes differ at run time"
    if measured:
        return "nothing-finite", "nothing finite to measure (an empty tensor, or NaN/Inf alike on both sides)"
    if scoped:
        return "not-run", "its If branch did not run"
    return "not-produced", "the value was not produced"


class Causes:
    """Cause groups being counted, one per (cause, words): {cause, why, pairs, in_a, in_b, examples} (a
    pair's, the first one's problem as ``detail``); ``groups()``: those of a specific cause first, then by count."""

    def __init__(self, shown: int = 3):
        self.shown, self.by = shown, {}

    def add(self, cause: str, why: str, where: str, names: list[str], count: int = 1, detail: str | None = None) -> None:
        g = self.by.setdefault((cause, why), {"cause": cause, "why": why, "pairs": 0, "in_a": 0, "in_b": 0, "examples": [],
                                              **({"detail": detail} if detail else {})})
        g[where] += count
        for name in names:
            if len(g["examples"]) < self.shown and name not in g["examples"]:
                g["examples"].append(name)

    def groups(self) -> list[dict]:
        return sorted(self.by.values(), key=lambda g: (g["cause"] in LAST, g["cause"] in GENERIC, -(g["pairs"] + max(g["in_a"], g["in_b"]))))


def uncompared(res, shown: int = 3, outputs: bool = False) -> list[dict]:
    """The causes of what ``res`` (a DiffResult) left uncompared, in its selection (``outputs``: of its model
    outputs, weight gradients, alone): ``Causes.groups()``."""
    causes = Causes(shown)
    for r in res.results:
        measured = r.metrics is not None and (not r.metrics.empty or r.metrics.nonfinite_mismatch)
        if not measured and r.unjudged is None and (not outputs or r.pair.a.is_output or r.pair.b.is_output):
            cause = unmeasured_cause(r.runtime_shapes is not None, r.metrics is not None, bool(r.pair.a.scope or r.pair.b.scope))
            causes.add(*cause, "pairs", [r.pair.b.name], detail=r.problem)
    for where, items, selected in (("in_a", res.matching.unmatched_a, res.selected_a),
                                   ("in_b", res.matching.unmatched_b, res.selected_b)):
        for u in items:
            if (selected is None or u.obs.name in selected) and (not outputs or u.obs.is_output):
                causes.add(u.cause, u.kind or CAUSE_WORDS.get(u.cause, u.cause), where, [u.obs.name])
    return causes.groups()


def merged_uncompared(shard: list[dict], unmeasured: list[dict], shown: int = 3) -> list[dict]:
    """The causes of what a merge of dataset diff reports left uncompared: the unmatched tensors as a shard
    grouped them (``shard``: its ``uncompared``; the matching is the same in every shard), and the merged
    pairs measured in no shard (``unmeasured``: their JSON dicts), each counted once however many shards
    did not measure it."""
    causes = Causes(shown)
    for g in shard:
        for where in ("in_a", "in_b"):
            if g[where]:
                causes.add(g["cause"], g["why"], where, g["examples"], g[where])
    for p in unmeasured:
        cause = unmeasured_cause(bool(p.get("runtime_shapes")), p.get("exact") is not None, bool(p.get("scope")))
        causes.add(*cause, "pairs", [p["b"]], detail=p.get("problem"))
    return causes.groups()


def counted(g: dict) -> str:
    """How many a cause group holds: "2 pairs", "4 in A", "1 in A, 1 in B"."""
    if g["pairs"]:
        return f"{g['pairs']} pair{'s' if g['pairs'] != 1 else ''}"
    return ", ".join(f"{g[k]} in {k[-1].upper()}" for k in ("in_a", "in_b") if g[k])


def nothing_compared(groups: list[dict], limit: int = 4, computed: bool = False) -> str:
    """The verdict's line when nothing was compared: how many were left unmatched (as the report's footer
    counts them) and not measured, then the causes, counted, with an example each. ``computed``: a node of A
    or B computes a tensor (the selection left them all out)."""
    ua, ub, pairs = (sum(g[k] for g in groups) for k in ("in_a", "in_b", "pairs"))
    if not (ua or ub or pairs) and not computed:  # "(0 unmatched in A, 0 in B)" read as a contradiction (QA)
        return "nothing was compared: neither model has a tensor to pair (no node of A or B computes one)"
    if not (ua or ub or pairs):
        return said(lambda say: "nothing was compared: the selection holds no tensor of A or B to pair (the default is the "
                    f"models' outputs and their layers; {say.either('Selection(all=True), ops= or names=', '--all, --op or --name')} "
                    "select others)")
    if not groups or all(g["cause"] in GENERIC for g in groups):
        return said(lambda say: f"nothing was compared: no tensor of A could be paired with one of B ({ua} unmatched in A, {ub} "
                    f"in B, none with a counterpart; {say.either('the result: unmatched_in(side)', '--json')} lists them)")
    measured = f"{pairs} pair{'s' if pairs != 1 else ''} not measured; " if pairs else ""
    causes = by_cause(groups, limit)
    return said(lambda say: f"nothing was compared ({measured}{ua} unmatched in A, {ub} in B): by cause, {causes} "
                f"({say.either('the result', '--json')}: uncompared)")


def by_cause(groups: list[dict], limit: int = 4) -> str:
    """Cause groups in words: "why (count, e.g. 'name'); ..."."""
    said = [f"{g['why']} ({counted(g)}, e.g. {g['examples'][0]!r}{': ' + g['detail'] if g.get('detail') else ''})"
            for g in groups[:limit]]
    return "; ".join(said) + (f"; and {len(groups) - limit} more cause(s)" if len(groups) > limit else "")


def outputs_not_compared(unpaired_a: list[tuple[str, str]], unpaired_b: list[tuple[str, str]],
                         unmeasured: list[tuple[str, str]], what: str = "outputs") -> str | None:
    """The verdict's line when some model outputs (weight gradients: ``what``) could not be compared: A's and
    B's left unpaired ((name, reason)), an output both sides have said once with A's reason, another named by
    its side, then those paired but not measured ((name, why)); None when there are none."""
    both = {n for n, _ in unpaired_a} & {n for n, _ in unpaired_b}
    missing = [(repr(n) if n in both else f"A's {n!r}", why) for n, why in unpaired_a]
    missing += [(f"B's {n!r}", why) for n, why in unpaired_b if n not in both]
    missing += [(repr(n), why) for n, why in unmeasured]
    if not missing:
        return None
    # a reason may name a setting (errors.said: "paired ... by --map"): said in each reader's words
    return said(lambda say: f"{len(missing)} of the {what} could not be compared: "
                f"{some(missing, form=lambda m: f'{m[0]} ({in_words(m[1], say)})')}")
