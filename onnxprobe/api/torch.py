"""PyTorch as the reference: ``diff_torch`` compares an ONNX export with the ``nn.Module`` it was exported
from, module by module; ``diff_grad_torch`` compares their gradients with torch autograd's.

No names are given by hand: which ONNX tensor is which module's output is read from what the exporter
wrote (dynamo's ``name_scopes`` metadata, legacy's ``/scope/`` node names; ``match.modules``), checked
against one forward pass (``torch.pairing``). Modules that left no tensor of their own (folded, fused,
elided, called twice, another layout) are listed with the reason, never silently dropped.

    from onnxprobe import api
    res = api.diff_torch("model.onnx", "make_model.py:build")   # or an nn.Module
    print(res.verdict(), res.first_failure.pair.b.name)          # the first module that disagrees
"""

from __future__ import annotations

import os

import numpy as np
import onnx

from onnxprobe.api.grad_plan import GRAD_OPT_LEVEL, GradSpec, grad_plan
from onnxprobe.api.inputs import Progress, TorchLike, as_progress, as_max_memory, check_switches
from onnxprobe.api.torch_args import prepare, torch_module
from onnxprobe.autodiff.select import WRT
from onnxprobe.compare.criteria import HALF_TOLERANCE, chosen, export_tolerance
from onnxprobe.compare.result import DiffResult, gradient_origin
from onnxprobe.compare.diff import diff as _diff
from onnxprobe.compare.gradients import candidates, forward_note, grad_side, loss_value, losses_differ
from onnxprobe.compare.sides import GRADIENT_STOPPED, Side, model_side, who_of
from onnxprobe.errors import ExecutionError, UsageError, setting_error, settings_error
from onnxprobe.graph.model import Model, as_model
from onnxprobe.graph.select import Selection, select
from onnxprobe.match.engine import (DIFFERENT_FUNCTION, FOLDED, NO_COUNTERPART, NO_GRADIENT, OTHER_VALUES, Matching, Pair,
                                    Unmatched)
from onnxprobe.match.modules import exporter_guess, initializer_users
from onnxprobe.match.observe import Observable, Observation, observe
from onnxprobe.runtime import feeds as _feeds
from onnxprobe.runtime.runners import make_runner
from onnxprobe.runtime.runners.named import naming
from onnxprobe.runtime.runners.ort import OrtRunner
from onnxprobe.stats.metrics import Tolerance
from onnxprobe.torch.bnfold import (add_fold_grads, batchnorm_statistics, find_folds, fold_note, name_fold_grads,
                                    pair_fold_grads)
from onnxprobe.torch.grads import INPUT, MODULE, TorchGradRunner, param_probe, say_frozen, without_torch_gradient
from onnxprobe.torch.load import positional, training_note
from onnxprobe.torch.pairing import TorchPairing, pair_with_module
from onnxprobe.torch.module_params import computed_weights, param_aliases, param_owners
from onnxprobe.torch.params import ParamMap, map_parameters
from onnxprobe.torch.rnn import add_block_grads, attach_blocks, mark_initial_states, name_blocks, pair_blocks, rnn_blocks
from onnxprobe.torch.tied import Tie, add_tie_sums, name_ties, pair_ties
from onnxprobe.torch.runner import OUTPUT, TorchRunner, to_numpy
from onnxprobe.text import matches, some
from onnxprobe.types import InputSpec, RunConfig, element_count, forward_name, grad_name


def _per_tensor(per_tensor: dict | None, default: Tolerance) -> dict | None:
    """The per-tensor criteria, each with what its flags left out from ``default`` (``--atol NAME:V`` keeps the
    export's rtol 1e-4, not the generic 1e-3)."""
    return {n: chosen(t, default) for n, t in per_tensor.items()} if per_tensor else per_tensor


def _no_constants(selection: Selection | None, grad: bool) -> None:
    """include_constants (--include-constants) means nothing against torch: its pairing matches module outputs and
    parameters, never what is computed from weights alone; refused, not taken and ignored."""
    if getattr(selection, "include_constants", False) is True:
        raise settings_error(UsageError, lambda say: (
            f"{say(('include_constants', '--include-constants'))} is not used by "
            f"{say.either('diff_grad with vs_torch' if grad else 'diff with vs_torch', 'diff --grad --vs-torch' if grad else 'diff --vs-torch')}"
            ": tensors pair with the module's outputs and parameters, and what is computed from weights alone has none"))


def _keep(model: Model, selection: Selection | None):
    """A predicate over (ONNX tensor, module path) for a selection: everything by default; otherwise a
    pair is kept when its tensor is selected in the ONNX model or its module path matches a --name glob."""
    sel = selection or Selection()
    if sel.all or not (sel.ops or sel.names or sel.range):
        return None
    in_a = {r.name for r in select(model.proto, sel, strict=False)}

    def keep(tensor: str, path: str) -> bool:
        return tensor in in_a or any(matches(path, pat) for pat in sel.names)

    return keep


def _filtered(matcher, keep, what: str):
    if keep is None:
        return matcher

    def pair(obs_a, obs_b, user_map=None) -> Matching:
        m = matcher(obs_a, obs_b, user_map)
        pairs = [p for p in m.pairs if p.a.is_output or p.b.is_output or p.strategy == "map" or keep(p.a.name, p.b.name)]
        if not any(not (p.a.is_output or p.b.is_output) for p in pairs):
            raise UsageError(f"the selection matches no {what} of the torch model (nor its ONNX tensor)")
        return Matching(pairs, m.unmatched_a, m.unmatched_b)

    return pair


def _torch_pairing(a_model: Model, side_a: Side, mod, fs, max_memory: int | None = None, template=None) -> TorchPairing:
    names = [i.name for i in _feeds.model_inputs(a_model.proto)]
    runner = TorchRunner(mod, names, "torch", template=template)
    return pair_with_module(a_model, side_a.observation, runner, fs.values,
                            budget=max_memory // 8 if max_memory else None, onnx_values=_values_of(side_a, fs.values))


def _values_of(side: Side, feeds: dict):
    """names -> {ONNX tensor: value} on ``feeds``, from ``side``'s runner (the pairing's value check)."""
    def values(names: list[str]) -> dict:
        wanted = set(names)
        obs = [o for o in side.observation.observables if o.name in wanted]
        got = side.values(obs, feeds)
        return {o.name: got[o.probe] for o in obs if o.probe in got}

    return values


def diff_torch(
    a: Model | str | os.PathLike,
    module: TorchLike,
    *,
    example_args: tuple | None = None,
    selection: Selection | None = None,
    config: RunConfig | None = None,
    inputs: InputSpec | None = None,
    tolerance: Tolerance | None = None,
    per_tensor: dict | None = None,
    user_map: dict[str, str] | None = None,
    introduced: bool = True,
    max_memory: int | None = None,
    progress: Progress | None = None,
) -> DiffResult:
    """Compare ONNX model A (onnxruntime) with the PyTorch module it was exported from (``module``: an
    nn.Module, ``(module, example_args)`` or ``"FILE.py:FUNC"``), module by module. The inputs are the
    example arguments when the function gives them (and ``inputs`` gives none), else made from the ONNX
    model's inputs as for every command. ``user_map``: ``{ONNX tensor: module path}`` overrides the
    pairing; ``per_tensor`` takes ONNX tensor names or module paths. Each pair's ``b.name`` is the module
    path; ``result.first_failure`` the first module that disagrees. ``introduced``: also run the module
    once more with each paired module's output replaced by the ONNX value (teacher forcing), so that each
    pair also says the error its module introduces on its own."""
    check_switches("diff_torch", introduced=introduced)
    max_memory, progress = as_max_memory(max_memory), as_progress(progress)
    _no_constants(selection, grad=False)
    a_model, mod, fs, config, template = prepare(a, module, example_args, inputs, config)
    side_a = model_side(a_model.source, a_model, lambda proto: make_runner("ort", proto, config, a_model.source),
                        who=who_of("A", a_model))
    try:
        tp = _torch_pairing(a_model, side_a, mod, fs, max_memory, template)
        matcher = _filtered(tp.matcher({p for p, _ in mod.named_modules()}), _keep(a_model, selection), "module")
        default = export_tolerance(a_model)
        res = _diff(side_a, tp.side, fs.values, Selection(all=True), chosen(tolerance, default),
                    _per_tensor(per_tensor, default), user_map, introduced=introduced, max_memory=max_memory, progress=progress, pair=matcher)
    except ExecutionError as e:
        raise fs.explained(e) from e
    guess = exporter_guess(a_model.proto)
    res.measured = f"a PyTorch export ({_exporter_words(tp.exporter, guess)}) against its module, in float"
    res.notes[:0] = fs.notes + list(a_model.warnings) + _exporter_note(tp.exporter, guess) + training_note(mod)
    res.feed = fs.values  # what the result measured (histograms run these inputs again)
    # a weight named as a parameter with other values fails the export whatever the activations say (a float16
    # export's default criterion passed a 1% change of one layer's weight: QA)
    # (the weights as the first call left them, which the export computed with: a weight forward() clamps)
    with tp.side.runner.state.after_first_call():
        pm = _param_map(a_model, mod)  # an LSTM's or GRU's gate block with other values too (torch.rnn)
        # a Conv's weight with a BatchNorm folded in (the legacy exporter's onnx::Conv_35) that is no fold of the module's
        # weight now: a contradiction, as diff --grad finds it (the forward said weights_passed true there: QA)
        find_folds(a_model.proto, mod, {n: to_numpy(p) for n, p in mod.named_parameters()}, pm)
    # an exporter's copy of a parameter, changed, as COPY[PARAMETER]: the copy that stands for the parameter
    res.other_values = sorted({pm.said(i) for i in pm.contradicts}
                              | {b.name for b in pm.blocks if not b.holds})
    res.weights_checked = True
    return res


def _param_map(model: Model, mod):
    """``torch.params.map_parameters`` of ``model``'s float initializers and ``mod``'s parameters."""
    known = {p for p, _ in mod.named_modules()}
    params = {n: to_numpy(p) for n, p in mod.named_parameters()}
    buffers = {n: to_numpy(b) for n, b in mod.named_buffers() if b.is_floating_point()}
    users = initializer_users(model.proto, known)
    pm = map_parameters(model.proto, params, _float_initializers(model), users, buffers,
                        _batchnorm_folds(mod), param_owners(mod), known, param_aliases(mod), computed_weights(mod))
    attach_blocks(pm, rnn_blocks(model.proto, mod, params, users))  # LSTM / GRU gates, reordered by the exporter; RNN
    mark_initial_states(pm, model.proto, {p: v.shape for p, v in params.items()})  # an RNN's zero initial state: a constant, not a parameter
    return pm


def _float_initializers(model: Model) -> list[str]:
    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE}
    return [i.name for i in model.proto.graph.initializer if i.data_type in floats]


def _exporter_words(kind: str | None, guess: str | None) -> str:
    if kind is not None:
        return f"{kind} exporter"
    return f"{guess} exporter, without module scopes" if guess else "unknown exporter"


def _exporter_note(kind: str | None, guess: str | None = None) -> list[str]:
    if kind is not None:
        return []
    if guess == "dynamo":  # named node_*, no metadata: converted below opset 18 (onnx's converter drops it)
        return ["the ONNX file carries no module scopes: a dynamo export (its nodes are named node_*) below opset 18, "
                "whose node metadata onnx's version converter dropped; export at opset >= 18 (or with dynamo=False) "
                "to compare module by module: only the model outputs are paired with the module"]
    return ["the ONNX file carries no module scopes (neither dynamo's name_scopes, kept at opset >= 18, nor legacy "
            "/scope/ node names): only the model outputs can be paired with the module"]


def diff_grad_torch(
    a: Model | str | os.PathLike,
    module: TorchLike,
    spec: GradSpec | None = None,
    *,
    example_args: tuple | None = None,
    selection: Selection | None = None,
    config: RunConfig | None = None,
    inputs: InputSpec | None = None,
    tolerance: Tolerance | None = None,
    per_tensor: dict | None = None,
    max_memory: int | None = None,
    progress: Progress | None = None,
) -> DiffResult:
    """Compare the gradients of ONNX model A (onnxprobe's backward graph) with torch autograd's on the
    module it was exported from: the same loss (``spec``) on the same inputs. Weight gradients pair an
    initializer with the parameters whose values it holds (as they are, transposed, or merged: the sum of
    their gradients; ``torch.params``; one parameter several initializers hold: the sum of theirs, ``torch.tied``), input gradients by position, activation gradients through the
    module pairing of ``diff_torch``; an LSTM's or GRU's parameters by their gate blocks inside the node's W, R
    and B (``torch.rnn``). Initializers the exporter derived otherwise (folded BatchNormalization) have no
    parameter and are listed with the reason."""
    spec, max_memory, progress = spec or GradSpec(), as_max_memory(max_memory), as_progress(progress)
    _no_constants(selection, grad=True)
    a_model, mod, fs, config, template = prepare(a, module, example_args, inputs, config or RunConfig(opt_level=GRAD_OPT_LEVEL))
    fwd_side = model_side(a_model.source, a_model, lambda proto: make_runner("ort", proto, RunConfig(device="cpu", cache=config.cache), a_model.source),
                          who=who_of("A", a_model))
    try:
        tp = _torch_pairing(a_model, fwd_side, mod, fs, template=template)
    except ExecutionError as e:
        raise fs.explained(e) from e
    # bfloat16 as ml_dtypes' (onnx's own mapping), so that values compare with the initializers'
    params = {n: to_numpy(p) for n, p in mod.named_parameters()}  # one name per tensor
    buffers = {n: to_numpy(b) for n, b in mod.named_buffers() if b.is_floating_point()}
    known = {p for p, _ in mod.named_modules()}
    # one-element initializers are constants of the formula to onnxprobe, unless one holds a torch parameter
    # (nn.PReLU()'s slope, a learnable temperature): then it is a weight like any other
    owners = param_owners(mod)  # tied parameters: every module holding one
    scalars = _scalar_parameters(a_model, params, known, buffers, owners)
    cands = candidates(a_model.proto, observe(a_model.proto), extra=scalars)
    # names= chooses the tensors (the spec's wrt filters the pairs below)
    with fs.explaining(), naming(who_of("A", a_model)):  # grad_plan's own runs of the model name it as its runner does
        plan = grad_plan(a_model, spec, feed=fs.values, names=[t for t, _ in cands], unsupported="skip", cache=config.cache)
    pm = _param_map(a_model, mod)  # a parameter several initializers hold: the sum of their gradients (torch.tied)
    ties, summed = add_tie_sums(plan, pm.ties, {p: v.shape for p, v in params.items()}, cands)
    blocks, parts = add_block_grads(plan, pm.blocks, cands, {p: v.shape for p, v in params.items()})
    # a BatchNorm folded into a Conv: its parameters' and the Conv's gradients by the chain rule (torch.bnfold)
    unfolded, derived = add_fold_grads(plan, find_folds(a_model.proto, mod, params, pm), cands)
    side_a = grad_side(a_model.source, a_model, plan, OrtRunner(plan.backward.model, config, a_model.source),
                       cands + summed + parts + derived, "A", who_of("A", a_model))
    name_ties(side_a, ties)
    name_fold_grads(side_a, unfolded)
    name_blocks(side_a, blocks)
    outputs = [o.name for o in a_model.proto.graph.output]
    modules = {p.a.name: p.b for p in tp.pairs if p.b.module}
    runner = TorchGradRunner(mod, [i.name for i in _feeds.model_inputs(a_model.proto)], outputs.index(plan.loss.output),
                             plan.loss.kind, plan.extra_feed.get(plan.loss.input, spec.extra) if plan.loss.input else spec.extra,
                             plan.loss.class_axis, {b.module for b in modules.values()}, template=template,
                             probabilities=plan.loss.probabilities)
    # weights the loss reads whose gradient an op without a rule stops (compare.gradients.grad_side)
    stopped = {forward_name(k): side_a.observation.hidden[k] for k, c in side_a.hidden_causes.items()
               if c == GRADIENT_STOPPED and k in side_a.observation.hidden}
    matching = _grad_matching(a_model, side_a.observation.observables, params, modules, pm, stopped, ties, blocks, unfolded)
    try:  # torch's backward pass: a parameter autograd gives no gradient (read detached) is not compared
        without_torch_gradient(matching, runner, fs.values, tp.branch)
    except ExecutionError as e:
        raise fs.explained(e) from e
    for u in matching.unmatched_b:  # a parameter of a module the export's branch did not trace: said so
        owner = next((m for m in sorted(tp.branch, key=len, reverse=True) if u.obs.name.startswith(m + ".")), None)
        if owner is not None:
            u.reason = tp.branch[owner]
    for u in matching.unmatched_a:  # the gradient of a repeated call's output: said whose (torch.pairing)
        if u.cause == NO_COUNTERPART and forward_name(u.obs.name) in tp.repeated:
            u.reason = f"the gradient of {tp.repeated[forward_name(u.obs.name)]}"
    if spec.wrt:
        _keep_wrt(side_a, matching, spec.wrt)
    frozen = say_frozen(matching, mod)
    side_b = Side("torch", a_model, runner, Observation([p.b for p in matching.pairs] + [u.obs for u in matching.unmatched_b]))
    matcher = _filtered(lambda *_: matching, _keep(a_model, selection), "module or parameter")
    try:
        default = export_tolerance(a_model, grads=True)
        res = _diff(side_a, side_b, fs.values, Selection(all=True), chosen(tolerance, default), _per_tensor(per_tensor, default), None,
                    introduced=False, max_memory=max_memory, progress=progress, pair=matcher)
    except ExecutionError as e:
        raise fs.explained(e) from e
    res.measured = f"gradients of the {spec.loss} loss: onnxprobe's backward graph against torch autograd"
    res.grad = {"loss": spec.loss, "output_a": plan.loss.output, "output_b": f"output[{outputs.index(plan.loss.output)}]",
                "loss_a": loss_value(side_a, fs.values), "loss_b": runner.loss_value, "wrt": bool(spec.wrt),
                "weights": sum(1 for o in side_a.observation.observables if o.effective_op.endswith(" weight")),
                "vs_torch": True, **({"frozen": frozen} if frozen else {})}
    from onnxprobe.compare.constant_loss import judge_constant_loss  # the same rule as two models': a Softmax's sum
    judge_constant_loss([plan], res)
    half = export_tolerance(a_model) is HALF_TOLERANCE
    res.grad["forward_differs"] = losses_differ(res.grad, half)  # the verdict fails (compare.result)
    # its weights with other values (unmatched, cause other-values) named as diff_torch names them
    res.other_values = sorted(pm.said(forward_name(u.obs.name) or u.obs.name) for u in res.matching.unmatched_a
                              if u.cause == OTHER_VALUES)
    res.weights_checked = True
    # a weight of other values: the forward passes differ too, where the losses moved less than their rounding (a Conv
    # channel 10% off, 4e-5 of the loss): no backward step is where the error starts (the head's gradient was marked)
    res.grad["weights_differ"] = bool(res.other_values)
    gradient_origin(res)
    res.notes[:0] = (fs.notes + list(a_model.warnings) + _exporter_note(tp.exporter, exporter_guess(a_model.proto)) + training_note(mod)
                     + forward_note(res.grad, half, "torch", ("api.diff_torch", "`diff --vs-torch`"), res.other_values)
                     + ([f"torch: {len(frozen)} parameter(s) compared have requires_grad=False (frozen: {some(frozen)}): "
                         "their gradients are the ones autograd gives with the flag set, which the ONNX graph's backward "
                         "computes for every weight; a training loop would leave them as they are"] if frozen else [])
                     + fold_note([g for g in unfolded if any(p.b.probe == param_probe([g.param]) for p in res.matching.pairs)]))
    res.feed = fs.values  # what the result measured (histograms run these inputs again)
    return res


def _grad_obs(a: Observable, name: str, probe: str, op: str, module: str | None = None) -> Observable:
    """B's observable of a gradient; a parameter's names the module that holds it (``mlp.0`` of ``mlp.0.weight``, the
    first of tied ones: the JSON's ``module``, and ``first_failure_module`` where that row fails first: it was null)."""
    if op == "parameter" and module is None and "." in name.split("+")[0]:
        module = name.split("+")[0].rsplit(".", 1)[0]
    return Observable(key=a.key, name=name, probe=probe, node=op, op_type=op, effective_op=a.effective_op,
                      index=a.index, shape=a.shape, kind="float", is_output=a.is_output, module=module)


def _keep_wrt(side_a: Side, matching: Matching, wrt: tuple[str, ...]) -> None:
    """--wrt against a torch module: a gradient is kept when its ONNX tensor or its torch name (the
    parameter, several joined by '+', or the module path) matches (``onnx::MatMul_115`` is reached as
    ``mlp.0.weight``); what is left out is not listed as unmatched, as a tensor left out of a diff's
    selection is not. A UsageError when nothing of A is kept."""
    def ours(o) -> list[str]:
        return [f for f in (forward_name(o.name), forward_name(o.key), o.name) if f]

    def wanted(names: list[str]) -> bool:
        return any(matches(n, pat) for n in names for pat in wrt)

    every = ([n for p in matching.pairs for n in ours(p.a) + p.b.name.split("+")] + [n for u in matching.unmatched_a for n in ours(u.obs)]
             + [n for u in matching.unmatched_b for n in u.obs.name.split("+")])
    idle = next((pat for pat in wrt if not any(matches(n, pat) for n in every)), None)
    if idle is not None:  # as grad: a pattern that names nothing is a mistake, not a filter to ignore
        raise setting_error(UsageError, WRT, f"{idle!r}: no gradient matches it (by its ONNX name or its torch name)")
    matching.pairs[:] = [p for p in matching.pairs if wanted(ours(p.a) + p.b.name.split("+"))]
    matching.unmatched_a[:] = [u for u in matching.unmatched_a if wanted(ours(u.obs))]
    matching.unmatched_b[:] = [u for u in matching.unmatched_b if wanted(u.obs.name.split("+"))]
    kept = {p.a.name for p in matching.pairs} | {u.obs.name for u in matching.unmatched_a}
    side_a.observation = Observation([o for o in side_a.observation.observables if o.name in kept], [], side_a.observation.hidden)
    if not kept:
        raise setting_error(UsageError, WRT, f"{', '.join(wrt)}: no gradient of model A matches (by its ONNX name or its torch name)")


def _scalar_parameters(model: Model, params: dict[str, np.ndarray], known: set[str],
                       buffers: dict[str, np.ndarray], owners: dict[str, set[str]] | None = None) -> set[str]:
    """The one-element float initializers that hold a torch parameter (``map_parameters``' links)."""
    inits = _float_initializers(model)
    by_name = {i.name: i for i in model.proto.graph.initializer}
    single = {n for n in inits if element_count(by_name[n].dims) == 1}
    if not single or not any(v.size == 1 for v in params.values()):
        return set()
    pm = map_parameters(model.proto, params, inits, initializer_users(model.proto, known), buffers, owners=owners, modules=known)
    return {i for i in single if i in pm.links}


def _batchnorm_folds(mod) -> list[tuple[np.ndarray, np.ndarray]]:
    """The module's BatchNorms as an exporter folds them into the layer before (eval mode: running
    statistics), each its per-channel (scale, shift) in float64 (``torch.param_values.batchnorm_fold``)."""
    return [(b.scale, b.shift) for b in batchnorm_statistics(mod)]


def _grad_matching(model: Model, obs_a: list[Observable], params: dict[str, np.ndarray], modules: dict[str, Observable],
                   pm: ParamMap, stopped: dict[str, str] | None = None, ties: list[Tie] = (),
                   blocks: dict | None = None, unfolded: list = ()) -> Matching:
    """A's gradient observables paired with torch's: weights through ``pm`` (``map_parameters``; B is named by
    the parameter: ``fc.weight``; parameters merged into one initializer ``ln1.weight+ln2.weight``; ``ties``:
    a parameter several initializers hold, by the sum of their gradients; ``blocks``: tensor -> the
    ``torch.rnn.Block`` whose gradient it is, an LSTM's or GRU's parameter inside its initializer; ``unfolded``:
    the parameters of a Conv and the BatchNorm folded into it, by the chain rule, ``torch.bnfold``), inputs
    by position (``input[0]``), activations through the module pairing (``modules``: ONNX tensor -> the
    module's observable of the forward pairing; B is named by the module path). ``stopped``: initializer ->
    why A has no gradient for it though the loss reads it (an op without a gradient rule on the way)."""
    inputs = [i.name for i in _feeds.model_inputs(model.proto)]
    weights = {o.name: forward_name(o.key) or forward_name(o.name) for o in obs_a if o.effective_op.endswith(" weight")}
    with_grad = {forward_name(o.name) for o in obs_a if o.name in weights} | set(weights.values())
    pairs, un_a, done, tied = pair_ties(obs_a, list(ties), lambda o, p: _grad_obs(o, p, param_probe([p]), "parameter"))
    more, un, names = pair_blocks([o for o in obs_a if o.name not in done], pm.blocks, blocks or {},
                                  lambda o, p: _grad_obs(o, p, param_probe([p]), "parameter"))
    pairs, un_a, done = pairs + more, un_a + un, done | names
    more, un, names, chained = pair_fold_grads([o for o in obs_a if o.name not in done], list(unfolded),
                                               lambda o, p: _grad_obs(o, p, param_probe([p]), "parameter"))
    pairs, un_a, done, tied = pairs + more, un_a + un, done | names, tied | chained
    for o in (o for o in obs_a if o.name not in done):
        t = forward_name(o.name) or o.name
        if o.name in weights:
            w = weights[o.name]
            link = pm.links.get(t) or pm.links.get(w)
            if link is None and o.kind != "float" and w in params and tuple(params[w].shape) == tuple(o.shape or ()):
                pairs.append(Pair(o, _grad_obs(o, w, param_probe([w]), "parameter"), "torch-param",
                                  f"gradient of the parameter {w} (the weight quantized from it)"))
            elif link is None:
                why = pm.refused.get(t) or pm.refused.get(w) or "no torch parameter holds its values"
                contradicts = t in pm.contradicts or w in pm.contradicts
                folded = t in pm.folds or w in pm.folds or w not in params  # a BatchNorm folded in, or derived
                un_a.append(Unmatched(o, why, OTHER_VALUES if contradicts else FOLDED if folded else DIFFERENT_FUNCTION))
            else:
                pairs.append(Pair(o, _grad_obs(o, "+".join(link.params), param_probe(link.params, link.transposed, link.shape), "parameter"),
                                  "torch-param", f"gradient of the parameter{'s' if len(link.params) > 1 else ''} "
                                                 f"{', '.join(link.params)}: {link.how}"))
        elif o.effective_op == "input" and t in inputs:
            pairs.append(Pair(o, _grad_obs(o, f"input[{inputs.index(t)}]", f"{INPUT}{inputs.index(t)}", "input"),
                              "torch-input", f"gradient of the forward() argument {inputs.index(t)}"))
        elif t in modules:
            b = modules[t]
            probe = MODULE + (b.module if b.probe.startswith(OUTPUT) else b.probe)
            pairs.append(Pair(o, _grad_obs(o, b.module, probe, "module", b.module), "torch-module",
                              f"gradient of the output of module {b.module}"))
        else:
            un_a.append(Unmatched(o, "not a parameter, an input or a module output of the torch model", NO_COUNTERPART))
    odd = {b.param for b in pm.blocks if not b.holds}  # a gate block with other values (torch.rnn)
    odd |= set(pm.copies.values())  # a parameter only a changed copy holds (torch.params)
    unused = {p: (why, OTHER_VALUES if p in pm.contradicts or p in odd else FOLDED) for p, why in pm.unused.items() if p not in tied}
    graded = {b.param for b in (blocks or {}).values()}
    for b in pm.blocks:  # a block whose initializer has no whole gradient in A
        if b.holds and b.param not in graded:
            unused[b.param] = ((f"held by {b.init}, {(stopped or {})[b.init]}", GRADIENT_STOPPED) if b.init in (stopped or {})
                               else (f"held by {b.init}, which has no gradient in A (the loss does not depend on it)", NO_GRADIENT))
    for i, link in pm.links.items():
        if i not in with_grad:
            for p in link.params:
                unused[p] = ((f"held by {i}, {(stopped or {})[i]}", GRADIENT_STOPPED) if i in (stopped or {}) else
                             (f"held by {i}, which has no gradient in A (the loss does not depend on it)", NO_GRADIENT))
    un_b = []
    for p, (why, cause) in unused.items():
        b = Observable(key=grad_name(p), name=p, probe=param_probe([p]), node="parameter", op_type="parameter",
                       effective_op="weight", index=1 << 30, shape=tuple(params[p].shape), kind="float", is_output=True)
        un_b.append(Unmatched(b, why, cause))
    return Matching(sorted(pairs, key=lambda p: p.a.index), un_a, un_b)


def capture_torch(a: Model | str | os.PathLike, module, *, example_args: tuple | None = None,
                  inputs: InputSpec | None = None) -> dict[str, np.ndarray]:
    """torch's values keyed by the ONNX tensor names they stand for (``{onnx tensor: ndarray}``, the
    model outputs included), from one forward pass, and the model inputs it ran on (under their ONNX
    names): what ``diff --vs-npz`` reads, with the right keys, A then running on the same inputs."""
    a_model, mod, fs, _, template = prepare(a, module, example_args, inputs, None)
    runner = TorchRunner(mod, [i.name for i in _feeds.model_inputs(a_model.proto)], "torch", template=template)
    side_a = model_side(a_model.source, a_model, lambda proto: make_runner("ort", proto, RunConfig(device="cpu"), a_model.source),
                        who=who_of("A", a_model))
    tp = pair_with_module(a_model, side_a.observation, runner, fs.values, onnx_values=_values_of(side_a, fs.values))
    got = runner.values([p.b.probe for p in tp.pairs], fs.values)
    return {**{k: np.asarray(v) for k, v in fs.values.items()}, **{p.a.name: got[p.b.probe] for p in tp.pairs if p.b.probe in got}}


def export_and_diff(module, example_args: tuple, *, dynamo: bool = True, path: str | os.PathLike | None = None,
                    opset: int | None = None, **kwargs) -> DiffResult:
    """Export ``module`` on ``example_args`` (``torch.onnx.export``, the dynamo or the legacy exporter) and
    compare the export with the module at once (``diff_torch``; ``kwargs`` go there). ``path``: where to
    write the .onnx file (default: a temporary folder, removed afterwards)."""
    import tempfile
    from pathlib import Path

    from onnxprobe.torch.export import export

    check_switches("export_and_diff", dynamo=dynamo)
    mod, _ = torch_module(module)
    args = positional(example_args if isinstance(example_args, (tuple, list, dict)) else (example_args,))  # before the export
    if path is not None:
        written = export(mod, args, Path(path), dynamo=dynamo, opset=opset)
        return diff_torch(written, mod, example_args=args, **kwargs)
    with tempfile.TemporaryDirectory(prefix="onnxprobe-export-") as tmp:
        written = export(mod, args, Path(tmp) / "model.onnx", dynamo=dynamo, opset=opset)
        return diff_torch(as_model(written), mod, example_args=args, **kwargs)
