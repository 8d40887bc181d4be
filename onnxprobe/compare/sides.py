"""The two sides of a comparison: what each can observe (``match.observe``) and the runner that produces
the values (``runtime.runners``: onnxruntime on any device or opt level, onnx.reference, saved
activations, a backward graph...). Nothing here switches on a backend: a side is its runner."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np
from onnx import helper

from onnxprobe.errors import ExecutionError, ModelError
from onnxprobe.graph.integrity import refuse_broken
from onnxprobe.graph.model import Model
from onnxprobe.graph.shapes import static_shape, value_types
from onnxprobe.graph.tensor_data import array_digest
from onnxprobe.graph.walk import walk
from onnxprobe.compare.npz_views import quantized_views
from onnxprobe.match.dequantize import add_dequantize
from onnxprobe.match.engine import NOT_OBSERVABLE
from onnxprobe.match.observe import Observable, Observation, observe
from onnxprobe.runtime.runners.base import Runner
from onnxprobe.runtime.runners.named import NamedRunner, name_error
from onnxprobe.runtime.runners.npz import NpzRunner, numeric
from onnxprobe.text import clean, some
from onnxprobe.types import GRADIENT_STOPPED  # noqa: F401 - diff --grad's cause (onnxprobe.types), imported from here too


@dataclass
class Side:
    label: str
    model: Model  # the model the values stand for (for saved activations: model A, whose names they use)
    runner: Runner
    observation: Observation
    notes: list[str] = field(default_factory=list)
    hidden_cause: str = NOT_OBSERVABLE  # what the observation's hidden entries mean for the other side's tensors
    hidden_causes: dict = field(default_factory=dict)  # key -> its own cause, where it is not hidden_cause
    # the hidden entries whose reason is the runner's (which says "not observable" or "fused" itself)
    runner_hidden: frozenset = frozenset()
    # saved values that are this model's own tensors (``layers --save`` of model A): judged as one float
    # computation against itself, whatever A's quantization (``compare.criteria.default_tolerance``)
    own_snapshot: bool = False

    def describe(self) -> str:
        return self.runner.describe()

    def facts(self) -> dict | None:
        """What ``describe`` says, as JSON (the runner's ``facts``)."""
        return self.runner.facts() if self.runner is not None else None

    @property
    def any_runner(self) -> Runner:
        """The runner itself, its errors not named as this side's (``runners.named``): for a run of more than
        this side's model (diff's one run of both models, on A's runner)."""
        return getattr(self.runner, "unnamed", self.runner)

    @property
    def runs_graphs(self) -> bool:
        return self.runner.runs_graphs

    def values(self, observables: list[Observable], feeds: dict[str, np.ndarray], keep_on_device: bool = False,
               key=None) -> dict:
        """probe name -> value for each observable the runner returns (numpy arrays, or with
        ``keep_on_device`` the runtime's own device values, so that metrics can be computed there).
        ``key``: a runner that runs graphs keeps what it compiled for these names under it."""
        kw = {"key": key} if key is not None and self.runner.runs_graphs else {}
        return self.runner.values([o.probe for o in observables], feeds, keep_on_device=keep_on_device, **kw)


def model_side(label: str, model: Model, make_runner: Callable, constants: bool = False,
               who: tuple[str, str] | None = None) -> Side:
    """A side that runs ``model``: its observables, and a runner (``make_runner(proto)``) over the model
    with the dequantizations those observables read (QOperator and quantized tensors) added. Tensors the
    runner cannot observe leave the observation, with the runner's reason. ``constants``: tensors computed
    from weights alone are observed too (--include-constants). ``who``: the side's name and file as the API
    and the command line say them ("B (b.onnx)"), which each error of its runner starts with (``NamedRunner``)."""
    try:  # before the observation, which reads nodes' inputs by position
        refuse_broken(model.proto, None if who is not None else model.source)
    except ExecutionError as e:
        if who is not None:
            name_error(e, who)
        raise
    obs = observe(model.proto, constants)
    proto = add_dequantize(model.proto, obs.dequantize) if obs.dequantize else model.proto
    try:
        runner = make_runner(proto)
    except (ExecutionError, ModelError) as e:  # a runtime that reads the model as the runner is made (OpenVINO)
        if who is not None:
            name_error(e, who)
        raise
    if who is not None:
        runner = NamedRunner(runner, who)
    hidden = runner.unobservable([o.probe for o in obs.observables])
    by_runner = {o.name: hidden[o.probe] for o in obs.observables if o.probe in hidden}
    if hidden:
        obs = Observation([o for o in obs.observables if o.probe not in hidden], obs.dequantize, {**obs.hidden, **by_runner},
                          weights_quantized=obs.weights_quantized)
    return Side(label, model, runner, obs, runner_hidden=frozenset(by_runner))


def who_of(side: str, model: Model, setting: tuple[str, str, str] | None = None) -> tuple[str, str]:
    """How an error of one side of a diff names it, to the API and on the command line: "B (b.onnx)"; B of
    the same model by the setting that makes it the reference ("B (m.onnx, --vs-runtime reference)")."""
    path = clean(str(model.source))
    if setting is None:
        return f"{side} ({path})", f"{side} ({path})"
    api, flag, value = setting
    return f"{side} ({path}, {api}={value!r})", f"{side} ({path}, {flag} {value})"


def load_notes(a: Model, b: Model | None) -> list[str]:
    """What reading each model of a diff changed (``Model.warnings``: a weight listed twice, a domain imported
    twice), each note once, starting with the side it is about ("A: ", "B: ", "A and B: "), as the diff's
    other notes name a side; one model (B is A run otherwise, or saved activations): its notes as they are."""
    if b is None or b is a:
        return list(a.warnings)
    notes = []
    for w in dict.fromkeys(list(a.warnings) + list(b.warnings)):
        side = "A and B" if w in a.warnings and w in b.warnings else "A" if w in a.warnings else "B"
        notes.append(f"{side}: {w}")
    return notes


def npz_side(label: str, arrays: dict[str, np.ndarray], like: Model, made_by: tuple | None = None,
             quantized: bool = False, from_file: bool = True) -> Side:
    """Saved activations as side B: one observable per array of numbers, described by the tensor of the same name
    in ``like`` (model A) where there is one, so that matching and reports know its op. ``made_by``: the runtime,
    device and float precision that computed them, where the archive says (``runtime.npz.npz_origin``);
    ``quantized``: the archive says they are a quantized model's (judged as that model's, though it may hold
    float values only); ``from_file``: they were read from a file (else handed over in a dict)."""
    seen = observe(like.proto).observables
    known = {o.name: o for o in seen}
    relu = _relu_outputs(arrays, {o.key for o in seen if o.floor_zero})
    # a quantized model's saved values against its float model A: A's x compared with the quantized value the file
    # holds beside x (found by value), as a two-model diff compares them; the codes are that value's
    views, codes = quantized_views(arrays, {o.name for o in seen if o.kind == "float"})
    taken = set(views.values())
    obs, hidden = [], {c: f"the quantized codes of {y!r}, compared as that value" for c, y in codes.items()}
    notes = [f"{len(views)} saved tensor(s) of A's names compared as the quantized values the file holds beside them "
             f"(DequantizeLinear(QuantizeLinear(x)), found by value: {some([views[n] for n in views], form=str)}), as a "
             "diff of the float model against the quantized one compares them"] if views else []
    for k, (name, value) in enumerate(arrays.items()):
        if not numeric(value) or name in taken or name in codes:  # strings: left out, A's tensor of that name
            continue  # unmatched with the runner's reason; views and codes: with the tensor they stand for
        o = known.get(name)
        shape, elem = tuple(np.shape(value)), _elem_type(value)  # its type, as saved (integers are judged exactly)
        if o is not None and name in views:
            obs.append(Observable(key=name, name=views[name], probe=views[name], node=o.node, op_type=o.op_type,
                                  effective_op=o.effective_op, index=o.index, shape=shape, kind="qdq",
                                  is_output=o.is_output, tails_after=o.tails_after, conv_bn=o.conv_bn, elem_type=elem))
        elif o is not None:
            obs.append(Observable(key=name, name=name, probe=name, node=o.node, op_type=o.op_type,
                                  effective_op=o.effective_op, index=o.index, shape=shape, kind="float",
                                  is_output=o.is_output, tails_after=o.tails_after, conv_bn=o.conv_bn, elem_type=elem,
                                  relu=relu.get(name)))  # as A's tensor
        else:
            obs.append(Observable(key=name, name=name, probe=name, node="", op_type="?", effective_op="?",
                                  index=1 << 30 | k, shape=shape, kind="float", elem_type=elem, relu=relu.get(name)))
    obs.sort(key=lambda o: o.index)
    return Side(label, like, NpzRunner(arrays, label, made_by, from_file), Observation(obs, hidden=hidden, weights_quantized=quantized),
                notes=notes)


def _relu_outputs(arrays: dict[str, np.ndarray], keys: set[str]) -> dict[str, str]:
    """Saved float tensor of ``keys`` -> another saved tensor that is its Relu (max(x, 0), by value): the file holds
    no graph, and a quantized model that folded a Relu into its range holds Relu(x) where it keeps x's name (``keys``:
    those of A's values whose range starts at 0), which matching pairs with the Relu's output (``match.engine``),
    never with x (it paired with x against saved values, with the Relu's output in a two-model diff). Only arrays of
    those tensors' shapes are hashed: a float model's saved values cost nothing here."""
    floats = {n: np.asarray(v) for n, v in arrays.items() if numeric(v) and np.asarray(v).dtype.kind == "f" and np.size(v)}
    xs = {n: v for n, v in floats.items() if n in keys and (v < 0).any()}
    shapes = {v.shape for v in xs.values()}
    nonneg = {}
    for n, v in floats.items():
        if v.shape in shapes and not (v < 0).any() and not np.isnan(v).any():
            nonneg.setdefault(array_digest(v), n)
    out = {}
    for n, v in xs.items():
        r = nonneg.get(array_digest(np.maximum(v, v.dtype.type(0))))
        if r is not None:
            out[n] = r
    return out


def _elem_type(value) -> int:
    """The onnx element type of a saved array's dtype (0 where onnx has none)."""
    try:
        return int(helper.np_dtype_to_tensor_dtype(np.asarray(value).dtype))
    except (KeyError, TypeError, ValueError):
        return 0


def own_tensors(side: Side, names) -> Side:
    """Side A against saved values of its own tensors (``own_snapshot``): each saved tensor A computes is
    observed as it is (a QDQ model's Conv output, a QOperator model's uint8 tensor), not through the
    DequantizeLinear view its float model's tensor of that name is compared with; those views leave."""
    proto = side.model.proto
    sites = {t: s for s in walk(proto) if not s.chain for t in s.node.output if t}
    types, outputs = value_types(proto), {o.name for o in proto.graph.output}
    # (a string tensor, a sequence stays what it is, no numbers: observed, it was unmatched twice and failed the verdict)
    no_numbers = {o.name for o in side.observation.no_numbers}
    taken = [n for n in names if n in sites and n not in no_numbers]
    floats = {o.probe: o for o in side.observation.observables if o.kind == "float"}
    own = [floats.get(n) or Observable(key=n, name=n, probe=n, node=sites[n].name, node_named=bool(sites[n].node.name),
                                       op_type=sites[n].node.op_type, effective_op=sites[n].node.op_type, index=sites[n].index,
                                       shape=static_shape(types.get(n)), kind="float", is_output=n in outputs) for n in taken]
    gone, obs = set(taken), side.observation
    of = {d.output: d.quantized for d in obs.dequantize}  # a probe that dequantizes a saved tensor is its view too
    rest = [o for o in obs.observables if not {o.key, o.name, o.probe, of.get(o.probe)} & gone]
    observation = replace(obs, observables=sorted(rest + own, key=lambda o: o.index),
                          hidden={k: v for k, v in obs.hidden.items() if k not in gone})
    return replace(side, observation=observation, own_snapshot=True)
