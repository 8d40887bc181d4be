"""The outputs' rows of a diff whose float16 (bfloat16) side runs on onnxruntime's CPU provider, measured on plain runs.

That provider computes float16 ops it has no float16 kernel for in float32, between Casts it inserts, and drops the
Cast pairs that meet; a probed float16 tensor becomes a graph output, rounded to float16 there, where the plain model
kept float32 between those ops (``runtime.runners.ort.OrtRunner.check_outputs``). Probing more than the outputs thus
changes what the outputs hold (QA: mobilenet_v3 in float16 against its float32 original, logits max|a-b| 4.95e-6
as the two models compute them, 5.47e-6 with the default selection probed, and no word of it). The verdict is about
the outputs: their rows are measured again on one run of each model as it is (all its outputs, nothing else
probed), and a note says which of them that changed. Their introduced errors stay the probed run's (B's node on
A's inputs there: the layer's own error, under the same rounding on both sides)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from onnx import TensorProto

from onnxprobe.text import some

HALF = (TensorProto.FLOAT16, TensorProto.BFLOAT16)
MOVED = 1e-4  # a relative change of max|a-b| or Σ(a-b)² past rounding (float32 partial sums: ~1e-6)


def plain_pairs(plan) -> list[int]:
    """The pairs of ``plan.report`` (positions) to measure on plain runs: pairs of two graph outputs read as they are
    (no dequantization), where a side on onnxruntime's CPU provider has a float16 or bfloat16 tensor probed that is
    not an output of its model; else none."""
    def rounds_otherwise(side, observed) -> bool:
        r = side.runner
        return (r.kind == "onnxruntime" and getattr(r, "device", None) == "cpu"
                and any(o.elem_type in HALF and not o.is_output for o in observed))

    if not (plan.a.runner.takes_feeds and plan.b.runner.takes_feeds):
        # saved values (--vs-npz): no plain run of theirs to match; a snapshot that layers --save took of A was taken
        # with its probes, as A's probed run reads it (a float16 model's output measured on A's plain run failed
        # against its own snapshot, on the same inputs)
        return []
    if not (rounds_otherwise(plan.a, [p.a for p in plan.report]) or rounds_otherwise(plan.b, [p.b for p in plan.report])):
        return []
    # a side that runs no graph (the torch module of --vs-torch) gives its outputs as they are, whatever is probed
    def as_is(o, side) -> bool:
        return o.is_output and o.kind == "float" and (o.probe == o.name or not side.runs_graphs)

    return [k for k, p in enumerate(plan.report) if as_is(p.a, plan.a) and as_is(p.b, plan.b)]


def measure_plain(plan, feeds: dict, out: dict, sample: int, sums_of) -> list[str]:
    """Each pair of ``plan.plain`` that ``out`` measured, measured again on one plain run of each model on ``feeds``
    (``sums_of`` as ``compare.measure``'s): its row replaced (its introduced error kept). The names of the pairs'
    A tensors whose numbers that moved past rounding (the note's)."""
    ks = [k for k in plan.plain if k in out and out[k].sums is not None and out[k].problem is None]
    if not ks:
        return []
    va = _plain(plan.a.runner, [plan.report[k].a.probe for k in ks], feeds)
    vb = _plain(plan.b.runner, [plan.report[k].b.probe for k in ks], feeds)
    changed = []
    for k in ks:
        p = plan.report[k]
        a, b = va.get(p.a.probe), vb.get(p.b.probe)
        if a is None or b is None or np.shape(a) != np.shape(b):  # (numpy arrays: nothing kept on a device)
            continue
        s = sums_of(a, b, plan.rtol_of(p), sample, tolerance=plan.tolerance_of(p))
        old, out[k] = out[k].sums, replace(out[k], sums=s)  # its introduced error and in_graph kept
        # the probed run's sums are float32 partials, these float64: they differ in their last digits anyway
        if any(abs(x - y) > MOVED * max(abs(x), abs(y)) for x, y in ((s.max_abs, old.max_abs), (_dd(s), _dd(old)))):
            changed.append(p.a.name)
    return changed


def _plain(runner, names: list[str], feeds: dict) -> dict:
    """A plain run's outputs: all its model's outputs (none more probed), or, for a side with no model (``--vs-npz``:
    saved values; ``--vs-torch``: the module's outputs, which no probing changes), the values of ``names`` (their
    probes: 'output:0' of the module)."""
    model = getattr(runner, "model", None)
    return runner.values([o.name for o in model.graph.output] if model is not None else names, feeds)


def _dd(s) -> float:
    """Σ(a-b)² of sums ``s`` (``stats.pooled.PairSums``: exact partials in units of 2^(2 exp))."""
    return math.fsum(s.dd) * 2.0 ** (2 * s.exp)


def note(changed: list[str]) -> str:
    return (f"the output{'s' if len(changed) > 1 else ''} {some(changed, form=str)} "
            "measured on plain runs of the models: onnxruntime's CPU provider rounds a probed float16 tensor to "
            "float16 where it is a graph output and keeps float32 between ops where it is not, so the probed run "
            "computed otherwise (the other rows are of the probed run; probe fewer float16 tensors, or compare on "
            "--device cuda)")
