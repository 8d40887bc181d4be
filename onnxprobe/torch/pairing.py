"""Pairing an export's ONNX tensors with its PyTorch module's outputs, from the ONNX file alone
(``match.modules``) and one forward pass (which modules ran, how often, with which output shapes).

Each module whose scope holds nodes pairs with the tensor that leaves that scope (of several, the one of
torch's shape whose values are what the module returns: a forward may compute after its return value);
where a parent and its last child leave through the same tensor, the child (the innermost module) takes
it. The exporters fuse:

- legacy folds a BatchNormalization into the Conv that feeds it and keeps the Conv's names, so that tensor
  holds the BatchNormalization's output: it pairs with the BatchNormalization module, the Conv is
  unmatched ("folded");
- dynamo's optimizer fuses the same pair into the BatchNormalization's node (FuseBatchNormIntoConv): the
  Conv has no node, and is unmatched ("fused");
- a module whose nodes no model input reaches (a rotary embedding's cos / sin of positions that static shapes let
  the exporter fold into constants) computes a constant of the graph, not a layer: unmatched, saying so;
- modules that leave no node (Dropout and Identity in eval mode; a module whose parent uses its weights
  directly, so its forward never runs) are unmatched with that reason, never silently absent;
- a module called more than once, and one whose output's shape differs from its tensor (an LSTM output
  kept sequence-major), stay unmatched with the reason.

The model's outputs pair with what the module returns, by position. Every pair says how it was made.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from onnxprobe.compare.sides import Side
from onnxprobe.errors import UsageError, setting_error
from onnxprobe.graph.model import Model
from onnxprobe.graph.shapes import concrete_sizes
from onnxprobe.graph.walk import constant_tensors
from onnxprobe.match.engine import (DIFFERENT_FUNCTION, FOLDED, NO_COUNTERPART, NOT_OBSERVABLE, OTHER_SHAPE, MAP, Matching, Pair,
                                    Unmatched, shapes_agree)
from onnxprobe.match.modules import exporter, module_scopes
from onnxprobe.match.observe import Observable, Observation
from onnxprobe.runtime.budget import default_budget
from onnxprobe.text import some
from onnxprobe.torch.module_outputs import (BATCHNORMS, folded_outputs, fused_batchnorm, one_permutation,
                                            returned_tensors, unscoped_reader, unwrapped_scopes)
from onnxprobe.torch.runner import OUTPUT, PERM, Forward, TorchRunner
from onnxprobe.torch.load import VS_TORCH

NO_SCOPES = ("the ONNX file carries no module scopes (the dynamo exporter keeps them at opset >= 18, onnx's version "
             "converter drops them; legacy exports keep them in node names): only the model outputs are compared")
ELIDED = ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "Identity")


@dataclass
class TorchPairing:
    side: Side  # B: the torch module, one observable per module output (and per returned tensor)
    pairs: list[Pair]
    unmatched_b: list[Unmatched]
    exporter: str | None
    # module path -> why it is unmatched, where the export traced another branch of forward() than torch ran
    branch: dict[str, str] = field(default_factory=dict)
    # ONNX tensor -> why it pairs with nothing though a module returns it: the output of one of the calls of a
    # module forward() calls several times (a ResNet block's one ReLU), whose calls are not kept apart
    repeated: dict[str, str] = field(default_factory=dict)

    def matcher(self, modules: set[str]):
        """The pairing as the diff's ``pair`` hook: A's observables -> a Matching. A user map
        ``{ONNX tensor: module path}`` overrides it (``output[K]`` names what forward() returns)."""

        def pair(obs_a: list[Observable], obs_b: list[Observable], user_map=None) -> Matching:
            by_name = {o.name: o for o in obs_a}
            pairs = [Pair(by_name.get(p.a.name, p.a), p.b, p.strategy, p.reason) for p in self.pairs]
            unmatched_b = list(self.unmatched_b)
            b_by_name = {o.name: o for o in obs_b}
            for ta, path in (user_map or {}).items():
                a = by_name.get(ta)
                if a is None:
                    raise setting_error(UsageError, MAP, f": {ta!r} is not an observable tensor of the ONNX model")
                b = b_by_name.get(path)
                if b is None and path not in modules:
                    raise setting_error(UsageError, MAP, f": {path!r} is not a module of the torch model (nor output[K])")
                b = b or _observable(path, "module", None, a.index, a)
                b = replace(b, key=a.key, index=a.index)
                pairs = [p for p in pairs if p.a.name != ta and p.b.name != path]
                unmatched_b = [u for u in unmatched_b if u.obs.name != path]
                pairs.append(Pair(a, b, "map", "given by --map"))
            taken = {p.a.name for p in pairs}
            unmatched_a = [Unmatched(o, self.repeated.get(o.name)
                                     or "not the output of any module of the torch model (an intermediate tensor)")
                           for o in obs_a if o.name not in taken]
            return Matching(sorted(pairs, key=lambda p: p.a.index), unmatched_a, unmatched_b)

        return pair


def _observable(path: str, cls: str, shape, index: int, a: Observable | None = None, *, output: bool = False,
                probe: str | None = None) -> Observable:
    return Observable(key=a.key if a is not None else path, name=path, probe=probe or path, node=cls, op_type=cls,
                      effective_op=a.effective_op if a is not None else cls, index=a.index if a is not None else index,
                      shape=tuple(shape) if shape is not None else None, kind="float", is_output=output,
                      module=None if path.startswith("output[") else path)


@dataclass
class _ModulePairing:
    """What the steps of ``pair_with_module`` share: the export, the torch module and its one forward pass, the
    tensors leaving each module's scope and the one each returns, and the pairs and unmatched modules so far."""
    model: Model
    runner: TorchRunner
    feeds: dict[str, np.ndarray]
    modules: dict[str, object]  # module path -> the module
    classes: dict[str, str]  # module path -> its class name
    scopes: dict  # module path -> its scope in the export (``match.modules.module_scopes``)
    obs_by_name: dict[str, Observable]  # A's observables by ONNX tensor name
    leaving: dict[str, list[str]]  # module path -> the observable tensors leaving its scope
    fw: Forward
    candidates: dict[str, str]  # module path -> the tensor holding what it returns (``returned_tensors``)
    refused: dict[str, str]  # module path -> why none of its leaving tensors does
    kind: str | None  # the exporter ("dynamo", "legacy"), None where the file says neither
    owner: dict[str, str] = field(default_factory=dict)  # tensor -> the innermost module leaving through it
    folded_into: dict[str, str] = field(default_factory=dict)  # layer -> the BatchNorm legacy folded into it
    nodeless: list[str] = field(default_factory=list)  # modules that ran and have no node, nor a reason of their own
    pairs: list[Pair] = field(default_factory=list)
    unmatched: list[Unmatched] = field(default_factory=list)
    constants: set[str] | None = None  # the graph's tensors no model input reaches, once asked

    @property
    def how(self) -> str:
        """The strategy a module's pair is made by, after the exporter's scopes."""
        return {"dynamo": "torch-metadata", "legacy": "torch-scope"}.get(self.kind, "torch-scope")

    def fixed(self) -> set[str]:
        """The graph's tensors no model input reaches (walked once, where asked)."""
        if self.constants is None:
            self.constants = constant_tensors(self.model.proto)
        return self.constants

    def note(self, path: str, reason: str, cause: str) -> None:
        """Lists module (or ``output[K]``) ``path`` as unmatched, with the reason and its cause."""
        self.unmatched.append(Unmatched(_observable(path, self.classes.get(path, "?"), self.fw.shapes.get(path), 1 << 30),
                                        reason, cause))


def pair_with_module(model: Model, observation: Observation, runner: TorchRunner, feeds: dict[str, np.ndarray],
                     budget: int | None = None, onnx_values: Callable | None = None) -> TorchPairing:
    """Map, run once, pair. The candidate modules' outputs of that pass are kept for the diff's first
    request when their ONNX sizes add up to at most ``budget`` bytes (default: an eighth of the diff's
    memory budget); else the diff runs the module again per chunk. ``onnx_values(names)``: {ONNX tensor:
    value} on ``feeds``, which tells which of several tensors leaving a module's scope it returns."""
    modules = dict(runner.module.named_modules())
    scopes = unwrapped_scopes(module_scopes(model.proto, set(modules)), runner.module)
    obs_by_name = {o.name: o for o in observation.observables}
    leaving = _leaving(scopes, obs_by_name)
    keep = _kept(model, feeds, leaving, budget)
    fw: Forward = runner.forward(feeds, keep)
    if keep:
        runner.remember(feeds, fw)
    candidates, refused = returned_tensors(leaving, fw, obs_by_name, onnx_values)
    st = _ModulePairing(model, runner, feeds, modules, {p: type(m).__name__ for p, m in modules.items()}, scopes,
                        obs_by_name, leaving, fw, candidates, refused, exporter(model.proto))
    st.owner = _innermost_owners(st)
    st.folded_into = _legacy_batchnorm_folds(st)
    for p in fw.order:
        if p:
            _pair_module(st, p)
    idle = [p for p, m in modules.items() if p and p not in fw.calls and (p in leaving or _leaf(m))]
    branch = _other_branch(st, idle)
    _note_nodeless(st, branch)
    for p in idle:
        # a module with a scope, or a leaf (a layer, not a container) whose forward never ran: listed, not left
        # out (a Linear whose weight the parent uses directly, F.linear(h, self.side.weight))
        st.note(p, branch.get(p, "its forward never ran (its parameters may be read directly, as F.linear(x, "
                                 "self.side.weight) does): no output to compare"), NOT_OBSERVABLE)
    _pair_outputs(st)
    b_obs = [p.b for p in st.pairs] + [u.obs for u in st.unmatched]
    side = Side(runner.label, model, runner, Observation(b_obs))
    return TorchPairing(side, sorted(st.pairs, key=lambda p: p.a.index), st.unmatched, st.kind, branch,
                        _repeated_outputs(leaving, fw))


def _leaving(scopes: dict, obs_by_name: dict[str, Observable]) -> dict[str, list[str]]:
    """Module path -> the observable tensors leaving its scope, for the modules (not the root) with any."""
    leaving = {p: [t for t in s.outputs if t in obs_by_name] for p, s in scopes.items() if p}
    return {p: ts for p, ts in leaving.items() if ts}


def _kept(model: Model, feeds: dict[str, np.ndarray], leaving: dict[str, list[str]], budget: int | None) -> set[str]:
    """The modules whose outputs the forward pass keeps: all where their last leaving tensors' ONNX sizes add up
    to at most ``budget`` bytes (default: an eighth of the memory budget); and always those a model output leaves
    (to check they are what forward() returns) or several tensors leave (torch's value tells which it returns)."""
    sizes = concrete_sizes(model.proto, {k: v.shape for k, v in feeds.items()})
    need = sum(sizes.get(ts[-1], 0) for ts in leaving.values())
    keep = set(leaving) if need <= (budget if budget is not None else default_budget() // 8) else set()
    model_outputs = {o.name for o in model.proto.graph.output}
    keep |= {p for p, ts in leaving.items() if model_outputs & set(ts)}
    keep |= {p for p, ts in leaving.items() if len(ts) > 1}
    return keep


def _innermost_owners(st: _ModulePairing) -> dict[str, str]:
    """Tensor -> the innermost module whose returned tensor it is. Not a module called more than once (each call
    is another tensor: it pairs with none), nor a path that names no module (a shared module's second place,
    seq.2 of Sequential(l, act, l)): the tensor then belongs to the enclosing module, which is compared there."""
    owner: dict[str, str] = {}
    for p, t in st.candidates.items():
        if st.fw.calls.get(p, 0) > 1 or p not in st.modules:
            continue
        if t not in owner or len(p) > len(owner[t]):
            owner[t] = p
    return owner


def _legacy_batchnorm_folds(st: _ModulePairing) -> dict[str, str]:
    """Layer -> the BatchNormalization legacy folded into it: one with no node of its own, run on the layer's
    output, where the layer owns its returned tensor."""
    folded_into: dict[str, str] = {}
    for bn, p in st.fw.fed_by.items():
        if (st.classes.get(bn) in BATCHNORMS and bn not in st.scopes and p in st.candidates
                and st.owner.get(st.candidates[p]) == p):
            folded_into[p] = bn
    return folded_into


def _pair_module(st: _ModulePairing, p: str) -> None:
    """Pairs module ``p``, which ran, with the tensor it returns, or notes why not; one with no tensor and no
    reason of its own goes to ``st.nodeless``."""
    cls, t = st.classes.get(p, "?"), st.candidates.get(p)
    why = _unpairable(st, p)
    if why is not None:
        st.note(p, *why)
    elif p in st.folded_into:
        _pair_folded(st, p, t)
    elif any(st.folded_into.get(q) == p for q in st.folded_into):
        pass  # the BatchNormalization that took its layer's tensor: paired with the layer's
    elif t is None:
        _note_without_tensor(st, p, cls)
    elif st.owner.get(t) != p:
        child = st.folded_into.get(st.owner[t], st.owner[t])
        st.note(p, f"leaves through the same tensor as its last child {child} (compared there)", FOLDED)
    else:
        _pair_leaving(st, p, t, cls)


def _unpairable(st: _ModulePairing, p: str) -> tuple[str, str] | None:
    """(reason, cause) where module ``p`` cannot pair whatever its tensors: called several times, returning
    several tensors of one shape, or none of its leaving tensors holding what it returns; else None."""
    calls = st.fw.calls.get(p, 0)
    if calls > 1:
        return f"called {calls} times in one forward pass: each call is another tensor", NO_COUNTERPART
    if p in st.fw.ambiguous and p in st.candidates:
        return (f"returns {st.fw.ambiguous[p]} tensors of one shape: which ONNX tensor holds which is not known, so "
                "none is compared here (the modules inside it are)", NOT_OBSERVABLE)
    if p in st.refused:
        return st.refused[p], DIFFERENT_FUNCTION
    return None


def _pair_folded(st: _ModulePairing, p: str, t: str) -> None:
    """Pairs the tensor of layer ``p`` with the BatchNormalization legacy folded into it, and notes ``p`` folded."""
    bn = st.folded_into[p]
    a = st.obs_by_name[t]
    st.pairs.append(Pair(a, _observable(bn, st.classes[bn], st.fw.shapes.get(bn), a.index, a, probe=bn), st.how,
                         f"legacy scope of {p}: the exporter folded the BatchNormalization {bn} into this "
                         f"{a.op_type}, whose output is {bn}'s"))
    st.note(p, f"folded with the BatchNormalization {bn} into one {a.op_type}: its output exists only "
               f"after {bn} (compared there)", FOLDED)


def _note_without_tensor(st: _ModulePairing, p: str, cls: str) -> None:
    """Notes why module ``p``, which no observable tensor leaves, is unmatched: its scope computes constants,
    or holds no observable tensor, or the exporter elides or fused it; else it goes to ``st.nodeless``."""
    s = st.scopes.get(p)
    if s is not None and s.outputs and all(o in st.fixed() for o in s.outputs):
        # static shapes: the exporter folded what feeds it (positions, arange) into constants, so its
        # nodes compute a constant of the graph, a weight, not a layer output (Llama's rotary_emb)
        st.note(p, _from_constants(f"no model input reaches it (the exporter folded what feeds it into "
                                   f"constants), so its ONNX tensors ({s.output!r}) are"), NOT_OBSERVABLE)
    elif s is not None and s.outputs:
        st.note(p, f"its scope's tensors are not observable here ({s.output!r})", NOT_OBSERVABLE)
    elif cls in ELIDED:
        st.note(p, f"no ONNX node: the exporter elides {cls} in eval mode (it is the identity)", NOT_OBSERVABLE)
    elif (fused := fused_batchnorm(p, st.scopes, st.classes, st.fw.order, st.fw.fed_by)) is not None:
        st.note(p, f"no ONNX node of its own: the exporter's optimizer fused it into {fused} "
                   f"({', '.join(st.scopes[fused].rewrites)}); compared there", FOLDED)
    else:
        st.nodeless.append(p)  # said later: another branch traced, or fused away


def _pair_leaving(st: _ModulePairing, p: str, t: str, cls: str) -> None:
    """Pairs module ``p`` with tensor ``t``, which it owns: as it is where the shapes agree, through the one
    transposition of torch's shape that gives the ONNX one where they do not, else notes the other shape."""
    a = st.obs_by_name[t]
    torch_shape = st.fw.shapes.get(p)
    if a.shape is not None and torch_shape is not None and not shapes_agree(a.shape, tuple(torch_shape)):
        perm = one_permutation(torch_shape, a.shape)
        if perm is None:
            st.note(p, f"{t!r} has shape {list(a.shape)} in ONNX but {list(torch_shape)} in torch (another shape, "
                       "and no single transposition of torch's gives it)", OTHER_SHAPE)
            return
        st.pairs.append(Pair(a, _observable(p, cls, tuple(torch_shape[i] for i in perm), a.index, a,
                                            probe=f"{p}{PERM}{','.join(map(str, perm))}"), st.how,
                             f"{st.kind or 'the'} scope of {p}: the {cls}'s output in another layout "
                             f"({list(torch_shape)} in torch, compared transposed to {list(a.shape)})"))
        return
    scope = f"name_scopes {p!r}" if st.kind == "dynamo" else f"legacy scope of {p}"
    st.pairs.append(Pair(a, _observable(p, cls, torch_shape, a.index, a), st.how,
                         f"{scope}: the tensor that leaves the {cls}"))


def _other_branch(st: _ModulePairing, idle: list[str]) -> dict[str, str]:
    """Module path -> why it is unmatched, where the graph holds nodes of modules that did not run (``idle``) and
    modules that ran have none: the export traced another branch of forward()'s control flow (`a(x) if x.sum()
    > 0 else b(x)`, exported where it was > 0); empty otherwise."""
    traced = [p for p in idle if p in st.scopes and st.scopes[p].nodes]
    if not (traced and st.nodeless):
        return {}
    return {p: (f"the ONNX graph holds module {_names(traced)}'s nodes but torch ran {_names(st.nodeless)}: the export "
                "traced another branch of forward()'s control flow (or other inputs)") for p in traced + st.nodeless}


def _note_nodeless(st: _ModulePairing, branch: dict[str, str]) -> None:
    """Notes why each module of ``st.nodeless`` is unmatched: its output folded whole into a constant (found by
    value), another branch traced, no node carrying its scope, or its nodes there without its scope."""
    readers = {p: unscoped_reader(st.model.proto, p, st.modules[p]) if st.kind is not None else None
               for p in st.nodeless}
    folded = folded_outputs(st.model.proto, st.runner, st.feeds, st.fw,
                             [p for p in st.nodeless if st.kind is not None and p not in branch and readers[p] is None])
    for p in st.nodeless:
        reader = readers[p]
        if p in folded:
            st.note(p, _from_constants(f"the exporter folded its whole output into the {folded[p]} (equal "
                                       "to torch's output, found by value) and left no node of it, so its values are"),
                    NOT_OBSERVABLE)
            continue
        if p in branch or reader is None:
            st.note(p, branch.get(p, NO_SCOPES if st.kind is None else "no ONNX node carries its scope: fused away or "
                                     "removed by the exporter"), NOT_OBSERVABLE)
            continue
        node, weight = reader  # its nodes are there, without its scope: which tensor is its output is not known
        why = "; the dynamo exporter writes what forward() computes inside torch.no_grad() so" if st.kind == "dynamo" else ""
        st.note(p, f"its nodes are in the graph without its scope (node {node.name or node.op_type!r} reads its "
                   f"parameter {weight}{why}): which tensor is its output is not known, not compared", NOT_OBSERVABLE)


def _pair_outputs(st: _ModulePairing) -> None:
    """Pairs the model's outputs with what forward() returns, by position, in place of the pair of the module
    that made each (noted where forward() changes that module's output after it). Raises UsageError where
    their count or shapes differ: not the model that was exported."""
    outputs = [o.name for o in st.model.proto.graph.output]
    fw = st.fw
    if len(fw.outputs) != len(outputs):
        raise setting_error(UsageError, VS_TORCH, f": the module returns {len(fw.outputs)} tensor(s), the ONNX model "
                            f"has {len(outputs)} output(s) ({', '.join(outputs)}): not the model that was exported")
    for k, (name, value) in enumerate(zip(outputs, fw.outputs)):
        a = st.obs_by_name.get(name)
        if a is None:  # a weight or an input returned as it is: no node computes it
            st.note(f"output[{k}]", f"the ONNX output {name!r} is not an activation (a weight, an input returned as it "
                                    "is, or computed from weights alone): not compared", NOT_OBSERVABLE)
            continue
        if a.shape is not None and not shapes_agree(a.shape, tuple(value.shape)):
            raise setting_error(UsageError, VS_TORCH, f": output {k} of the module has shape {list(value.shape)}, ONNX "
                                f"output {name!r} is {list(a.shape)}: not the model that was exported (or other inputs)")
        maker = next((p.b.name for p in st.pairs if p.a.name == name), None)
        st.pairs = [p for p in st.pairs if p.a.name != name]  # the model output pairs by position, whatever module made it
        if maker is not None and maker in fw.values and not (
                np.shape(fw.values[maker]) == np.shape(value) and np.array_equal(fw.values[maker], value, equal_nan=True)):
            # forward() changes the module's output after it (adds, scales): the output is forward's own, and
            # the module's own output is not the tensor its scope ends in
            st.note(maker, f"its output is changed by forward() after it (model output {k} is what forward returns, "
                           f"compared as output[{k}]): the ONNX tensor its scope ends in is not the module's output",
                    NO_COUNTERPART)
            maker = None
        made = f", made by module {maker}" if maker else ""
        st.pairs.append(Pair(a, _observable(maker or f"output[{k}]", st.classes.get(maker, "output"), value.shape, a.index,
                                            a, output=True, probe=f"{OUTPUT}{k}"),
                             "torch-output", f"the model's output {k}, what forward() returns{made}"))


def _repeated_outputs(leaving: dict[str, list[str]], fw: Forward) -> dict[str, str]:
    """ONNX tensor -> why it pairs with nothing: an output of a module forward() calls several times."""
    return {t: (f"an output of {p}, which forward() calls {fw.calls[p]} times in one forward pass: each call is "
                "another tensor, so none is compared with the module")
            for p, ts in leaving.items() if fw.calls.get(p, 0) > 1 for t in ts}


def _from_constants(how: str) -> str:
    """The reason of a module whose output the export holds as constants (``how`` ends in "are")."""
    return f"computed from constants alone: {how} constants of the export, not layer outputs: not compared"


def _leaf(m) -> bool:
    """Whether module ``m`` has no children (a layer, not a container)."""
    return not any(True for _ in getattr(m, "children", lambda: ())())


def _names(paths: list[str], shown: int = 3) -> str:
    """The outermost of ``paths`` (b, not also b.0 and b.1), a few of them."""
    paths = [p for p in paths if not any(p.startswith(q + ".") for q in paths)]
    return some(paths, shown, str)


