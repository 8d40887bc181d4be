"""Measuring a diff's pairs on one input: what ``diff`` does per feed, and a dataset per sample.

``prepare`` (in ``compare.diff``) fixes what is compared; ``measure`` runs it on one feed and returns,
per pair (by its position in the report), one sample's sums (``stats.pooled.PairSums``) of the
accumulated and of the introduced error. Both models in one graph when they can share one
(``compare.fused``, built once per plan and, for a dataset, run through one kept session); the pairs it
hands back go through chunked runs of each side, at most ``max_memory`` bytes of raw tensors alive at
once, measured on the tensors' device (runtime.device_metrics) or on the host in float64.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from onnx import TensorProto, helper

from onnxprobe.compare.fused import FusedGraph, NotMergeable, run
from onnxprobe.compare.fused_profile import profile
from onnxprobe.compare.fused_shapes import runtime_shapes
from onnxprobe.compare.fused_cache import build_cached
from onnxprobe.compare.introduced import build_cones, cone_inputs, run_cones
from onnxprobe.compare.plain_outputs import measure_plain, plain_pairs
from onnxprobe.compare.plain_outputs import note as plain_note
from onnxprobe.compare.sides import Side
from onnxprobe.compare.unordered import in_order
from onnxprobe.errors import ExecutionError, UsageError, first_line, settings_error
from onnxprobe.graph.builder import INTEGER_TYPES
from onnxprobe.graph.memo import ModelMemo, feed_key
from onnxprobe.graph.shapes import concrete_sizes
from onnxprobe.match.engine import Matching, Pair
from onnxprobe.text import quote
from onnxprobe.runtime.budget import default_budget, plan_chunks
from onnxprobe.stats.metrics import EXACT_INTEGERS, Tolerance
from onnxprobe.stats.host_sums import pair_sums
from onnxprobe.stats.pooled import PairSums


@dataclass
class DiffPlan:
    """What a diff compares and how (``compare.diff.prepare``): the same for every input it runs on."""

    a: Side
    b: Side
    tolerance: Tolerance
    per_tensor: dict[str, Tolerance] | None
    matching: Matching
    report: list[Pair]  # the pairs to measure, in the matching's order
    selected_b: set[str]
    # B probe -> its pair, for every pair whose B tensor is a float one (a dynamic layer's result too): cones stop there
    by_b: dict[str, Pair]
    with_cones: bool  # introduced error through B's cones
    replays: bool  # introduced error through B's runner replaying itself
    fuse: bool  # both models in one graph (compare.fused)
    max_memory: int | None = None
    device_metrics: bool | None = None
    notes: list[str] = field(default_factory=list)
    profile: bool = False  # time the one run under onnxruntime's profiler (one input: diff --profile)
    fused: FusedGraph | None = None  # built on the first run
    # the input shapes the one-run graph is built for (a dataset's first sample, whatever sample a worker
    # gets first: every process builds the same graph); None: the first run's own
    input_shapes: dict | None = None
    skip: set[int] = field(default_factory=set)  # pairs left out of it: their shapes differed at run time
    kernel_ms: dict[int, tuple[float | None, float | None]] = field(default_factory=dict)  # with profile: by pair
    profile_summary: dict = field(default_factory=dict)  # with profile: where the one run's time went
    selected_a: set[str] | None = None  # A's observables the selection picks (None: every one)
    floats: dict[str, tuple[int, int]] = field(default_factory=dict)  # inputs of two float types (same_values)
    memo: ModelMemo = field(default_factory=ModelMemo, repr=False)  # B's sizes by feed shapes, its cones by targets
    # what ``compare.diff.finish`` found of B's tensors measured exact, and of those whose introduced error became
    # their accumulated one (``_introduced_from_exact_inputs``): a served diff applies it again (``api.diff_direct``)
    exact_inputs: tuple[set, set] | None = None
    # pairs (positions in ``report``) whose order along an axis is unspecified (a sorted=0 TopK's outputs):
    # measured on the host, both sides sorted along it (``compare.unordered``)
    unordered: dict[int, int] = field(default_factory=dict)
    ran_alone: bool = False  # with no pair to measure: each side's model ran once on its own (``measure``)
    # pairs of outputs measured again on plain runs of the models (``compare.plain_outputs``); None: not decided yet
    plain: list[int] | None = None
    # the max relative error and mean |a-b| are reported (False: the one-run graph leaves them out and
    # ``compare.diff.finish`` reports None for them: ``compare.diff.prepare``)
    extras: bool = True
    # the comparison's default criterion (``compare.criteria.default_tolerance``), which ``tolerance`` and each
    # per-tensor rule were taken over: a served diff takes a request's own over it (``api.diff_direct``)
    default: Tolerance | None = None

    def tolerance_of(self, p: Pair) -> Tolerance:
        return criterion_of(p, self.tolerance, self.per_tensor)

    def rtol_of(self, p: Pair) -> float:
        return self.tolerance_of(p).measured_rtol


@dataclass
class Measured:
    """A pair's sums over the samples where both values were produced; the first sample where the two
    tensors' shapes differed (sample, A's shape, B's): then nothing is compared; ``in_graph``: measured
    by the one-run diff (on every sample, once merged)."""

    sums: PairSums | None = None
    intro: PairSums | None = None
    problem: tuple[int, list[int], list[int]] | None = None
    in_graph: bool = False

    def merge(self, o: "Measured") -> "Measured":
        def both(x: PairSums | None, y: PairSums | None) -> PairSums | None:
            return None if x is None and y is None else (x or PairSums()).merge(y or PairSums())

        problems = [p for p in (self.problem, o.problem) if p is not None]
        return Measured(both(self.sums, o.sums), both(self.intro, o.intro), min(problems) if problems else None,
                        self.in_graph and o.in_graph)

    @property
    def introduced(self) -> PairSums | None:
        """The introduced error's sums, when they cover every sample the pair was measured on."""
        if self.intro is None or self.sums is None or self.intro.samples != self.sums.samples:
            return None
        return self.intro


def criterion_of(p: Pair, tolerance: Tolerance, per_tensor: dict[str, Tolerance] | None) -> Tolerance:
    """The criterion that judges ``p`` in a diff judged by ``tolerance`` and ``per_tensor`` (``compare.diff.prepare``'s,
    each over the comparison's default): the user's rule for that tensor, else the diff's; a default one judges a
    pair of integer tensors exactly (``stats.metrics.EXACT_INTEGERS``)."""
    per = per_tensor or {}
    own = per.get(p.a.name) or per.get(p.b.name) or per.get(p.b.key)
    if own is not None:
        return own
    return EXACT_INTEGERS if tolerance.default and integers(p) else tolerance


def integers(p: Pair) -> bool:
    """The tensors of ``p`` hold integers (or booleans) as they are: not quantized codes (an Observable of another
    kind than "float" stands for the float values its codes dequantize to); one side's type may be unknown (0: a
    torch module's output, QA: an ArgMax off by one passed --vs-torch's rtol), not both."""
    sides = (p.a, p.b)
    return (all(o.kind == "float" and (o.elem_type in INTEGER_TYPES or not o.elem_type) for o in sides)
            and any(o.elem_type in INTEGER_TYPES for o in sides))


# the float types, narrowest first (the set graph.builder.FLOAT_TYPES has no order)
FLOATS = (TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.FLOAT, TensorProto.DOUBLE)


def same_values(feeds: dict[str, np.ndarray], floats: dict[str, tuple[int, int]]) -> dict[str, np.ndarray]:
    """``feeds`` whose inputs of two float types (``check_same_inputs``) hold values both types hold
    exactly: rounded to the narrower type and back (float16 values are float32 values), so that a float16
    model and its float32 original compute from the same numbers; each runner casts to its own type."""
    out = dict(feeds)
    for n, types in floats.items():
        if n in out and isinstance(out[n], np.ndarray):
            narrow = min(types, key=FLOATS.index)
            with np.errstate(over="ignore"):  # said below, not as numpy's RuntimeWarning
                rounded = out[n].astype(helper.tensor_dtype_to_np_dtype(narrow))
            over = np.isinf(rounded) & np.isfinite(out[n])
            if over.any():  # both models would run on Inf where the values were finite: nothing compared, or a false pass
                kind = TensorProto.DataType.Name(narrow).lower()
                raise UsageError(f"input {quote(n)} holds {int(over.sum())} value(s) beyond {kind}'s range (e.g. "
                                 f"{float(out[n][over].flat[0]):g}), which the {kind} model "
                                 f"({'A' if types[0] == narrow else 'B'}) takes: both would run on Inf there; give "
                                 f"inputs {kind} holds")
            out[n] = rounded.astype(out[n].dtype)
    return out


def measure(plan: DiffPlan, feeds: dict[str, np.ndarray], *, sample: int = 0, progress=None,
            key=None) -> dict[int, Measured]:
    """One sample's measurements of every pair of ``plan.report`` on ``feeds``. ``key``: keep the
    sessions (the one-run diff's, the chunks' and the cones') for the next call under it (a dataset's
    samples)."""
    out: dict[int, Measured] = {}
    if not plan.report:
        _run_alone(plan, feeds)
        return out
    done_in_one = 0
    feeds = same_values(feeds, plan.floats) if plan.floats else feeds
    # an empty feed makes empty tensors, over which the merged graph's ArgMax / ReduceMax rows cannot run:
    # that sample goes through the host path, which measures empty pairs (as nothing compared)
    if plan.fuse and not any(np.size(v) == 0 for v in feeds.values()):
        got = _fused(plan, feeds, sample, key)
        if got is not None:
            out.update({k: Measured(s, got.introduced.get(k), in_graph=True) for k, s in got.sums.items()})
            out.update({k: Measured(problem=(sample, sa, sb), in_graph=True) for k, (sa, sb) in got.problems.items()})
            done_in_one = int(bool(out))
    todo = [k for k in range(len(plan.report)) if k not in out]
    if plan.plain is None:
        plan.plain = plain_pairs(plan)
    if not todo:
        if progress is not None and done_in_one:
            progress(1, 1)
        return _plain(plan, feeds, out, sample)
    a, b, by_b = plan.a, plan.b, plan.by_b
    report = [plan.report[k] for k in todo]
    targets = [p.b.probe for p in report if p.b.kind == "float"]
    boundaries = cone_inputs(b.runner.model, targets, set(by_b), built=_cones(plan, targets)) if plan.with_cones else {}
    sizes = plan.memo.get(b.model.proto, ("sizes", feed_key(feeds)),
                          lambda: concrete_sizes(b.model.proto, {k: v.shape for k, v in feeds.items()}))
    cost = {id(p): 2 * sizes.get(p.b.key, sizes.get(p.b.name, 0)) for p in plan.matching.pairs}
    chunks = plan_chunks([(str(k), cost[id(p)] + sum(cost[id(by_b[x])] for x in boundaries.get(p.b.probe, ())))
                          for k, p in enumerate(report)], (plan.max_memory or default_budget()) // 2)
    if progress is not None and done_in_one:
        progress(1, 1 + len(chunks))
    key = key if len(chunks) == 1 else None  # sessions kept for one chunk only: several would hold the model each
    for n, chunk in enumerate(chunks):
        ks = [todo[int(k)] for k in chunk]
        pairs = [plan.report[k] for k in ks]
        extra = [by_b[x] for p in pairs for x in boundaries.get(p.b.probe, ())]
        need_a = list({id(o): o for o in [p.a for p in pairs] + [q.a for q in extra]}.values())
        # B exposes the counterparts of what A exposes for the cones too: a compiled runtime's rounding moves with what a
        # run exposes (OpenVINO in bf16), and a model against itself, run alike, read 53 of 55 pairs failing
        need_b = list({id(o): o for o in [p.b for p in pairs] + [q.b for q in extra]}.values())
        values_a = a.values(need_a, feeds, keep_on_device=_on_device(a, plan.device_metrics), key=key)
        values_b = b.values(need_b, feeds, keep_on_device=_on_device(b, plan.device_metrics), key=key)
        part = {k: _measure(plan, k, values_a, values_b, sample) for k in ks}
        if plan.with_cones:
            _introduced(plan, part, values_a, feeds, sample, key)
        elif plan.replays:
            _replayed(plan, part, values_a, feeds, sample)
        out.update(part)
        del values_a, values_b
        if progress is not None:
            progress(n + 1 + done_in_one, len(chunks) + done_in_one)
    return _plain(plan, feeds, out, sample)


def _plain(plan: DiffPlan, feeds: dict, out: dict[int, Measured], sample: int) -> dict[int, Measured]:
    """``out``, the outputs' rows of a half-precision side on the CPU measured on plain runs (``compare.plain_outputs``)."""
    if plan.plain:
        changed = measure_plain(plan, feeds, out, sample, sums_of)
        if changed and (why := plain_note(changed)) not in plan.notes:
            plan.notes.append(why)
    return out


def _run_alone(plan: DiffPlan, feeds: dict) -> None:
    """A plan with no pair to measure (the models' outputs hold no numbers: strings; saved values of no tensor
    A observes) still runs each side's model once, as it is, on ``feeds`` (once per plan): a side its runtime
    cannot load or run is then the diff's error, named with its side and file (``NamedRunner``), not a "nothing
    was compared" that hides it (QA: onnx's strnormalizer node tests, a locale onnxruntime refuses)."""
    if plan.ran_alone:
        return
    for side in (plan.a, plan.b):
        if side.runs_graphs and side.runner.takes_feeds:
            side.runner.probe([], feeds, stats=False, shapes=False)
    plan.ran_alone = True


def _fused(plan: DiffPlan, feeds: dict, sample: int, key):
    """The one run of both models (``compare.fused``). A pair whose shapes differ at run time in a way
    the graph's rows cannot take fails that run: the pairs whose shapes differ are then found in a run of
    their shapes alone, left out of the graph (their rows and the cones that would read A's value in place
    of B's), and the graph built again; those pairs are not compared on this input, and on the next ones
    (a dataset's) they go through the separate runs, which measure them where their shapes agree."""
    differ: dict[int, tuple[list[int], list[int]]] = {}
    while True:
        if plan.fused is None:
            try:
                plan.fused = build_cached(plan.a, plan.b, plan.report, plan.by_b, plan.rtol_of, plan.with_cones,
                                          plan.input_shapes or {n: tuple(np.shape(v)) for n, v in feeds.items()},
                                          frozenset(plan.skip | set(plan.unordered)), plan.extras,
                                          fixed=plan.input_shapes is None)  # a dataset's samples may have other shapes
            except NotMergeable as e:  # measured in separate runs: said, as the JSON's in_graph 0 is not explained
                if plan.profile:  # nothing has run yet: --profile has no one run to time (as --separate-runs)
                    apart = str(e)
                    raise settings_error(UsageError, lambda say: f"{say.either('profile', '--profile')} times diff's one "
                                         f"run of both models: these run apart ({apart})") from e
                plan.fuse, plan.extras = False, True  # separate runs measure every metric: all reported
                why = f"the models run apart, not as one graph ({e}): the same numbers, more time"
                if why not in plan.notes:
                    plan.notes.append(why)
                return None
            plan.notes.extend(n for n in plan.fused.notes if n not in plan.notes)
        # a graph built again is another session than the one kept under ``key``
        run_key = key if key is None or not plan.skip else (key, tuple(sorted(plan.skip)))
        try:
            got = run(plan.a, plan.fused, feeds, plan.report, sample, run_key, plan.rtol_of, plan.tolerance_of)
            if plan.profile:
                profile(plan.a, plan.b, plan.fused, feeds, plan.report, got)
                plan.kernel_ms.update(got.profile)
                plan.profile_summary.update(got.profile_summary)
            got.problems.update(differ)
            return got
        except ExecutionError as e:
            failed = e
        try:
            found = runtime_shapes(plan.a, plan.fused, feeds)
        except ExecutionError:
            found = {}
        if not found:
            break
        differ.update(found)
        plan.skip |= set(found)
        plan.fused = None
    if plan.profile:  # (as where the models run apart from the start: no one run to time, never a silent drop)
        why = first_line(failed)
        raise settings_error(UsageError, lambda say: f"{say.either('profile', '--profile')} times diff's one run of both "
                             f"models, which failed ({why}); without it they are measured in separate runs") from failed
    plan.notes.append(f"the one-run diff failed ({first_line(failed)}); measured in separate runs")
    plan.fuse, plan.extras = False, True  # as above
    return None


def _on_device(side: Side, forced: bool | None) -> bool:
    if side.runner.kind != "onnxruntime":
        return False
    return forced if forced is not None else side.runner.device == "cuda"


def shape_of(v) -> tuple[int, ...]:
    return tuple(v.shape()) if hasattr(v, "element_type") else tuple(v.shape)


def sums_of(va, vb, rtol: float, sample: int = 0, light: bool = False, tolerance: Tolerance | None = None) -> PairSums:
    """One sample's sums where the values are: on their device when both are OrtValues of one device,
    else numpy (float64). ``light``: an introduced error's (``stats.pooled``); ``tolerance``: the pair's
    criterion, whose threshold the device's float32 excess or quotient may be too near to decide
    (``Tolerance.near_float32_threshold``: then numpy's)."""
    on_a, on_b = hasattr(va, "element_type"), hasattr(vb, "element_type")
    if on_a and on_b and va.device_name() == vb.device_name() and va.element_type() == vb.element_type() == "tensor(float)":
        from onnxprobe.runtime.device_metrics import sums_on_device

        s = sums_on_device(va, vb, shape_of(va), "cuda" if va.device_name().lower() == "cuda" else "cpu", rtol, sample)
        if s is not None and (light or tolerance is None
                              or not tolerance.near_float32_threshold(s.max_abs, s.b_absmax, s.excess, s.max_rel)):
            return s.as_introduced() if light else s
    return pair_sums(va.numpy() if on_a else va, vb.numpy() if on_b else vb, rtol, sample, light)


def _measure(plan: DiffPlan, k: int, values_a: dict, values_b: dict, sample: int) -> Measured:
    p = plan.report[k]
    va, vb = values_a.get(p.a.probe), values_b.get(p.b.probe)
    if va is None or vb is None:
        return Measured()  # not produced (a branch not taken)
    sa, sb = shape_of(va), shape_of(vb)
    if sa != sb:
        return Measured(problem=(sample, list(sa), list(sb)))
    if k in plan.unordered:  # an order the spec leaves open: the two multisets along that axis are compared
        va, vb = in_order(va, plan.unordered[k]), in_order(vb, plan.unordered[k])
    sums = sums_of(va, vb, plan.rtol_of(p), sample, tolerance=plan.tolerance_of(p))
    if sums.mismatch:
        _infinities_lost(plan, va, vb)
    return Measured(sums)


def _infinities_lost(plan: DiffPlan, va, vb) -> None:
    """A side that computes float64 in float32 (``Runner.float64_in_float32``) is told where one of its float64
    tensors is finite at a position the other side holds +-inf: float32 saturated there, which its note says
    (a NaN/Inf mismatch it explains); a float64 model with no such position gets no word more."""
    for side, mine, other in ((plan.a, va, vb), (plan.b, vb, va)):
        if not side.runner.float64_in_float32 or hasattr(mine, "element_type") or np.asarray(mine).dtype != np.float64:
            continue
        other = other.numpy() if hasattr(other, "element_type") else np.asarray(other)
        if other.dtype.kind == "f" and (np.isinf(other) & np.isfinite(mine)).any():
            side.runner.infinities_lost()


def _introduced(plan: DiffPlan, part: dict[int, Measured], values_a: dict, feeds, sample: int, key=None) -> None:
    by_b = plan.by_b
    known = {x: values_a[q.a.probe] for x, q in by_b.items() if q.a.probe in values_a}
    measured = {k: m for k, m in part.items() if m.sums is not None}
    targets = [plan.report[k].b.probe for k in measured if plan.report[k].b.kind == "float"]
    failed: list[tuple[str, Exception]] = []
    cone_out = _run_cones_apart(plan, targets, known, feeds, key, failed)
    if failed:  # the accumulated numbers still stand; so do the other cones' (one cone failing lost them all)
        name, e = failed[0]
        more = f" and {len(failed) - 1} more" if len(failed) > 1 else ""
        plan.notes.append(f"introduced error not computed for {quote(name)}{more}: {first_line(e)[:200]}")
    _fill(plan, measured, cone_out, values_a, sample)


def _run_cones_apart(plan: DiffPlan, targets: list[str], known: dict, feeds, key, failed: list) -> dict:
    """``run_cones`` of ``targets``; where the run fails (B's nodes fed A's values can fail: a GatherND index
    that A's tensor holds differently), the halves apart, down to the cones that fail alone (``failed``)."""
    if not targets:
        return {}
    b = plan.b
    try:
        return run_cones(b.runner, targets, known, feeds, all_known=set(plan.by_b), keep_on_device=_on_device(b, plan.device_metrics),
                         key=key, built=_cones(plan, targets))
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - split, so that one cone does not take the others with it
        if len(targets) == 1:
            failed.append((targets[0], e))
            return {}
    half = len(targets) // 2  # each half's session kept under its own targets (run_cones' key), for the next sample
    return {**_run_cones_apart(plan, targets[:half], known, feeds, key, failed),
            **_run_cones_apart(plan, targets[half:], known, feeds, key, failed)}


def _cones(plan: DiffPlan, targets: list[str]) -> tuple:
    """``introduced.build_cones`` of B's cones to ``targets``, made once per plan and target list."""
    model = plan.b.runner.model
    return plan.memo.get(model, ("cones", tuple(targets)), lambda: build_cones(model, targets, set(plan.by_b)))


def _replayed(plan: DiffPlan, part: dict[int, Measured], values_a: dict, feeds, sample: int) -> None:
    """Introduced error where B recomputes itself with A's values in place (``Runner.replay``): each
    B value computed from A's values of the pairs measured with it."""
    measured = {k: m for k, m in part.items() if m.sums is not None}
    pairs = [plan.report[k] for k in measured]
    known = {p.b.probe: values_a[p.a.probe] for p in pairs if p.a.probe in values_a}
    try:
        got = plan.b.runner.replay([p.b.probe for p in pairs], known, feeds)
    except Exception as e:  # noqa: BLE001 - the accumulated numbers still stand
        plan.notes.append(f"introduced error not computed: {first_line(e)[:200]}")
        return
    _fill(plan, measured, got, values_a, sample)


def _fill(plan: DiffPlan, measured: dict[int, Measured], refs: dict, values_a: dict, sample: int) -> None:
    for k, m in measured.items():
        p = plan.report[k]
        ref, va = refs.get(p.b.probe), values_a.get(p.a.probe)
        if ref is not None and va is not None and shape_of(ref) == shape_of(va):
            if k in plan.unordered:
                ref, va = in_order(ref, plan.unordered[k]), in_order(va, plan.unordered[k])
            m.intro = sums_of(va, ref, plan.rtol_of(p), sample, light=True)
