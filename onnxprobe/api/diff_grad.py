"""``diff_grad``: the gradients of two models compared (``onnxprobe diff --grad``), or of a model and
torch autograd's (``api.torch``), through the diff's matching and metrics (``compare.gradients``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

import numpy as np
import onnx

from onnxprobe.api import hints  # annotations only (hints.GradSpec: typing.get_type_hints imports it when asked)
from onnxprobe.api.diff import checked_arguments
from onnxprobe.api.grad_level import grad_config
from onnxprobe.api.inputs import Progress, TorchLike, as_progress, as_max_memory, as_model, check_map
from onnxprobe.compare.constant_loss import judge_constant_loss
from onnxprobe.compare.criteria import check_feed_shapes, check_same_inputs, chosen, gradient_tolerance, unread_note
from onnxprobe.compare.result import DiffResult, gradient_origin
from onnxprobe.compare.diff import diff as _diff
from onnxprobe.compare.sides import load_notes, who_of
from onnxprobe.errors import UsageError, settings_error
from onnxprobe.graph.constants import constants
from onnxprobe.graph.model import Model
from onnxprobe.graph.rnn_states import initial_states
from onnxprobe.graph.select import Selection
from onnxprobe.match.engine import MAP
from onnxprobe.match.observe import observe
from onnxprobe.runtime import feeds as _feeds
from onnxprobe.runtime.runners.named import naming
from onnxprobe.runtime.runners import check_usable
from onnxprobe.runtime.runners.ort import OrtRunner
from onnxprobe.stats.metrics import Tolerance
from onnxprobe.text import quote
from onnxprobe.types import InputSpec, RunConfig, element_count, forward_name, grad_name


def diff_grad(
    a: Model | str | os.PathLike,
    b: Model | str | os.PathLike | None = None,
    spec: hints.GradSpec | None = None,
    *,
    vs_torch: TorchLike | None = None,
    selection: Selection | None = None,
    config: RunConfig | None = None,
    inputs: InputSpec | None = None,
    tolerance: Tolerance | None = None,
    per_tensor: dict | None = None,
    user_map: dict[str, str] | None = None,
    max_memory: int | None = None,
    progress: Progress | None = None,
) -> DiffResult:
    """Compare the gradients of model A with those of model B (``onnxprobe diff --grad``): both get the
    loss ``spec`` and the same inputs; their weight, input and activation gradients are paired by the
    diff matching (names, QDQ / QOperator keys, node names, structure; see compare.gradients) and measured
    with the diff metrics. ``spec.wrt`` (names or globs of forward tensors) keeps only those gradients;
    ``user_map`` and ``per_tensor`` take forward tensor names (or gradient names). A weight gradient that
    fails the tolerance fails the comparison (``outputs_failed``). ``vs_torch`` instead of B: torch
    autograd on the module A was exported from (``api.diff_grad_torch``)."""
    # backward graphs only here: a plain diff does not import the autodiff engine
    from onnxprobe.api.grad_plan import GRAD_OPT_LEVEL, GradSpec, as_spec

    if (b is None) == (vs_torch is None):
        raise settings_error(UsageError, lambda say: say.either(
            "diff_grad compares two models: give b (the reference model) or vs_torch (one of them)",
            "diff --grad compares two models: give the reference model B or --vs-torch (one of them)"))
    spec = as_spec(spec)
    check_map(user_map)
    selection, config, inputs, tolerance, per_tensor = checked_arguments(selection, config, inputs, tolerance, per_tensor)
    one_tensor_once(per_tensor, "per_tensor")
    max_memory, progress = as_max_memory(max_memory), as_progress(progress)
    if vs_torch is not None:
        return _vs_torch(a, vs_torch, spec, user_map, selection=selection, config=config, inputs=inputs,
                         tolerance=tolerance, per_tensor=per_tensor, max_memory=max_memory, progress=progress)
    spec = spec or GradSpec()
    config = config or RunConfig(opt_level=GRAD_OPT_LEVEL)
    a_model, b_model = as_model(a), as_model(b, "b")
    config, level_notes = grad_config(config, a_model.proto, b_model.proto)
    check_usable("ort", config.device)  # CUDA not usable here: said before the backward graphs are built
    _refuse_other_floats(a_model, b_model)
    fs = _feeds.make_feeds(a_model.proto, inputs)
    with fs.explaining():  # a run on made-up inputs that fails says which inputs were made up
        check_feed_shapes({k: np.shape(v) for k, v in fs.values.items()}, {"A": a_model.proto, "B": b_model.proto})
        d = _GradDiff(a_model, b_model, spec, config, fs)
        _make_sides(d)
        res = _compare(d, selection, tolerance, per_tensor, user_map, max_memory, progress)
        _describe(d, res)
        res.notes[:0] = [n for n in level_notes if n not in res.notes]
        return res


def _vs_torch(a, vs_torch, spec, user_map: dict[str, str] | None, **checked) -> DiffResult:
    """``diff_grad`` against torch autograd (``api.torch.diff_grad_torch``) on the checked arguments; a user's
    map is refused there (parameters pair by value, modules by scope)."""
    if user_map:
        raise settings_error(UsageError, lambda say: f"{say(MAP)} is not used by "
                             f"{say.either('diff_grad with vs_torch', 'diff --grad --vs-torch')}: parameters pair by "
                             "value, modules by scope")
    from onnxprobe.api.torch import diff_grad_torch

    return diff_grad_torch(a, vs_torch, spec, **checked)


@dataclass
class _GradDiff:
    """What the steps of ``diff_grad`` share: the two models, the loss (``spec``), the run's settings and the
    one feed both get; then each side's gradients (``compare.gradients.grad_side``) and plan (``api.grad_plan``),
    the weight gradients either side has before --wrt (``weights``) and the float weights the models hold
    (``held``)."""

    a: Model
    b: Model
    spec: hints.GradSpec
    config: RunConfig
    fs: _feeds.Feeds
    sides: list = field(default_factory=list)
    plans: list = field(default_factory=list)
    weights: int = 0
    held: int = 0


def _refuse_other_floats(a: Model, b: Model) -> None:
    """A UsageError where an input is of another float type in A than in B: a float16 model and its float32
    original are compared by their layer outputs (a plain diff), not their gradients."""
    floats = check_same_inputs(a.proto, b.proto)
    if floats:
        n, _ = next(iter(floats.items()))
        raise settings_error(UsageError, lambda say: f"{say.either('diff_grad', 'diff --grad')}: input {quote(n)} is of "
                             "another float type in A than in B; the gradients of a float16 model and its float32 original "
                             f"are compared by {say.either('api.diff', 'diff without --grad')} (layer outputs)")


def _make_sides(d: _GradDiff) -> None:
    """Fills ``d.sides`` and ``d.plans`` (A, then B): each model's gradient candidates (its weights, hoisted out
    of If / Loop / Scan bodies as grad_plan differentiates them, and the scalars --wrt names), the plan with its
    loss differentiated with respect to exactly those, and the side that runs its backward graph; then
    ``d.weights`` and ``d.held``."""
    from onnxprobe.api.grad_plan import grad_plan
    from onnxprobe.autodiff.hoist import hoist_constants
    from onnxprobe.compare.gradients import candidates, grad_side, wrt_scalars

    side_spec = replace(d.spec, wrt=())
    # weights inside If / Loop / Scan bodies are moved to the main graph, as grad_plan differentiates them
    hoists = [hoist_constants(m.proto) for m in (d.a, d.b)]
    for role, m, hoisted, extra in zip("AB", (d.a, d.b), hoists, wrt_scalars(hoists, d.spec.wrt)):
        # an RNN's zero initial state (legacy: a Constant expanded to the batch; dynamo: an initializer) is a
        # constant of the export that no parameter holds: as a weight it stayed unpaired, and two exports whose
        # weight gradients all agreed were an error (--vs-torch asks the module instead: api.torch). A scalar (a
        # clamp's bound) that --wrt names is a weight, as grad takes it (it was refused: no gradient matched it)
        cands = candidates(hoisted, observe(m.proto), extra=extra,
                           no_weights=initial_states(hoisted))
        with naming(who := who_of(role, m)):  # grad_plan's own runs of the model name the side too
            plan = grad_plan(m, side_spec, feed=d.fs.values, names=[t for t, _ in cands], unsupported="skip", cache=d.config.cache)
        d.plans.append(plan)
        d.sides.append(grad_side(m.source, m, plan, OrtRunner(plan.backward.model, d.config, m.source), cands, role, who))
    # weight gradients either side has before --wrt: the verdict, which judges them, says why it has none
    d.weights = sum(o.is_output for side in d.sides for o in side.observation.observables)
    # float weights the models hold at all: none with a gradient is then not "no weights" (a Det or another
    # op without a gradient rule stops the backward pass before them)
    d.held = sum(_float_weights(m.proto) for m in (d.a, d.b))


def _compare(d: _GradDiff, selection: Selection | None, tolerance: Tolerance | None, per_tensor: dict | None,
             user_map: dict[str, str] | None, max_memory: int | None, progress: Progress | None) -> DiffResult:
    """The two sides' gradients paired and measured by the diff (``compare.diff``): --wrt's pairs, the user's map
    and per-tensor rules by gradient name, the gradients' default tolerance under the given one, folded, shared
    and transposed weights kept apart; each pair's reason said as a gradient's."""
    from onnxprobe.compare.grad_folding import explain_folded, folded_weights
    from onnxprobe.compare.gradients import (both, explain_stopped, grad_reason, nothing_selected, shared_weights,
                                             transposed_weights, wrt_pairing)

    side_a, side_b = d.sides
    a, b, feed = d.a.proto, d.b.proto, d.fs.values
    # --wrt keeps the pairs it names on either side, made as without it (the exporters name a weight apart)
    pair = wrt_pairing(d.sides, d.spec.wrt, {k: tuple(np.shape(v)) for k, v in feed.items()}) if d.spec.wrt else None

    def as_grad(name: str) -> str:
        return name if forward_name(name) else grad_name(name)

    gmap = {as_grad(k): as_grad(v) for k, v in (user_map or {}).items()} or None
    # the gradients' default (atol relative to each one's scale); what flags leave out of a rule comes from it
    default = gradient_tolerance(side_a, side_b)
    per = {as_grad(k): chosen(v, default) for k, v in (per_tensor or {}).items()}
    tolerance = chosen(tolerance, default)
    res = _diff(side_a, side_b, feed, selection or Selection(), tolerance, per, gmap, introduced=False,
                max_memory=max_memory, progress=progress, pair=pair,
                reject=both(folded_weights(a, b), shared_weights(a, b), transposed_weights(a, b)))
    nothing_selected(res, selection or Selection(), (a, b))
    explain_folded(res.matching, a, b)
    explain_stopped(res.matching, a, b)
    for r in res.results:
        r.pair.reason = grad_reason(r.pair)
    return res


def _describe(d: _GradDiff, res: DiffResult) -> None:
    """``res`` told as a comparison of gradients: what was measured, ``res.grad`` (the loss, each side's output
    and loss value, the weights, where the backward passes stop, whether the forward passes differ), the
    constant-loss verdict, where the error starts and the notes (unread inputs, made-up inputs, loading)."""
    from onnxprobe.compare.gradients import forward_note, gradient_stops, half_outputs, loss_value, losses_differ

    side_a, side_b = d.sides
    a_model, b_model, spec, fs = d.a, d.b, d.spec, d.fs
    quantized = any(o.kind != "float" for o in side_a.observation.observables + side_b.observation.observables)
    res.measured = (f"gradients of the {spec.loss} loss" + (" (QuantizeLinear / DequantizeLinear: straight-through)"
                                                            if quantized else ""))
    res.grad = {"loss": spec.loss, "output_a": d.plans[0].loss.output, "output_b": d.plans[1].loss.output,
                "loss_a": loss_value(side_a, fs.values), "loss_b": loss_value(side_b, fs.values), "weights": d.weights,
                "held_weights": d.held, "wrt": bool(spec.wrt),
                "stops": {r: st for r, m in zip("AB", (a_model, b_model)) if (st := gradient_stops(m.proto))}}
    judge_constant_loss(d.plans, res)
    half = half_outputs(a_model.proto) or half_outputs(b_model.proto)
    res.grad["forward_differs"] = losses_differ(res.grad, half)  # no pair is where the error starts
    gradient_origin(res)
    res.notes[:0] = [n for n in unread_note(a_model.proto, b_model.proto) + fs.notes_but_zeros + load_notes(a_model, b_model) + forward_note(res.grad, half)
                     if n not in res.notes]


def one_tensor_once(names, what: str) -> None:
    """A tensor's forward name and its gradient's ('conv1.weight', 'conv1.weight_grad') are one tensor to
    diff --grad: given under both, one entry would silently replace the other."""
    seen: dict[str, str] = {}
    for n in names or ():
        k = forward_name(n) or n
        if k in seen:
            raise UsageError(f"{what}: {quote(seen[k])} and {quote(n)} name one tensor (its forward and its gradient "
                             "name): it is given twice")
        seen[k] = n


def _float_weights(model) -> int:
    """Float initializers and Constant values (every form: ``graph.constants``) of more than one element, in
    the main graph."""
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE)
    return sum(1 for t in constants(model.graph).values() if t.data_type in floats and element_count(t.dims) > 1)
