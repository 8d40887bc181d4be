"""``diff``: run two sides on the same inputs, pair their tensors, measure, and find where error starts.

A verdict is earned: pairs are measured only between tensors that stand for the same value; a diff that
compared nothing, or in which a model output has no counterpart, does not pass (``compare.result``: the
``DiffResult`` this module makes, and its verdict).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from onnxprobe.compare.criteria import (check_feed_shapes, check_same_inputs, chosen, default_tolerance, float_note, half, judged_by_extras,
                                        measured_label, one_model, stored_weights_note, unread_note)
from onnxprobe.compare.fused import fusable
from onnxprobe.compare.introduced import exact_inputs, quantized_b_note
from onnxprobe.compare.measure import DiffPlan, Measured, measure
from onnxprobe.compare.result import DiffResult, PairResult
from onnxprobe.compare.sides import Side
from onnxprobe.compare.unmatched import explain_unmatched, no_numbers, saved_non_numbers, unscaled
from onnxprobe.compare.unordered import unordered_pairs
from onnxprobe.errors import UsageError, in_words, said, settings_error
from onnxprobe.graph.select import Selection, check_criteria, select, selects_op
from onnxprobe.graph.walk import unread_extras
from onnxprobe.match.bodies import body_note, body_tensors, sealed_tensors
from onnxprobe.match.concrete import match_for_inputs
from onnxprobe.match.engine import DIFFERENT_FUNCTION, Matching, Pair, Unmatched
from onnxprobe.match.observe import Observable
from onnxprobe.compare.unmeasured import nothing_measured
from onnxprobe.stats.metrics import EXACT_INTEGERS, IntroducedError, PairMetrics, Tolerance
from onnxprobe.text import as_typed, matches, quote, some
from onnxprobe.types import forward_name

# the criteria of named tensors, as the API (diff's parameter) and the command line (its flags) name them
PER_TENSOR = ("per_tensor", "--atol/--rtol NAME:VALUE")


def selected_pairs(a: Side, b: Side, matching: Matching, sel: Selection) -> tuple[list[Pair], set[str], set[str]]:
    """The pairs a selection reports, resolved by ``graph.select`` on each model: a pair is in when its
    A tensor (or the value it stands for) is selected in A, or (without --range, which counts A's nodes)
    its B tensor in B; model outputs and the pairs given in --map always are (the user asked for them).
    Returns (pairs, the selected names of B, the selected names of A's observables)."""
    models = [a.model.proto] + ([b.model.proto] if b.model is not a.model else [])
    check_criteria(models, sel)
    if sel.all and not (sel.ops or sel.names or sel.range):  # everything, graph inputs and their gradients too
        # (no selection of either model to resolve: each select walked its whole graph for nothing)
        every_b = {o.name for o in b.observation.observables} | {u.obs.name for u in matching.unmatched_b}  # saved strings too
        return list(matching.pairs), every_b, {o.name for o in a.observation.observables + a.observation.no_numbers + a.observation.unscaled}
    # by name, and by key where sibling bodies share a name (``match.observe`` names such tensors by their key)
    in_a = {n for r in select(a.model.proto, sel, strict=False) for n in (r.name, r.key)}
    sel_b = Selection(sel.ops, sel.names, sel.all, None, sel.include_constants) if sel.range else sel
    in_b = {n for r in select(b.model.proto, sel_b, strict=False) for n in (r.name, r.key)} if b.model is not a.model else set(in_a)

    def names(o: Observable) -> list[str]:
        base = [o.name, o.key, o.probe]
        return base + [f for f in (forward_name(n) for n in base) if f]  # a gradient stands for its tensor
    # a quantized value stands for its float layer's output: a dequantized QLinearConv or the rescaled float
    # result of a ConvInteger is a Conv output, though DequantizeLinear or Add writes it
    layer = (lambda o: o.kind != "float" and selects_op(sel, o.effective_op))
    pairs = [p for p in matching.pairs if p.a.is_output or p.b.is_output or p.strategy == "map"
             or any(n in in_a for n in names(p.a)) or layer(p.a)
             or (not sel.range and (any(n in in_b for n in names(p.b)) or layer(p.b)))]
    picked_a = {o.name for o in a.observation.observables + a.observation.no_numbers + a.observation.unscaled
                if o.is_output or any(n in in_a for n in names(o)) or layer(o)}
    # B's observables by the same test as A's (a quantized Conv that B alone has, written by a
    # DequantizeLinear, was left out of the unmatched ones the selection lists and counts)
    picked_b = {o.name for o in b.observation.observables + b.observation.no_numbers + b.observation.unscaled
                if o.is_output or any(n in in_b for n in names(o)) or layer(o)}
    # saved values of a name the model does not hold (no node: ``npz_side``) were saved to be compared, and no
    # selection on the model can speak of them: listed and counted (they were left out, silently), unless
    # --op or a --name they do not match leaves them out
    stray = {o.name for o in b.observation.observables + [u.obs for u in matching.unmatched_b]
             if not b.runner.takes_feeds and not o.node and not sel.ops
             and (not sel.names or any(matches(o.name, g) for g in sel.names))}
    return pairs, in_b | picked_b | stray, picked_a


def _check_named(per_tensor: dict | None, a: Side, b: Side) -> dict | None:
    """``per_tensor`` keyed by the tensors it names, each a name as listings print it (``text.as_typed``: the
    listed ``a\\\\nb`` of a backslash and an n was refused, and ``a\\nb`` judged the other tensor); every one is
    a tensor either side observes (a misspelt name would change nothing, silently)."""
    known = {n for side in (a, b) for o in side.observation.observables for n in (o.name, o.key, o.probe)}
    per_tensor = {as_typed(n, known): t for n, t in per_tensor.items()} if per_tensor else per_tensor
    unknown = sorted(n for n in (per_tensor or {}) if n not in known)
    obs = a.observation.observables + b.observation.observables
    for n in unknown:  # a bare name sibling If branches share: observed, but which one is meant is not said
        keys = sorted({o.name for o in obs if o.scope and o.name == f"{o.scope}/{n}"})
        if keys:
            raise settings_error(UsageError, lambda say: f"a per-tensor tolerance ({say(PER_TENSOR)}) names {quote(n)}, which is "
                                 f"ambiguous: If branches share that name; give one by its scope ({', '.join(keys)})")
    if unknown:
        raise settings_error(UsageError, lambda say: f"a per-tensor tolerance ({say(PER_TENSOR)}) names {quote(unknown[0])}, "
                             f"which neither model observes{f' (and {len(unknown) - 1} more)' if len(unknown) > 1 else ''}")
    return per_tensor


def _rules_left_out(per_tensor: dict | None, report: list) -> list[str]:
    """A note naming the per-tensor rules of tensors the selection does not report: printed in the criterion,
    applied to nothing, where the user asked for them (a tensor the default selection leaves out)."""
    shown = {n for p in report for o in (p.a, p.b) for n in (o.name, o.key, o.probe)}
    left = [n for n in (per_tensor or {}) if n not in shown]
    return [said(lambda say: f"the per-tensor tolerance{'s' if len(left) > 1 else ''} ({say(PER_TENSOR)}) of "
                 f"{some(left)} judge{'' if len(left) > 1 else 's'} nothing: the selection leaves "
                 f"{'them' if len(left) > 1 else 'it'} out, so {'they are' if len(left) > 1 else 'it is'} not compared")] if left else []


def _one_rule_per_pair(per_tensor: dict | None, matching) -> None:
    """A pair judged by two per-tensor rules, one under A's name and one under B's, is refused as a tensor
    given twice is: ``DiffPlan.tolerance_of`` took the first and dropped the other in silence."""
    for p in matching.pairs if per_tensor else ():
        named = list(dict.fromkeys(n for n in (p.a.name, p.b.name, p.b.key) if n in per_tensor))
        if len(named) > 1:
            raise settings_error(UsageError, lambda say: f"per-tensor tolerances ({say(PER_TENSOR)}) name one pair twice: "
                                 f"{quote(named[0])} (A) and {quote(named[1])} (B) are compared together; give its rule under one name")


def prepare(a: Side, b: Side, selection: Selection, tolerance: Tolerance | None,
            per_tensor: dict[str, Tolerance] | None = None, user_map: dict[str, str] | None = None,
            introduced: bool = True, max_memory: int | None = None, device_metrics: bool | None = None,
            reject=None, pair=None, fuse: bool = True, profile: bool = False, input_shapes: dict | None = None,
            extras: bool = True) -> DiffPlan:
    """What is compared, the same for every input: the matching, the pairs the selection reports, the
    criterion, how the pairs are measured (``diff`` explains the arguments; ``input_shapes``: the feeds'
    shapes, which tell the shapes of tensors the models leave undeclared: ``match.concrete``). ``extras``
    False: the max relative error and mean |a-b| are left out (None) of a one-run diff (``compare.fused``),
    unless a criterion judges by one; a diff in separate runs measures them as ever."""
    default = default_tolerance(a, b)
    tolerance = chosen(tolerance, default)
    # a per-tensor rule takes what it leaves out from this comparison's default, as the whole-model one does
    per_tensor = {n: chosen(t, default) for n, t in per_tensor.items()} if per_tensor else per_tensor
    floats = check_same_inputs(a.model.proto, b.model.proto) if a.runner.takes_feeds and b.runner.takes_feeds else {}
    if input_shapes and a.runner.takes_feeds and b.runner.takes_feeds:
        check_feed_shapes(input_shapes, {"A": a.model.proto, "B": b.model.proto})
    for side in (a, b) if floats else ():  # each side takes the feeds in its own float types
        side.runner.cast_float_feeds = True
    matching = (pair(a.observation.observables, b.observation.observables, user_map) if pair else
                match_for_inputs(a.model.proto, b.model.proto, a.observation.observables, b.observation.observables,
                                 user_map, input_shapes))
    matching.unmatched_b += saved_non_numbers(a, b)  # saved strings are never paired: listed, with why
    matching.unmatched_a += no_numbers(a)  # sequences, optionals, strings: the same
    matching.unmatched_b += no_numbers(b)
    # codes of no known scale, compared on neither side: listed, as every tensor of the selection is somewhere
    more_a, more_b = unscaled(a, matching.unmatched_b), unscaled(b, matching.unmatched_a)
    matching.unmatched_a += more_a
    matching.unmatched_b += more_b
    per_tensor = _check_named(per_tensor, a, b)
    _one_rule_per_pair(per_tensor, matching)
    if reject is not None:
        _reject(matching, reject)
    report, sel_b, sel_a = selected_pairs(a, b, matching, selection)
    with_cones = introduced and b.runs_graphs
    # where B's cones start from A's values: B's float tensors, a dynamically quantized layer's rescaled float result
    # among them (the bias Add after it is measured as B's Add fed A's value)
    by_b = {p.b.probe: p for p in matching.pairs if p.b.kind in ("float", "dynamic")}
    # a half-precision model: onnxruntime's CPU runs float16 ops it has no kernel for in float32 and drops the
    # Casts that meet, differently in the merged graph, so its values there are not those it gives alone (QA)
    halves = "a model computes in half precision" if a.runs_graphs and b.runs_graphs and (half(a) or half(b)) else None
    why_not = (fusable(a, b) or ("the models take inputs of different float types" if floats else None) or halves) if fuse else "--separate-runs"
    if profile and why_not:  # known before any run: refused as the flags that keep the one run off are (api.check_profile)
        raise settings_error(UsageError, lambda say: f"{say.either('profile', '--profile')} times diff's one run of both "
                             f"models, which these models cannot take: {why_not}")
    notes = []
    notes += unread_note(a.model.proto, b.model.proto) if a.runner.takes_feeds and b.runner.takes_feeds else []
    notes += float_note(floats) + quantized_b_note(report, introduced and (with_cones or b.runner.replays), one_model(a, b))
    inside = {**body_tensors(b.model.proto, selection, loops_only=True), **body_tensors(a.model.proto, selection, loops_only=True)}
    sealed = {**sealed_tensors(b.model.proto), **sealed_tensors(a.model.proto)}
    notes += [n for n in [body_note(inside, "compared by diff", loops_only=True, sealed=sealed)] if n]
    in_b = Selection(selection.ops, selection.names, selection.all, None, selection.include_constants) if selection.range else selection
    notes += stored_weights_note([(a.model.proto, selection)] + ([(b.model.proto, in_b)] if b.model is not a.model else []))
    notes += _rules_left_out(per_tensor, report)
    notes += [f"{label} holds {side.observation.blocked} tensor{'s' if side.observation.blocked != 1 else ''} in onnxruntime's "
              "blocked NCHWc layout (com.microsoft.nchwc: a model it optimized at --opt-level all and saved), whose values "
              "are in channel-block order: not compared; compare the model onnxruntime was given, or one saved at "
              "--opt-level extended" for label, side in (("A", a), ("B", b)) if side.observation.blocked]
    unordered, told = unordered_pairs(a.model.proto, b.model.proto, report)
    return DiffPlan(a, b, tolerance, per_tensor, matching, report, sel_b, by_b, with_cones,
                    introduced and not with_cones and b.runner.replays, why_not is None, max_memory, device_metrics,
                    notes + told, profile=profile and why_not is None, selected_a=sel_a, floats=floats,
                    unordered=unordered,
                    extras=extras or judged_by_extras(tolerance, per_tensor) or why_not is not None, default=default)


def diff(a: Side, b: Side, feeds: dict[str, np.ndarray], selection: Selection, tolerance: Tolerance | None,
         per_tensor: dict[str, Tolerance] | None = None, user_map: dict[str, str] | None = None,
         introduced: bool = True, max_memory: int | None = None, progress=None,
         device_metrics: bool | None = None, reject=None, pair=None, fuse: bool = True,
         profile: bool = False, extras: bool = True) -> DiffResult:
    """Pairs are measured in chunks: each chunk runs both sides exposing only its own tensors (and the
    A values that its introduced-error cones start from), so at most ``max_memory`` bytes of raw tensors
    are alive at once (default: a quarter of the available memory). Tensors produced on a GPU stay
    there and their metrics are computed there (runtime.device_metrics): only scalars reach the host.
    ``device_metrics`` forces that path on or off (default: on for CUDA sides). ``tolerance`` None: the
    default for what is compared (``default_tolerance``). ``reject(pair)``: a reason when a pair the
    matching made must not be measured (two tensors that are different functions of the data); both
    tensors then stay unmatched with it (cause DIFFERENT_FUNCTION, or the cause it returns with the
    reason as a tuple). ``pair(obs_a, obs_b, user_map)``: the Matching to use instead of
    ``match.engine.match`` (a side that is not an ONNX model, such as a PyTorch module, pairs its own way).
    ``fuse``: when both sides are onnxruntime with the same settings, measure everything in one run of
    both models in one graph, metrics and introduced error computed there (``compare.fused``); only the
    pairs it hands back go through the chunked runs (``compare.measure``). ``profile``: time that run under
    onnxruntime's profiler too (each pair gets its producers' kernel times; needs the one-run diff).
    ``extras`` False: no max relative error nor mean |a-b| (None; ``prepare``), which the one run then
    does not compute."""
    plan = prepare(a, b, selection, tolerance, per_tensor, user_map, introduced, max_memory, device_metrics, reject,
                   pair, fuse, profile, {k: tuple(np.shape(v)) for k, v in feeds.items()}, extras)
    if a.runner.takes_feeds and b.runner.takes_feeds:  # no shared feed: each runner feeds them zeros (``feeds.fed``)
        unread = {n for u in unread_extras(a.model.proto, b.model.proto) for n in u}
        feeds = {k: v for k, v in feeds.items() if k not in unread}
    res = finish(plan, measure(plan, feeds, progress=progress))
    res.plan = plan
    return res


def finish(plan: DiffPlan, measured: dict[int, Measured], labels: list[str] | None = None) -> DiffResult:
    """The DiffResult of a plan's measurements (one sample's, or a dataset's pooled: then ``labels``
    names the samples, and problems say in which one they showed)."""
    a, b = plan.a, plan.b
    results, scaled = judged(plan, measured, labels)
    notes = list(a.notes) + list(a.runner.notes) + list(b.notes) + list(b.runner.notes) + plan.notes
    plan.exact_inputs = _introduced_from_exact_inputs(results, a, b, set(plan.by_b))
    explain_unmatched(plan.matching, a, b)
    return assembled(plan, a, b, results, scaled, measured_label(a, b), list(dict.fromkeys(notes)),
                     sum(1 for m in measured.values() if m.in_graph), labels)


def judged(plan, measured: dict[int, Measured], labels: list[str] | None = None) -> tuple[list[PairResult], object]:
    """Each pair of ``plan.report`` with its metrics and verdict (in the report's order), and the criterion at the
    run's scale (``_at_scale``). ``plan``: a DiffPlan, or what a served diff keeps of one (``api.diff_direct``):
    ``report``, ``rtol_of``, ``tolerance_of``, ``extras``, ``kernel_ms``."""
    results: list[PairResult] = []
    # each measured pair's metrics, once: a rule relative to the run's scale reads them all before judging any
    metrics = {k: m.sums.metrics(plan.rtol_of(plan.report[k])) for k, m in measured.items()
               if k < len(plan.report) and m.problem is None and m.sums is not None and m.sums.samples}
    if not plan.extras:  # not measured by the one run's rows (read as 0 and -1 there): None, for every pair alike
        metrics = {k: replace(m, max_rel=None, mean_abs=None, worst=None) for k, m in metrics.items()}
    scaled = _at_scale(plan, metrics)
    for k, p in enumerate(plan.report):
        tol = scaled(plan.tolerance_of(p))
        m = measured.get(k) or Measured()
        if m.problem is not None:  # two tensors of other shapes: different functions of the data, not compared
            s, sa, sb = m.problem
            why = f"shapes differ at run time: {sa} vs {sb}"
            results.append(PairResult(p, None, None, None, None, tol, f"{labels[s]}: {why}" if labels else why,
                                      runtime_shapes=(sa, sb)))
        elif m.sums is None or not m.sums.samples:
            branch = p.a.scope or p.b.scope
            why = f"not run: its If branch ({branch}) did not run" if branch else "value not produced"
            results.append(PairResult(p, None, None, None, None, tol, why))
        else:
            got = metrics[k]
            # nothing finite measured: not a pass (no value to compare), or a fail (NaN/Inf on one side only)
            why = nothing_measured(m.sums.shape, got) if got.empty else None
            passed = tol.judge(got)
            intro = m.introduced.introduced() if m.introduced is not None else None
            if intro is not None and got.empty and not intro.nonfinite_mismatch:
                intro = None  # nothing finite measured, and the layer put no NaN/Inf of its own: nothing to say
            if intro is not None and not plan.extras:  # as the pairs' metrics above
                intro = replace(intro, mean_abs=None, worst=None)
            results.append(PairResult(p, m.sums.shape, got, intro,
                                      passed, tol, why, pooled=m if labels is not None else None,
                                      kernel_ms=plan.kernel_ms.get(k)))
    return results, scaled


def assembled(plan, a: Side, b: Side, results: list[PairResult], scaled, measured: str, notes: list[str], in_graph: int,
              labels: list[str] | None = None) -> DiffResult:
    """The DiffResult of ``judged``'s ``results`` (sorted here) and criterion ``scaled``: ``plan`` (as ``judged``
    takes it) gives the matching, the selections, the criteria and the profile's summary."""
    results.sort(key=lambda r: (r.pair.a.index, r.pair.b.index))
    first = next((r for r in results if r.passed is False), None)
    outputs_failed = [r for r in results if r.passed is False and (r.pair.a.is_output or r.pair.b.is_output)]
    per_tensor = {n: scaled(t) for n, t in (plan.per_tensor or {}).items()}
    return DiffResult(a, b, results, plan.matching, plan.selected_b, first, outputs_failed, measured, notes,
                      criterion=criterion_words(scaled(plan.tolerance), per_tensor,
                                                integers=any(r.tolerance == EXACT_INTEGERS for r in results)),
                      per_tensor=per_tensor,
                      selected_a=plan.selected_a, profile=dict(plan.profile_summary) or None, in_graph=in_graph,
                      samples=len(labels) if labels is not None else None, labels=list(labels or []))


def _at_scale(plan: DiffPlan, metrics: dict[int, PairMetrics]):
    """Tolerance -> the same judged at the run's scale (``Tolerance.at_scale``: a relative atol, diff --grad's
    default, never of less than 1e-2 of the largest max|b| of the outputs it judges, the weight gradients
    that decide the verdict; of every pair where it judges no output), one scale per rule. (Not the
    activation gradients': a sum loss's dL/dy is 1 whatever the weights' gradients are.)"""
    scales: dict = {}
    for k, got in metrics.items():
        p = plan.report[k]
        t = plan.tolerance_of(p)
        if t.atol_relative and not got.empty:
            scales.setdefault(t, []).append((p.a.is_output or p.b.is_output, got.b_absmax))
    judged = {t: [v for out, v in each if out] or [v for _, v in each] for t, each in scales.items()}
    return lambda t: t.at_scale(judged.get(t, ()))


def criterion_words(tolerance: Tolerance, per_tensor: dict[str, Tolerance] | None, shown: int = 4,
                    integers: bool = False) -> str:
    """The criterion as the report's header and verdict say it: the overall rule and why, then the rules
    that judge named tensors instead (a row judged by its own rule read as judged by the header's); ``integers``:
    some pairs of integer tensors are judged exactly (``stats.metrics.EXACT_INTEGERS``), which it says too."""
    if integers:
        rest = criterion_words(tolerance, per_tensor, shown)
        return said(lambda say: f"{in_words(rest, say)}; integer tensors: a == b ({EXACT_INTEGERS.why})")
    if not per_tensor:
        return tolerance.describe()
    each = [f"{quote(n)} {t.rule}" for n, t in sorted(per_tensor.items())]
    more = lambda say: f"; and {len(each) - shown} more ({say.either('the result', '--json')}: per_tensor)" if len(each) > shown else ""  # noqa: E731
    return said(lambda say: f"{in_words(tolerance.describe(), say)}; per tensor: {'; '.join(each[:shown])}{more(say)}")


def _reject(matching: Matching, reject) -> None:
    kept = []
    for p in matching.pairs:
        why = reject(p) if p.strategy != "map" else None  # a pair the user gave is never second-guessed
        if why is None:
            kept.append(p)
        else:  # a reason, or (reason, cause)
            why, cause = why if isinstance(why, tuple) else (why, DIFFERENT_FUNCTION)
            matching.unmatched_a.append(Unmatched(p.a, f"{why} (the {p.strategy} match to {p.b.name!r} is refused)", cause))
            matching.unmatched_b.append(Unmatched(p.b, f"{why} (the {p.strategy} match to {p.a.name!r} is refused)", cause))
    matching.pairs[:] = kept


def _introduced_from_exact_inputs(results: list[PairResult], a: Side, b: Side, matched: set[str]) -> tuple[set, set] | None:
    """A pair whose B cone reads only tensors A holds exactly gets its accumulated error as its introduced
    one (``compare.introduced.exact_inputs``), whatever the cone measured. ``matched``: B's tensors of every
    float pair, a dynamic layer's too (``DiffPlan.by_b``), where the measured cones stop: the cone is walked to the
    same boundary, whatever the selection reports (walked to the reported pairs only, a MaxPool shown alone reached back to
    the graph input, which A holds exactly, and its 26.7 dB intro read 'exact' (QA)). Returns (B's tensors
    measured exact, those whose introduced error became their accumulated one), None where none could."""
    g = b.model.proto.graph  # a weight given as an output: no node, no cone measured, its difference its own
    weights = {t.name for t in g.initializer} - {o for n in g.node for o in n.output}
    with_intro = [r for r in results if (r.introduced is not None or r.pair.b.name in weights) and r.metrics is not None
                  and r.pair.b.kind == "float"]
    if not with_intro or not b.runner.takes_feeds:
        return None
    exact = {r.pair.b.name for r in results if r.metrics is not None and r.metrics.exact}
    types_a = {i.name: i.type.tensor_type.elem_type for i in a.model.proto.graph.input}
    same = {i.name for i in b.model.proto.graph.input if types_a.get(i.name) == i.type.tensor_type.elem_type}
    paired = set(matched) | {i.name for i in b.model.proto.graph.input}
    alike = exact_inputs(b.model.proto, [r.pair.b.name for r in with_intro], exact, paired, same)
    for r in with_intro:
        if r.pair.b.name in alike:
            r.introduced = IntroducedError.of(r.metrics)
    return exact, set(alike)
