"""``diff``: run two sides on the same inputs, pair their tensors, measure, and find where error starts."""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field

import numpy as np

from onnxprobe.compare.introduced import cone_inputs, run_cones
from onnxprobe.graph.shapes import concrete_sizes
from onnxprobe.runtime.budget import default_budget, plan_chunks
from onnxprobe.runtime.session import resolve_device
from onnxprobe.compare.sides import Side
from onnxprobe.errors import UsageError, first_line
from onnxprobe.graph.select import DEFAULT_OPS, Selection, parse_range
from onnxprobe.match.engine import Matching, Pair, match
from onnxprobe.match.observe import Observable
from onnxprobe.match.ops import canonical
from onnxprobe.runtime.feeds import input_specs
from onnxprobe.stats.metrics import PairMetrics, Tolerance, compare

DEFAULT_CANONICAL = {canonical(o) for o in DEFAULT_OPS}


@dataclass
class PairResult:
    pair: Pair
    shape: tuple[int, ...] | None
    metrics: PairMetrics | None
    introduced: PairMetrics | None
    passed: bool | None
    tolerance: Tolerance
    problem: str | None = None  # why no metrics (shapes differ at run time, value missing)


@dataclass
class DiffResult:
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


def selected(o: Observable, sel: Selection, lo_hi: tuple[int, int] | None = None) -> bool:
    if lo_hi and not lo_hi[0] <= o.index <= lo_hi[1]:
        return False
    if sel.all or (sel.range and sel.is_default):
        return True
    if sel.is_default:
        return o.is_output or canonical(o.effective_op) in DEFAULT_CANONICAL
    if o.is_output:
        return True
    if o.op_type in sel.ops or o.effective_op in sel.ops or canonical(o.effective_op) in sel.ops:
        return True
    return any(fnmatch.fnmatchcase(x, g) for g in sel.names for x in (o.name, o.key, o.node))


def _range(sel: Selection, obs: list[Observable]) -> tuple[int, int] | None:
    return parse_range(sel.range, {o.node: o.index for o in obs}, 1 << 30) if sel.range else None


def check_inputs(a: Side, b: Side) -> None:
    if b.kind != "ort" and b.kind != "reference":
        return
    sa = {s.name: s for s in input_specs(a.model.proto)}
    sb = {s.name: s for s in input_specs(b.model.proto)}
    if set(sa) != set(sb):
        raise UsageError(f"the models take different inputs: A {sorted(sa)}, B {sorted(sb)}; both run on the same feeds")
    for n in sa:
        if sa[n].elem_type != sb[n].elem_type:
            raise UsageError(f"input {n}: dtype {sa[n].dtype} in A but {sb[n].dtype} in B")


def measured_label(a: Side, b: Side) -> str:
    kinds = {o.kind for o in a.observation.observables}
    integer_ops = bool(kinds & {"qoperator", "dynamic"})
    if "qdq" in kinds:
        if a.kind == "ort" and a.config.opt_level in ("extended", "layout", "all"):
            return f"deployed: onnxruntime's int8 kernels (QDQ fused at opt-level {a.config.opt_level})"
        if integer_ops:
            return "deployed: integer operators as written; its QDQ pairs are simulated (opt-level off)"
        return "simulated: the QDQ graph as written, not fused (use --opt-level extended for the deployed int8 kernels)"
    if integer_ops:
        return "deployed: the integer operators as written"
    return "float"


def diff(a: Side, b: Side, feeds: dict[str, np.ndarray], selection: Selection, tolerance: Tolerance,
         per_tensor: dict[str, Tolerance] | None = None, user_map: dict[str, str] | None = None,
         introduced: bool = True, max_memory: int | None = None, progress=None,
         device_metrics: bool | None = None) -> DiffResult:
    """Pairs are measured in chunks: each chunk runs both sides exposing only its own tensors (and the
    A values that its introduced-error cones start from), so at most ``max_memory`` bytes of raw tensors
    are alive at once (default: a quarter of the available memory). Tensors produced on a GPU stay
    there and their metrics are computed there (runtime.device_metrics): only scalars reach the host.
    ``device_metrics`` forces that path on or off (default: on for CUDA sides)."""
    check_inputs(a, b)
    for side in (a, b):
        if side.kind == "ort":
            side.device = resolve_device(side.config.device)
    obs_a, obs_b = a.observation.observables, b.observation.observables
    lo_hi = _range(selection, obs_a)
    matching = match(obs_a, obs_b, user_map)
    report = [p for p in matching.pairs if selected(p.a, selection, lo_hi) or selected(p.b, selection)]
    with_cones = introduced and b.kind == "ort"
    by_b = {p.b.probe: p for p in matching.pairs if p.b.kind == "float"}
    boundaries = cone_inputs(b.model.inferred, [p.b.probe for p in report if p.b.kind == "float"], set(by_b)) if with_cones else {}
    sizes = concrete_sizes(b.model.inferred, {k: v.shape for k, v in feeds.items()})
    cost = {id(p): 2 * sizes.get(p.b.key, sizes.get(p.b.name, 0)) for p in matching.pairs}
    chunks = plan_chunks([(str(k), cost[id(p)] + sum(cost[id(by_b[x])] // 2 for x in boundaries.get(p.b.probe, ())))
                          for k, p in enumerate(report)], (max_memory or default_budget()) // 2)
    notes: list[str] = []
    results: list[PairResult] = []
    for n, chunk in enumerate(chunks):
        pairs = [report[int(k)] for k in chunk]
        extra = [by_b[x] for p in pairs for x in boundaries.get(p.b.probe, ())]
        need_a = list({id(p.a): p.a for p in pairs + extra}.values())
        values_a = a.values(need_a, feeds, keep_on_device=_on_device(a, device_metrics))
        values_b = b.values([p.b for p in pairs], feeds, keep_on_device=_on_device(b, device_metrics))
        part = [_measure(p, values_a, values_b, _tolerance(p, tolerance, per_tensor)) for p in pairs]
        if with_cones:
            _introduced(part, b, values_a, by_b, feeds, notes, keep_on_device=_on_device(b, device_metrics))
        results += part
        del values_a, values_b
        if progress is not None:
            progress(n + 1, len(chunks))
    notes[:0] = list(a.notes) + list(b.notes)
    results.sort(key=lambda r: (r.pair.a.index, r.pair.b.index))
    first = next((r for r in results if r.passed is False), None)
    outputs_failed = [r for r in results if r.passed is False and (r.pair.a.is_output or r.pair.b.is_output)]
    sel_b = {o.name for o in obs_b if selected(o, selection)}
    _explain_folded(matching, b.model.inferred)
    return DiffResult(a, b, results, matching, sel_b, first, outputs_failed, measured_label(a, b), list(dict.fromkeys(notes)))


def _explain_folded(matching: Matching, model_b) -> None:
    """An unmatched B tensor whose only consumer's output is matched was fused away in A (Conv+BN folding,
    a Relu dropped by the quantizer...): say so instead of 'no counterpart'."""
    consumers: dict[str, list] = {}
    for n in model_b.graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    matched_b = {p.b.name for p in matching.pairs}
    for u in matching.unmatched_b:
        if not u.reason.startswith("no counterpart"):
            continue
        cs = consumers.get(u.obs.name, [])
        if len(cs) == 1 and cs[0].output and cs[0].output[0] in matched_b:
            u.reason = f"folded into {cs[0].op_type} {cs[0].output[0]!r} in A (compared there)"


def _tolerance(p: Pair, default: Tolerance, per_tensor: dict[str, Tolerance] | None) -> Tolerance:
    per = per_tensor or {}
    return per.get(p.a.name) or per.get(p.b.name) or per.get(p.b.key) or default


def _on_device(side: Side, forced: bool | None) -> bool:
    if side.kind != "ort":
        return False
    return forced if forced is not None else side.device == "cuda"


def _shape(v) -> tuple[int, ...]:
    return tuple(v.shape()) if hasattr(v, "element_type") else tuple(v.shape)


def pair_metrics(va, vb, rtol: float) -> PairMetrics:
    """Metrics where the values are: on their device when both are OrtValues of one device, else numpy."""
    on_a, on_b = hasattr(va, "element_type"), hasattr(vb, "element_type")
    if on_a and on_b and va.device_name() == vb.device_name() and va.element_type() == vb.element_type() == "tensor(float)":
        from onnxprobe.runtime.device_metrics import compare_on_device

        m = compare_on_device(va, vb, _shape(va), "cuda" if va.device_name().lower() == "cuda" else "cpu", rtol)
        if m is not None:
            return m
    return compare(va.numpy() if on_a else va, vb.numpy() if on_b else vb, rtol)


def _measure(p: Pair, values_a: dict, values_b: dict, tol: Tolerance) -> PairResult:
    va, vb = values_a.get(p.a.probe), values_b.get(p.b.probe)
    if va is None or vb is None:
        return PairResult(p, None, None, None, None, tol, "value not produced")
    sa, sb = _shape(va), _shape(vb)
    if sa != sb:
        return PairResult(p, None, None, None, False, tol, f"shapes differ at run time: {list(sa)} vs {list(sb)}")
    m = pair_metrics(va, vb, tol.rtol)
    return PairResult(p, sa, m, None, tol.passes(m), tol)


def _introduced(part: list[PairResult], b: Side, values_a: dict, by_b: dict, feeds, notes: list[str],
                keep_on_device: bool = False) -> None:
    known = {x: values_a[q.a.probe] for x, q in by_b.items() if q.a.probe in values_a}
    targets = [r.pair.b.probe for r in part if r.metrics is not None and r.pair.b.kind == "float"]
    try:
        cone_out = run_cones(b.model.inferred, targets, known, feeds, device=b.device or "cpu",
                             opt_level=b.config.opt_level, all_known=set(by_b), keep_on_device=keep_on_device)
    except Exception as e:  # noqa: BLE001 - the accumulated numbers still stand
        notes.append(f"introduced error not computed: {first_line(e)[:200]}")
        return
    for r in part:
        ref = cone_out.get(r.pair.b.probe)
        va = values_a.get(r.pair.a.probe)
        if ref is not None and va is not None and _shape(ref) == _shape(va):
            r.introduced = pair_metrics(va, ref, r.tolerance.rtol)


def sort_results(results: list[PairResult], key: str) -> list[PairResult]:
    if key == "topo":
        return list(results)

    def sq(m: PairMetrics | None) -> float:
        return m.sqnr_db if m is not None and math.isfinite(m.sqnr_db) else math.inf

    if key == "accumulated":
        return sorted(results, key=lambda r: sq(r.metrics))
    if key == "introduced":
        return sorted(results, key=lambda r: sq(r.introduced))
    raise UsageError(f"--sort {key!r}: choose introduced, accumulated or topo")
