"""``diff`` over a dataset: each sample measured by ``compare.measure`` (one sample's sums per pair), the
sums pooled over every sample (``stats.pooled``: exact, in any order, so samples measured by other
processes pool to the same numbers), the verdict earned on the pooled metrics (``compare.diff.finish``).

A sample is one run: a file of a dataset folder, a row of a stacked ``.npz``, or one feed dict of a
pipeline. Samples are numbered from 0 in the dataset's order; the numbers say where the worst error was.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from onnxprobe.compare.criteria import measured_label
from onnxprobe.compare.diff import finish
from onnxprobe.compare.result import DiffResult
from onnxprobe.compare.measure import DiffPlan, Measured, measure
from onnxprobe.errors import ExecutionError

SESSION_KEY = "onnxprobe.dataset"  # the one-run diff's session, kept for every sample


def pairs_digest(plan: DiffPlan) -> str:
    """What the plan measures, in a few bytes: a worker that built another plan (other models, settings
    or onnxprobe) must not have its sums pooled with these."""
    text = "\n".join(f"{p.a.probe}\t{p.b.probe}\t{plan.rtol_of(p)!r}" for p in plan.report)
    return hashlib.sha256(f"{plan.with_cones}\n{text}".encode()).hexdigest()[:16]


@dataclass
class DiffPartial:
    """One sample's measurements, by pair (its position in the plan's report)."""

    index: int
    label: str
    measured: dict[int, Measured]
    notes: list[str]
    digest: str
    # what the sample's numbers are (``compare.criteria.measured_label``): on a Ray actor only its runners ran,
    # and OpenVINO says there whether it fused a QDQ model into integer kernels
    measured_label: str = ""


def measure_sample(plan: DiffPlan, feeds: dict[str, np.ndarray], index: int, label: str,
                   notes: list[str] = ()) -> DiffPartial:
    before = len(plan.notes)
    got = measure(plan, feeds, sample=index, key=SESSION_KEY)
    # the runners' notes too (OpenVINO's int64, bf16, integer kernels): on a Ray actor they are found there,
    # and the driver's own runners never run (the pool keeps each note once)
    found = [n for side in (plan.a, plan.b) for n in side.runner.notes]
    return DiffPartial(index, label, got, list(dict.fromkeys([*notes, *plan.notes[before:], *found])), pairs_digest(plan),
                       measured_label(plan.a, plan.b))


@dataclass
class Pool:
    """The pooled measurements of a plan's samples, added in any order (``add``), and their DiffResult."""

    plan: DiffPlan
    measured: dict[int, Measured] = field(default_factory=dict)
    labels: dict[int, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    labels_measured: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.digest = pairs_digest(self.plan)

    def add(self, part: DiffPartial) -> None:
        if part.digest != self.digest:
            raise ExecutionError(f"{part.label}: a worker measured other pairs than this process (other models, "
                                 "settings or onnxprobe version there)")
        if part.index in self.labels:
            raise ExecutionError(f"{part.label}: sample {part.index} measured twice")
        self.labels[part.index] = part.label
        for k, m in part.measured.items():
            self.measured[k] = self.measured[k].merge(m) if k in self.measured else m
        self.notes += [n for n in part.notes if n not in self.notes]
        if part.measured_label and part.measured_label not in self.labels_measured:
            self.labels_measured.append(part.measured_label)

    def result(self) -> DiffResult:
        n = len(self.labels)
        if sorted(self.labels) != list(range(n)):
            raise ExecutionError(f"samples missing from the pool: have {n}, numbered up to {max(self.labels, default=-1)}")
        res = finish(self.plan, self.measured, [self.labels[i] for i in range(n)])
        res.notes = list(dict.fromkeys(res.notes + self.notes))
        if self.labels_measured:  # the workers' runners ran the samples, not this process's
            res.measured = " | ".join(self.labels_measured)
        return res
