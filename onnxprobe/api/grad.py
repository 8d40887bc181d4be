"""``grad``: attach a loss and a backward graph (``api.grad_plan``), run forward and backward in one
onnxruntime session with in-graph statistics of every gradient, and check them against finite
differences (the numerics are ``autodiff.check.check_gradients``)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np
import onnx

from onnxprobe.api.check_runs import check_run
from onnxprobe.api.grad_level import grad_config
from onnxprobe.api.grad_plan import GRAD_OPT_LEVEL, GradPlan, GradSpec, as_spec, grad_plan
from onnxprobe.api.inputs import ModelLike, Progress, as_progress, as_config, as_inputs, as_max_memory, as_model, as_result, as_selection, check_switches, checked_feed, of_model
from onnxprobe.autodiff import straight_through
from onnxprobe.autodiff.check import CheckItem, check_gradients, perturbable, to_float64
from onnxprobe.autodiff.constant_loss import INSTEAD, unjudged  # noqa: F401 (unjudged: re-exported)
from onnxprobe.autodiff.engine import shaped_types
from onnxprobe.autodiff.rounding import activations, downstream_max, rounding_model
from onnxprobe.autodiff.select import weight_value
from onnxprobe.compare.gradients import gradient_stops
from onnxprobe.fileio import checked_path
from onnxprobe.errors import ExecutionError, ModelError, UsageError, first_line, in_words, said
from onnxprobe.graph.constants import constants
from onnxprobe.graph.model import Model
from onnxprobe.graph.select import Selection
from onnxprobe.graph.shapes import infer_shapes
from onnxprobe.match.bodies import body_note, body_tensors, sealed_tensors
from onnxprobe.runtime import feeds as _feeds
from onnxprobe.runtime.budget import probe_within, raw_runs
from onnxprobe.runtime.npz import NpzWriter
from onnxprobe.runtime.runners import check_usable
from onnxprobe.runtime.runners.ort import OrtRunner
from onnxprobe.stats.tensor_stats import TensorStats
from onnxprobe.text import clip, quote, some
from onnxprobe.types import InputSpec, RunConfig, RunInfo, TensorRef, element_count


@dataclass
class GradRow:
    """One gradient: the tensor it is taken with respect to (``target``), the gradient's name in the backward
    model, its statistics, and the check's outcome when ``grad --check`` ran."""

    target: object  # onnxprobe.autodiff.select.Target
    grad: str  # the gradient tensor's name in the backward model
    stats: TensorStats | None
    value_norm: float | None  # |tensor| (weights, inputs, activations)
    check: dict | None = None  # finite-difference check: error, tolerance, ok
    shape: tuple | None = None  # the gradient's shape in the run (where the graph's own has symbolic dims)
    unjudged: str | None = None  # why the check did not judge it: the loss is constant in it (rounding noise)

    def __repr__(self) -> str:  # a notebook's view of `result.rows[i]`: the tensor and its gradient's numbers
        g = (lambda v: "None" if v is None else f"{v:.6g}")  # noqa: E731
        check = "" if self.check is None else f", check {'ok' if self.check.get('ok') else 'FAILED'}"
        return (f"GradRow({quote(clip(self.name, 80))} {self.target.kind}, norm={g(self.norm)}, ratio={g(self.ratio)}, "
                f"nan={None if self.stats is None else self.stats.nan}{check})")

    @property
    def name(self) -> str:
        return self.target.ref.name

    @property
    def norm(self) -> float | None:
        """The gradient's L2 norm: NaN where it holds a NaN, Inf where it holds an Inf (the statistics' own norm is
        of the finite values: an all-NaN gradient read 0.0)."""
        if self.stats is None:
            return None
        return math.nan if self.stats.nan else math.inf if self.stats.inf else self.stats.norm

    @property
    def ratio(self) -> float | None:
        if self.norm is None or not self.value_norm:
            return None
        return self.norm / self.value_norm


@dataclass
class GradResult:
    """What ``api.grad`` computed: the loss, one ``GradRow`` per wanted tensor (its gradient's statistics and,
    with a check, the finite-difference agreement), how it ran (``info``), notes, and the gradients
    themselves where asked for (``arrays``: forward tensor name -> gradient)."""

    plan: GradPlan
    rows: list[GradRow]
    loss: float
    info: RunInfo
    notes: list[str] = field(default_factory=list)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # forward tensor name -> gradient (save/check)
    check_mode: str | None = None  # "float64", "float64 (float32 gradients)" or "float32"
    samples: int | None = None  # a dataset's number of samples (api.grad_dataset); None: one input
    reduce: str | None = None  # a dataset's loss: "sum" or "mean" of the samples' losses
    executor: object = None  # a dataset's runtime.ray_pool.Executor
    check_asked: bool = False  # a check was asked for (``check_mode`` stays None where none could run)

    @property
    def checked(self) -> int:
        """Gradients compared with finite differences (``check=True``); 0 when the check compared nothing,
        which is no pass. A gradient finite differences cannot resolve (``unresolved_checks``) is not."""
        return sum(1 for r in self.rows if r.check is not None and r.check["ok"] is not None
                   and r.name != self.plan.loss.output)

    @property
    def loss_input_only(self) -> str | None:
        """The loss's own input (``loss.output``) when its gradient is the only one the check judged: dL/dy is the
        loss's formula (1 for a sum), so finite differences agree with it whatever the model's backward pass does:
        ``checked`` leaves it out, and a check of it alone judged nothing of the model. None otherwise."""
        judged = [r.name for r in self.rows if r.check is not None and r.check["ok"] is not None]
        return self.plan.loss.output if judged and not self.checked else None

    @property
    def failed_checks(self) -> list[str]:
        """The gradients the finite-difference check failed (by tensor name)."""
        return [r.name for r in self.rows if r.check is not None and r.check["ok"] is False]

    @property
    def constant_loss(self) -> str | None:
        """Why the check's verdict rests on nothing (``GradPlan.constant_despite``): the loss is constant, and no
        gradient it depends on all the same was judged; None otherwise, or without a check."""
        if self.check_mode is None:
            return None
        return self.plan.constant_despite(r.name for r in self.rows if r.check is not None and r.check["ok"] is not None)

    @property
    def unresolved_checks(self) -> list[str]:
        """The gradients finite differences cannot resolve, or cannot check at all (taken through a straight-through
        rounding: ``check["straight_through"]`` names it): no verdict, ``check["unresolved"]`` says why."""
        return [r.name for r in self.rows if r.check is not None and r.check["ok"] is None]

    @property
    def unchecked_why(self) -> str:
        """Why the check compared nothing (with ``checked`` empty): the gradients taken through a straight-through
        rounding, named by where, and those finite differences could not resolve; "" when no row says."""
        rounded = [r.name for r in self.rows if r.check is not None and r.check.get("straight_through")]
        loose = [n for n in self.unresolved_checks if n not in rounded]
        why = [(f"{len(rounded)} taken through a straight-through estimator (at "
                f"{straight_through.places(self.plan.rounded[n] for n in rounded)}): finite differences of rounded "
                "values cannot check them")] if rounded else []
        why += [f"not resolvable: {some(loose, form=str)}"] if loose else []
        return "; ".join(why)

    def verdict(self) -> tuple[str, str] | None:
        """The check's outcome, as ``DiffResult.verdict`` gives diff's: ("pass" | "fail" | "error", one line),
        None where no check was asked for. error: the loss is constant (its gradients are noise), or the check
        compared nothing (no gradient finite differences can check, a NaN loss); fail: a gradient failed it."""
        if not self.check_asked:
            return None
        failed = self.failed_checks
        failing = f"{len(failed)} gradient(s) failed the finite-difference check: {some(failed, 5, str)}"
        constant = self.constant_loss
        if constant:  # said first, as diff --grad does: what was judged depends on the loss trivially (dL/dy = 1)
            noise = sum(1 for r in self.rows if r.unjudged)
            return "error", said(lambda say: f"{say(('check', '--check'))} judged nothing meaningful: {constant}, so its "
                                 f"gradients are ~0 (rounding noise: {noise} shown, not judged); {in_words(INSTEAD, say)}"
                                 + (f" (and {failing})" if failed else ""))
        if failed:
            return "fail", failing
        if not self.checked:  # a check that compared nothing is no pass
            why, own = self.unchecked_why, self.loss_input_only
            own = (f"only the loss's own input {own!r} was compared, and its gradient is the loss's formula, not the "
                   "model's backward pass") if own else ""  # agreeing with it says nothing of the model
            return "error", said(lambda say: f"{say(('check', '--check'))} checked nothing: no selected gradient could be "
                                 "compared with finite differences" + (
                                     f" ({'; '.join(w for w in (own, why) if w)}{'; see the notes' if why else ''})" if why or own
                                     else "" if self.rows else " (no gradient was computed: see the notes)"))
        return "pass", f"{self.checked} gradient(s) agree with finite differences ({self.check_mode})"

    def __repr__(self) -> str:
        checked = [r.check for r in self.rows if r.check is not None]
        check = (f", checked in {self.check_mode}: {sum(1 for c in checked if c.get('ok'))} of {len(checked)} ok"
                 if checked else "")
        over = f" over {self.samples} samples ({self.reduce})" if self.samples is not None else ""
        return (f"GradResult({os.path.basename(str(self.plan.source))}: {self.plan.loss.kind} loss of "
                f"{self.plan.loss.output!r} = {self.loss:.6g}{over}, {len(self.rows)} gradients{check}"
                f"{f', {len(self.arrays)} saved' if self.arrays else ''})")


def value_norm(a) -> float:
    """|tensor| beside its gradient's norm: ``stats_norm`` of its statistics."""
    return stats_norm(TensorStats.from_array(np.asarray(a)))


def stats_norm(st: TensorStats) -> float:
    """|tensor| from its statistics, the same for weights, inputs and activations: NaN where it holds a NaN, else inf
    where it holds an infinity (as the report says a gradient's own norm), else the L2 norm (``TensorStats.norm``: at
    its scale, no overflow). An input holding NaN read nan where the same values as an activation read the norm of
    their finite part, and an activation of infinities alone read 0."""
    return float("nan") if st.nan else float("inf") if st.inf else st.norm


def constant_output_note(gp: GradPlan, rows: list) -> list[str]:
    """The note that the loss is a constant of the model (``GradPlan.constant_output``), where tensors still got a
    gradient (the Constant chain computing it): without rows the command's error says it instead."""
    return [f"the loss is a constant: {gp.constant_output}; the gradients shown are of the tensors computing it from "
            "constants, and no input or weight changes it"] if gp.constant_output and rows else []


def body_left_out(model: Model, selection: Selection | None, rows: list[GradRow]) -> list[str]:
    """The note naming the selected tensors inside If/Loop/Scan bodies, which get no gradient row (grad
    differentiates the main graph), or none."""
    inside = body_tensors(model.proto, selection or Selection())
    shown = {r.target.ref.name for r in rows}
    note = body_note({t: w for t, w in inside.items() if t not in shown}, "given a gradient row by grad",
                     sealed=sealed_tensors(model.proto))
    return [note] if note else []


def grad_probes(gp: GradPlan) -> tuple[list[TensorRef], list[TensorRef], onnx.ModelProto]:
    """(a ref per gradient, the activations whose gradients are asked, the backward model with the loss
    as its only output: the gradients leave the device as statistics, or raw when asked)."""
    bw = gp.backward
    refs = [TensorRef(name=bw.grads[t.ref.name], node=t.ref.node, op_type=t.ref.op_type, index=t.ref.index,
                      dtype=t.ref.dtype, shape=t.ref.shape, direction="backward", grad_of=t.ref.name) for t in gp.targets]
    acts = [t.ref for t in gp.targets if t.kind == "activation"]
    scored = onnx.ModelProto()
    scored.CopyFrom(bw.model)
    del scored.graph.output[1:]
    return refs, acts, scored


def grad(model: Model | str | os.PathLike, selection: Selection | None = None, config: RunConfig | None = None,
         spec: GradSpec | None = None, inputs: InputSpec | None = None, *, save: bool = False,
         save_to: str | os.PathLike | None = None, check: bool = False, progress: Progress | None = None,
         max_memory: int | None = None) -> GradResult:
    """What ``onnxprobe grad`` does: attach a loss and its backward graph, run forward and backward in
    one session and return the statistics of every gradient (and, with ``check``, their finite-
    difference check; ``progress(done, total)`` is called per gradient checked). ``model``: a Model, a path
    or a ModelProto; ``inputs``: an InputSpec or a dict of arrays by input name. The raw gradients (``save``,
    ``check``) come back at most ``max_memory`` bytes at once (default: a quarter of the available memory),
    in more runs when needed, as ``layers`` saves its tensors. ``save_to=FILE.npz`` streams the gradients
    to disk (keyed by the tensor each is the gradient of) as they come, none kept in ``result.arrays``
    unless ``save`` or ``check`` holds them anyway, as ``layers(save_to=)`` does."""
    check_switches("grad", save=save, check=check)
    max_memory, progress = as_max_memory(max_memory), as_progress(progress)
    spec, selection, inputs = as_spec(spec) or GradSpec(), as_selection(selection), as_inputs(inputs)
    config = as_config(config) or RunConfig(opt_level=GRAD_OPT_LEVEL)
    model = as_model(model)
    config, level_notes = grad_config(config, model.proto)
    check_usable("ort", config.device)  # CUDA not usable here: said before the backward graph is built
    fs = _feeds.make_feeds(model.proto, inputs)
    feed = fs.values
    with fs.explaining():  # the run that learns the shapes the backward graph needs fails as the main run would
        gp = grad_plan(model, spec, selection, feed=feed, cache=config.cache)
    refs, acts, scored = grad_probes(gp)
    raw = ({r.name for r in refs} | ({r.name for r in acts} if check else set())) if (save or check) else False
    if save_to is not None:
        checked_path(save_to, "save_to")
    runner = OrtRunner(scored, config, model.source, interruptible=True)
    runner.diagnose_with = model.proto
    try:
        result = probe_within(runner, refs + acts, {**feed, **gp.extra_feed}, raw or set(), max_memory)
    except ExecutionError as e:
        raise fs.explained(e) from e
    loss = float(np.asarray(result.outputs[gp.loss.loss]).reshape(-1)[0])
    rows, saved = [], {}
    for t, ref in zip(gp.targets, refs):
        name = t.ref.name
        if t.kind == "weight":
            v = weight_value(model.proto, name)
            vn = value_norm(v) if v is not None else None
        elif t.kind == "input":
            vn = value_norm(feed[name]) if name in feed else None
        else:
            st = result.stats.get(name)
            vn = stats_norm(st) if st is not None else None
        rows.append(GradRow(t, ref.name, result.stats.get(ref.name), vn, shape=result.shapes.get(ref.name)))
        if ref.name in result.arrays:
            saved[name] = result.arrays[ref.name]
    if save_to is not None:  # the gradients by the tensor each is of, in the rows' order: held, or fetched as they go
        named: dict[str, list[str]] = {}
        for t, ref in zip(gp.targets, refs):
            named.setdefault(ref.name, []).append(t.ref.name)
        with NpzWriter(save_to) as out:
            if save or check:
                out.add_all(saved)
            else:
                once = list({r.name: r for r in refs}.values())
                for part in raw_runs(runner, once, {**feed, **gp.extra_feed}, result, max_memory):
                    out.add_all({n: v for g, v in part.items() for n in named[g]})
                    del part
    notes = level_notes + list(fs.notes) + [n for n in result.notes if n not in fs.notes] + body_left_out(model, selection, rows)
    notes += _weights_stopped(model, gp, rows, selection, spec) + constant_output_note(gp, rows)
    res = GradResult(gp, rows, loss, result.info, notes, saved if (save or check) else {}, check_asked=check)
    if check and not np.isfinite(loss):  # every difference of a NaN or Inf loss is one: nothing can be checked
        res.notes.append(f"the loss is {loss} on these inputs: finite differences cannot check the gradients (give "
                         "inputs with a finite loss)")
    elif check:
        values = {a.name: result.arrays[a.name] for a in acts if a.name in result.arrays}
        res.check_mode = grad_check(model, gp, feed, res, device=result.info.device, seed=(inputs or InputSpec()).seed,
                                    values=values, progress=progress)
    return res


def grad_check(model: ModelLike, gp: GradPlan, feed: dict[str, np.ndarray], result: GradResult, *,
               device: str = "cpu", seed: int = 0, values: dict[str, np.ndarray] | None = None, progress: Progress | None = None) -> str:
    """Check each gradient in ``result`` against central finite differences of the loss (see
    ``autodiff.check.check_gradients``): float64 where onnxruntime has double kernels for every op of the
    forward graph, float32 otherwise. Fills ``row.check`` (``row.unjudged`` where the loss is constant in the
    tensor) and ``result.check_mode``, and returns the precision used;
    ``progress(done, total)`` is called per gradient checked."""
    model, progress = as_model(model), as_progress(progress)
    as_result(gp, GradPlan, "the GradPlan of api.grad_plan", "gp")
    as_result(result, GradResult, "the result of api.grad")
    of_model(model, (t.ref.name for t in gp.targets), "gp")
    of_model(model, (r.target.ref.name for r in result.rows), "result")
    feed = checked_feed(model.proto, feed)
    result.check_asked = True
    with np.errstate(all="ignore"):  # inf / NaN in a degenerate model's losses make failed rows, not warnings
        result.check_mode = _grad_check(model, gp, feed, result, device=device, seed=seed, values=values, progress=progress)
    return result.check_mode


def _grad_check(model: Model, gp: GradPlan, feed: dict[str, np.ndarray], result: GradResult, *,
                device: str, seed: int, values: dict[str, np.ndarray] | None, progress: Progress | None = None) -> str:
    """``grad_check`` on checked arguments: the loss perturbed along each checkable gradient (``api.check_runs``),
    the rows' checks and the notes of what was not checked filled in; returns the precision used."""
    tensors = _checked_tensors(gp, result)
    run = check_run(gp, perturbable(gp.forward, gp.loss.loss, tensors), feed, tensors, device, result.notes)
    items, empty = _check_items(model, gp, feed, result, tensors, run.grads64, values)
    rounding = _loss_rounding(gp, run.base, device, run.mode, [it.name for it in items]) if items else None
    if isinstance(rounding, str):
        result.notes.append(f"the forward pass's rounding could not be read ({rounding}): a perturbation that a huge "
                            "intermediate absorbs may read FAIL")
        rounding = None
    checked = check_gradients(items, run.loss, run.mode, seed=seed, progress=progress, rounding=rounding)
    _shown_nonfinite(checked, result, run.grads64)
    _fill_checks(gp, result, checked, empty)
    return run.mode


def _checked_tensors(gp: GradPlan, result: GradResult) -> dict[str, tuple[int, list]]:
    """The tensors whose gradient the check can perturb along: those of the rows with a gradient array and a
    type in the forward graph, name -> (elem type, the gradient's shape)."""
    types = shaped_types(gp.forward)
    tensors = {}
    for row in result.rows:
        g = result.arrays.get(row.name)
        tp = types.get(row.name)
        if g is not None and tp is not None:
            tensors[row.name] = (tp.tensor_type.elem_type, list(g.shape))
    return tensors


def _check_items(model: Model, gp: GradPlan, feed: dict[str, np.ndarray], result: GradResult, tensors: dict,
                 grads64: dict[str, np.ndarray] | None, values: dict[str, np.ndarray] | None) -> tuple[list[CheckItem], list[str]]:
    """What finite differences judge (one CheckItem per row: the gradient, float64's where computed, the tensor's
    value and scale) and the rows with an empty gradient. Rows the loss is constant in get ``row.unjudged``,
    those behind a straight-through rounding an unresolved ``row.check``; neither is an item."""
    items, empty = [], []
    for row in result.rows:
        if gp.constant_in(row.name):  # rounding noise, which finite differences (flat) read as FAIL: not judged
            row.unjudged = unjudged([gp.constant_loss])
            continue
        if row.name not in tensors:
            continue
        if row.name in gp.rounded:  # a staircase's finite differences (0 or a jump) against the estimator's slope
            op, node = gp.rounded[row.name]
            row.check = {"ok": None, "error": None, "unresolved": straight_through.reason(node, op), "straight_through": node}
            continue
        g = (grads64 or {}).get(row.name, result.arrays[row.name]).astype(np.float64)
        if not g.size:  # no element to move: nothing to compare, so no verdict (it read "ok")
            empty.append(row.name)
            continue
        kind = row.target.kind
        val = weight_value(model.proto, row.name) if kind == "weight" else (
            values.get(row.name) if values else None) if kind == "activation" else feed.get(row.name)
        if val is not None and val.size:
            rms = float(np.sqrt(np.mean(np.square(val, dtype=np.float64))))
        else:
            rms = (row.value_norm / np.sqrt(max(g.size, 1))) if row.value_norm else 1.0
        # a weight's or an input's value is the tensor the check perturbs, bit for bit (float64: float32 promoted
        # exactly); an activation's was read from another run
        items.append(CheckItem(row.name, g, val, rms, exact=kind in ("weight", "input") and val is not None))
    return items, empty


def _fill_checks(gp: GradPlan, result: GradResult, checked: dict[str, dict], empty: list[str]) -> None:
    """The rows' ``check`` from ``checked``, and the notes of what the check could not judge: empty gradients,
    a loss flat along a failing one, straight-through estimators, gradients finite differences cannot resolve."""
    if empty:
        result.notes.append(f"not checked: {len(empty)} empty gradient(s), no element to compare "
                            f"({some(empty, form=str)})")
    for row in result.rows:
        if row.name in checked:
            row.check = checked[row.name]
    flat = [n for n, c in checked.items() if c["ok"] is False and c.get("flat")]
    if flat:
        result.notes.append(f"the loss did not change at all along {len(flat)} failing gradient(s) ({some(flat, form=str)}"
                            "), at any step: their true gradient is 0 (or below the "
                            "loss's rounding); a nonzero one is rounding left by a cancellation (a Softmax of identical "
                            "logits: the output does not depend on them) or a wrong rule")
    rounded = [r.name for r in result.rows if r.check is not None and r.check.get("straight_through")]
    if rounded:
        result.notes.append(f"not checked: {len(rounded)} gradient(s) taken through a straight-through estimator (at "
                            f"{straight_through.places(gp.rounded[n] for n in rounded)}): finite differences of rounded values "
                            f"cannot check them ({some(rounded, form=str)})")
    loose = [n for n, c in checked.items() if c["ok"] is None]
    if loose:
        result.notes.append(f"cannot check {len(loose)} gradient(s), not resolvable by finite differences: "
                            f"{some(loose, form=str)} ({checked[loose[0]]['unresolved']})")


def _shown_nonfinite(checked: dict[str, dict], result: GradResult, grads64: dict[str, np.ndarray] | None) -> None:
    """In float64 mode the check compares the float64 backward graph's gradients with finite differences, not
    the float32 ones the report shows: a shown gradient with NaN or Inf where the float64 one is finite
    (float32 overflow) fails, whatever the float64 gradient earned."""
    bad = []
    for name, c in checked.items():
        shown, g64 = result.arrays.get(name), (grads64 or {}).get(name)
        if shown is None or g64 is None or np.shape(shown) != np.shape(g64):
            continue
        lost = int(np.count_nonzero(~np.isfinite(shown) & np.isfinite(g64)))
        if lost and c["ok"] is not False:
            c.update(ok=False, error=None, nonfinite=lost)
            c.pop("unresolved", None)
            bad.append(name)
    if bad:
        result.notes.append(f"{len(bad)} gradient(s) fail --check as shown: NaN or Inf in the model's precision where the "
                            f"float64 gradient is finite (overflow): {some(bad, form=str)}")


def _weights_stopped(model: Model, gp: GradPlan, rows: list, selection: Selection | None, spec: GradSpec) -> list[str]:
    """A note where no weight gets a gradient though the model has weights and the default selection asked for
    them: the backward pass stops before every one (a QOperator model's integer ops: QLinearConv, QLinearSoftmax...),
    said with the ops where it stops; it showed the output's gradient alone, saying nothing. A QDQ model's weights
    are integer codes behind DequantizeLinear: where their gradients are (its outputs', which --wrt names)."""
    selection = selection or Selection()
    # --all too: it keeps every float weight, and a QDQ model has none (its weights' gradients are the
    # DequantizeLinear outputs', which --wrt names and diff --grad compares as weights)
    if spec.wrt or selection.names or selection.ops or any(r.target.kind == "weight" for r in rows):
        return []
    held = constants(model.proto.graph)  # weights in initializers or Constant nodes (as PP-OCR keeps them)
    if not any(i.data_type for i in held.values() if element_count(i.dims) > 1):
        return []
    stops = gradient_stops(gp.forward)
    if stops:
        return [f"no weight gets a gradient: the backward pass stops before every one, at {stops} (integer or "
                "quantized ops pass no gradient; a QDQ model gets quantization-aware gradients)"]
    dq = [n.output[0] for n in model.proto.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in held]
    return [f"no float weight: the model's {len(dq)} weights are quantized, integer codes each behind a DequantizeLinear; "
            f"their gradients are its outputs', which --wrt names ({some(dq, 2)})"] if dq else []


def _loss_rounding(gp: GradPlan, feed: dict[str, np.ndarray], device: str, mode: str, names: list[str]) -> dict | str:
    """The loss's rounding read from the forward pass, in the check's precision (``autodiff.rounding``): for each of
    ``names``, (eps x sqrt(sum (dL/dA * A)^2), A) for the float activation A downstream of it where that is largest
    (rounding A alone moves the loss that much, to first order): the same for a row whatever the selection. One
    extra run, whose outputs are one scalar per activation. Where it cannot be computed, why (one line)."""
    fwd = infer_shapes(to_float64(gp.forward) if mode.startswith("float64") else gp.forward)
    try:
        model, sums = rounding_model(fwd, gp.loss.seeds, activations(fwd))
        out, _ = OrtRunner(model, RunConfig(device=device)).execute(model, feed, list(sums.values()))
    except (ExecutionError, ModelError, UsageError) as e:
        return first_line(e)
    eps = float(np.finfo(np.float64 if mode.startswith("float64") else np.float32).eps)
    each = {t: eps * float(np.sqrt(np.asarray(out[s], np.float64).reshape(-1)[0])) for t, s in sums.items() if s in out}
    return downstream_max(fwd, {t: v for t, v in each.items() if np.isfinite(v)}, names)
