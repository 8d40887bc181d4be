"""What a diff found: ``PairResult`` (one compared pair and its numbers) and ``DiffResult`` (every pair,
the matching, where the error starts) with its verdict, earned: a diff that compared nothing, or in which
a model output has no counterpart, does not pass; and the orders its rows are shown in (``sort_results``).
``compare.diff`` runs the sides and makes them."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from onnxprobe.autodiff.constant_loss import INSTEAD
from onnxprobe.compare.measure import Measured
from onnxprobe.compare.sides import Side
from onnxprobe.compare.uncompared import by_cause, nothing_compared, outputs_not_compared, uncompared, unmatched_order
from onnxprobe.errors import UsageError, in_words, said, setting_error
from onnxprobe.match.engine import OTHER_VALUES, Matching, Pair, Unmatched
from onnxprobe.compare.unmeasured import mapped_not_compared
from onnxprobe.stats.metrics import IntroducedError, PairMetrics, Tolerance
from onnxprobe.text import as_word, some
from onnxprobe.types import DIFFERENT_FUNCTION, NO_NUMBERS, SORTS, UNPAIRED, forward_name


@dataclass
class PairResult:
    """One compared pair: the tensors (``pair.a``, ``pair.b``: name, op, how they were matched and why), the
    shape, the metrics of a against b, the error this layer introduces by itself, and whether it passed
    its criterion (None: not compared, ``problem`` says why)."""

    pair: Pair
    shape: tuple[int, ...] | None
    metrics: PairMetrics | None
    introduced: IntroducedError | None  # the error this layer adds by itself (B's node on A's inputs)
    passed: bool | None
    tolerance: Tolerance
    problem: str | None = None  # why no metrics (shapes differ at run time, value missing)
    pooled: Measured | None = None  # a dataset's sums behind the metrics (mergeable: compare.dataset)
    kernel_ms: tuple[float | None, float | None] | None = None  # --profile: A's and B's producer kernel times
    runtime_shapes: tuple[list[int], list[int]] | None = None  # A's and B's shapes, where they differed at run time
    # measured but not judged, and why (passed None): a gradient that is rounding noise (diff --grad of a
    # loss constant in that tensor, compared beside one it depends on: compare.constant_loss)
    unjudged: str | None = None

    def __repr__(self) -> str:  # a notebook's view of `d.results[i]`, `d.first_failure`: the pair and its numbers
        m = self.metrics
        if m is None:
            got = f"no metrics ({self.problem})" if self.problem else "no metrics"
        else:
            got = f"sqnr {m.sqnr_db:.3g} dB, cosine {m.cosine:.6g}, max_abs {m.max_abs:.3g}"
        verdict = {True: "pass", False: "FAIL", None: "not judged"}[self.passed]
        return f"PairResult({self.pair!r}, shape={self.shape}: {got}, {verdict})"


@dataclass
class DiffResult:
    """What ``api.diff`` found: one ``PairResult`` per compared pair in model order (``results``), the
    matching (pairs and unmatched tensors with their reasons), where the error starts (``first_failure``),
    the outputs that failed, notes, and ``verdict()``: ("pass" | "fail" | "error", why)."""

    a: Side
    b: Side
    results: list[PairResult]
    matching: Matching
    selected_b: set[str]
    first_failure: PairResult | None
    outputs_failed: list[PairResult]
    measured: str  # what the numbers are: simulated / deployed quantization, or plain
    notes: list[str] = field(default_factory=list)
    grad: dict | None = None  # diff --grad: the loss and its value on each side (compare.gradients)
    sensitivity: list = field(default_factory=list)  # compare.sensitivity.Sensitivity, with --fp32-sensitivity
    criterion: str = ""  # the pass/fail rule, in words (and why it is the default, when it is), with the per-tensor ones
    per_tensor: dict = field(default_factory=dict)  # tensor name -> the Tolerance that judges it instead (--atol NAME:VALUE)
    profile: dict | None = None  # --profile: where the one run's time went
    in_graph: int = 0  # pairs measured in the one run of both models (compare.fused; a dataset: on every sample)
    samples: int | None = None  # a dataset's number of samples (None: one input)
    labels: list[str] = field(default_factory=list)  # the samples' names (file names, "sample 3"...)
    executor: object = None  # a dataset's runtime.ray_pool.Executor: what ran the samples
    model_id: str = ""  # a dataset's models (graph.skeleton.model_digest of A and of B): what its sums describe
    selection: str = ""  # a dataset's selection, in words
    feed: dict = field(default_factory=dict)  # the inputs of a one-input diff (histograms use them again)
    selected_a: set[str] | None = None  # A's observables the selection picks (None: every one); unmatched others are not listed
    # against a torch module: A's weights named as one of its parameters that hold other values (torch.params)
    other_values: list[str] = field(default_factory=list)
    weights_checked: bool = False  # against a torch module: every weight named as a parameter was checked (other_values)
    # the DiffPlan of a one-input diff of two ONNX models (``compare.diff.diff``): what ``api.diff_direct`` keeps of it
    plan: object = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        verdict, why = self.verdict()
        label = lambda s: os.path.basename(str(s.label))  # noqa: E731
        return (f"DiffResult({label(self.a)} vs {label(self.b)}: {len(self.results)} pairs, {self.compared} compared, "
                f"{verdict}: {why})")

    @property
    def uncompared(self) -> list[dict]:
        """What was left uncompared, by cause (``compare.uncompared``: counts and examples)."""
        return uncompared(self)

    def unmatched_in(self, side: str) -> list:
        """Side "a" or "b"'s unmatched tensors, those of a specific cause first ("no counterpart" last)."""
        return unmatched_order(self.matching.unmatched_a if side == "a" else self.matching.unmatched_b)

    @property
    def compared(self) -> int:
        """Pairs that were really measured: some finite values compared, or NaN/Inf found on one side only
        (an empty tensor, or NaN/Inf alike on both sides and nothing else, compares nothing)."""
        return sum(1 for r in self.results if r.metrics is not None
                   and (not r.metrics.empty or r.metrics.nonfinite_mismatch))

    @property
    def uncompared_outputs(self) -> list[PairResult]:
        """Model outputs (weight gradients) that were paired but not judged: nothing finite to compare,
        or no value."""
        return [r for r in self.results if r.passed is None and r.unjudged is None and (r.pair.a.is_output or r.pair.b.is_output)]

    @property
    def uncompared_mapped(self) -> list[PairResult]:
        """Pairs given in --map (``user_map=``) that were not compared: the user asked for each of them, so
        the verdict is an error, not a pass earned by the other pairs (as a --map entry whose static
        shapes differ is refused before anything runs)."""
        return [r for r in self.results if r.passed is None and r.pair.strategy == "map"]

    @property
    def unpaired_outputs(self) -> list[Unmatched]:
        """Model outputs (for gradients: weight gradients) that nothing on the other side stood for, or whose candidate
        is another function of the data (of a forward diff: a weight gradient held otherwise, transposed or merged, is
        said apart): no pass is earned beside them (other pairs agreeing say nothing of them)."""
        return [u for u in self.matching.unmatched_a + self.matching.unmatched_b
                if u.obs.is_output and (u.cause in UNPAIRED or (u.cause == DIFFERENT_FUNCTION and self.grad is None))]

    def verdict(self) -> tuple[str, str]:
        """("pass" | "fail" | "error", one line): error when nothing was compared (the gradients of a
        constant loss, all ~0, compare nothing) or an output had no counterpart, fail when an output (a
        weight gradient) failed the criterion."""
        what = "weight gradients" if self.grad else "outputs"
        constant = (self.grad or {}).get("constant_loss")
        if constant:  # every gradient is ~0 (rounding noise): zeros agreeing with zeros earn no pass
            losses = "; ".join(f"{r}: {why}" for r, why in sorted(constant.items()))
            return "error", said(lambda say: f"nothing was compared meaningfully: the loss does not depend on the weights ({losses}), "
                                 f"so every gradient is ~0; {in_words(INSTEAD, say)}")
        if not self.compared:  # why, by cause, of the selection (as the report's footer counts it)
            computed = any(o.node for side in (self.a, self.b) for o in side.observation.observables)
            return "error", nothing_compared(uncompared(self), computed=computed)
        in_a = {id(u) for u in self.matching.unmatched_a}  # both models' outputs may have one name: say whose
        incomplete = outputs_not_compared([(u.obs.name, u.reason) for u in self.unpaired_outputs if id(u) in in_a],
                                          [(u.obs.name, u.reason) for u in self.unpaired_outputs if id(u) not in in_a],
                                          [(r.pair.b.name, r.problem or "value not produced") for r in self.uncompared_outputs], what)
        mapped = [(r.pair.a.name, r.pair.b.name, r.problem or "value not produced") for r in self.uncompared_mapped]
        if mapped:
            parts = [t for t in (incomplete, mapped_not_compared(mapped)) if t]
            incomplete = said(lambda say: "; ".join(in_words(t, say) for t in parts))
        if incomplete is None and self.grad is None and not any(r.pair.a.is_output or r.pair.b.is_output for r in self.results):
            # every model output holds no numbers (a sparse initializer given as one, a sequence): the pairs
            # compared are inner tensors, which earn no "outputs pass"
            blank = [(u.obs.name, u.reason) for u in self.matching.unmatched_a if u.obs.is_output and u.cause == NO_NUMBERS]
            if blank:
                incomplete = f"none of the outputs holds numbers to compare: {some(blank, form=lambda m: f'{m[0]!r} ({m[1]})')}"
        wrong = self._grad_verdict() if self.grad is not None else None
        failed = (wrong[1] if wrong is not None and wrong[0] == "fail" else
                  _other_values_said(self.other_values) if self.grad is None and self.other_values else
                  said(lambda say: f"{len(self.outputs_failed)} of the {what} fail the criterion ({in_words(self.criterion, say)})")
                  if wrong is None and self.outputs_failed else None)
        if incomplete is None and self.grad is None and not self._any_output():
            # a graph that lists no output (onnx's checker accepts it): "outputs pass" would rest on nothing
            declared = any(len(s.model.proto.graph.output) for s in (self.a, self.b) if s.model is not None)
            incomplete = ("no model output was compared" + ("" if declared else ": the models declare none")
                          + " (each pair above is judged on its own)")
            bad = [r for r in self.results if r.passed is False]
            failed = failed or (said(lambda say: f"{len(bad)} of the pairs fail the criterion ({in_words(self.criterion, say)})")
                                if bad else None)
        # a failure found is a failure, whatever could not be compared beside it (which the line adds): an
        # error ("compare more") would hide the edited weight or output that was compared and disagreed
        if failed:
            return "fail", said(lambda say: f"{in_words(failed, say)}; besides, {in_words(incomplete, say)}") if incomplete else failed
        if incomplete:
            return "error", incomplete
        if wrong is not None:
            return wrong
        return "pass", said(lambda say: f"{what} pass ({in_words(self.criterion, say)})")

    def _any_output(self) -> bool:
        """Whether a model output is among the pairs or the unmatched tensors of either model."""
        return (any(r.pair.a.is_output or r.pair.b.is_output for r in self.results)
                or any(u.obs.is_output for u in self.matching.unmatched_a + self.matching.unmatched_b))

    def _grad_verdict(self) -> tuple[str, str] | None:
        """diff --grad judges weight gradients of a finite loss: none to judge, or a NaN/Inf loss, earns
        no pass (an error when neither side has anything to judge, a fail when one side's loss alone is
        not finite). Against a torch module, a weight named as a parameter but holding other values, or
        losses that differ (``forward_differs``), fail: the model is not that module's export, whatever
        the gradients of the weights that still agree say."""
        other = self.other_values or [forward_name(u.obs.name) or u.obs.name for u in self.matching.unmatched_a
                                      if u.cause == OTHER_VALUES]  # against torch: as diff_torch names them
        if other:
            return "fail", _other_values_said(other)
        if not any(r.pair.a.is_output or r.pair.b.is_output for r in self.results):
            others = len(self.results)
            why = ("the model has no weights" if not self.grad.get("weights") and not self.grad.get("held_weights") else
                   ("no weight receives a gradient (the backward pass stops before every weight, at "
                    + "; ".join(f"{st} in {r}" for r, st in sorted(self.grad.get("stops", {}).items())) + ": see the notes)"
                    if self.grad.get("stops") else "no weight receives a gradient (the backward pass stops before every "
                    "weight: see the notes)")
                   if not self.grad.get("weights") else
                   said(lambda say: f"no weight gradient is among the gradients selected ({say(('wrt', '--wrt'))})")
                   if self.grad.get("wrt") else
                   "no weight gradient of A could be paired with one of B ("
                   + (by_cause(uncompared(self, outputs=True)) or "the unmatched ones say why") + ")")
            return "error", said(lambda say: f"nothing to compare: {in_words(why, say)}, and the verdict is about weight "
                                 f"gradients ({others} other gradient(s) shown, not judged)")
        la, lb = self.grad.get("loss_a"), self.grad.get("loss_b")
        bad = [s for s, v in (("A", la), ("B", lb)) if not (isinstance(v, float) and math.isfinite(v))]
        if len(bad) == 2:
            return "error", f"the loss is {la} in A and {lb} in B: the gradients of a non-finite loss are not judged"
        if bad:
            return "fail", f"the loss is not finite in {bad[0]} only (A {la}, B {lb})"
        judged = [r.metrics for r in self.results if (r.pair.a.is_output or r.pair.b.is_output) and r.passed is not None
                  and r.metrics is not None and not r.metrics.empty]
        if judged and all(m.exact and m.b_absmax == 0 for m in judged):  # zeros agreeing with zeros earn no pass
            return "error", said(lambda say: "nothing was compared meaningfully: every weight gradient is 0 in both models at "
                                 f"this input (the loss is {la:.6g} in A, {lb:.6g} in B: a saturated or dead output?); give real "
                                 f"inputs ({say.either('an InputSpec of files or arrays', '--input, --inputs')}) or another loss")
        if self.grad.get("forward_differs") and self.grad.get("vs_torch"):  # two ONNX models may differ (int8, fp32)
            return "fail", said(lambda say: f"the losses differ (A {la:.6g}, B {lb:.6g}): the forward passes disagree, so the "
                                f"model is not an export of the module as it is now ({say.either('api.diff_torch', '`diff --vs-torch`')} "
                                "shows where)")
        return None


def _other_values_said(names: list[str]) -> str:
    """``names``: weights named as a torch parameter, or ``INIT[PARAM]``: the part of an initializer that
    stands for a parameter (an LSTM's or GRU's gate blocks, ``torch.rnn``; an exporter's copy of it, changed:
    ``torch.params``' ``ParamMap.copies``)."""
    return (f"{len(names)} weight(s) hold other values than the torch parameter they stand for ({some(names)}): "
            "the model is not an export of the module as it is now")


def gradient_origin(res: "DiffResult") -> None:
    """``res`` (a diff of gradients) with ``first_failure`` where a gradient error starts: backpropagation
    computes the gradients from the loss back to the inputs, so a wrong step corrupts every gradient
    before it in the forward order and none after; the error starts at the failing pair latest in the
    forward order, not the first (which is the model's input for any error). When the losses differ
    (``res.grad['forward_differs']``) the error starts in the forward pass, which no gradient pair shows:
    none is marked (a changed conv weight blamed the Gemm weight's gradient after it, a right step)."""
    grad = getattr(res, "grad", None) or {}
    differs = bool(grad.get("forward_differs") or grad.get("weights_differ"))  # (a torch parameter's other values)
    res.first_failure = None if differs else next((r for r in reversed(res.results) if r.passed is False), None)


def sort_results(results: list[PairResult], key: str) -> list[PairResult]:
    """Rows in topological order, or worst first by accumulated or introduced SQNR (exact pairs last): a pair whose
    NaN / Inf positions differ first of all (its SQNR is of its finite values alone, often inf: it sorted behind
    every passing pair)."""
    if key == "topo":
        return list(results)

    def sq(m: PairMetrics | IntroducedError | None) -> tuple[bool, float]:
        worst = m is not None and m.nonfinite_mismatch > 0
        return not worst, m.sqnr_db if m is not None and not math.isnan(m.sqnr_db) else math.inf

    if key == "accumulated":
        return sorted(results, key=lambda r: sq(r.metrics))
    if key == "introduced":
        return sorted(results, key=lambda r: sq(r.introduced))
    raise setting_error(UsageError, ("sort", "--sort"), f"{as_word(key)}: choose {', '.join(SORTS)}")
