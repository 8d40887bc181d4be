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


def pair_with_module(model: Model, observation: Observation, runner: TorchRunner, feeds: dict[str, np.ndarray],
                     budget: int | None = None, onnx_values: Callable | None = None) -> TorchPairing:
    """Map, run once, pair. The candidate modules' outputs of that pass are kept for the diff's first
    request when their ONNX sizes add up to at most ``budget`` bytes (default: an eighth of the diff's
    memory budget); else the diff runs the module again per chunk. ``onnx_values(names)``: {ONNX tensor:
    value} on ``feeds``, which tells which of several tensors leaving a module's scope it returns."""
    modules = dict(runner.module.named_modules())
    classes = {p: type(m).__name__ for p, m in modules.items()}
    scopes = unwrapped_scopes(module_scopes(model.proto, set(modules)), runner.module)
    obs_by_name = {o.name: o for o in observation.observables}
    leaving = {p: [t for t in s.outputs if t in obs_by_name] for p, s in scopes.items() if p}
    leaving = {p: ts for p, ts in leaving.items() if ts}
    sizes = concrete_sizes(model.proto, {k: v.shape for k, v in feeds.items()})
    need = sum(sizes.get(ts[-1], 0) for ts in leaving.values())
    keep = set(leaving) if need <= (budget if budget is not None else default_budget() // 8) else set()
    model_outputs = {o.name for o in model.proto.graph.output}
    keep |= {p for p, ts in leaving.items() if model_outputs & set(ts)}  # to check they are what forward() returns
    keep |= {p for p, ts in leaving.items() if len(ts) > 1}  # several leave: torch's value tells which it returns
    fw: Forward = runner.forward(feeds, keep)
    if keep:
        runner.remember(feeds, fw)
    candidates, refused = returned_tensors(leaving, fw, obs_by_name, onnx_values)
    kind = exporter(model.proto)
    how = {"dynamo": "torch-metadata", "legacy": "torch-scope"}.get(kind, "torch-scope")
    pairs: list[Pair] = []
    unmatched: list[Unmatched] = []
    owner: dict[str, str] = {}  # tensor -> the innermost module leaving through it
    for p, t in candidates.items():
        # not a module called more than once (each call is another tensor: it pairs with none), nor a path
        # that names no module (a shared module's second place, seq.2 of Sequential(l, act, l)): the tensor
        # then belongs to the enclosing module, which is compared there
        if fw.calls.get(p, 0) > 1 or p not in modules:
            continue
        if t not in owner or len(p) > len(owner[t]):
            owner[t] = p
    folded_into: dict[str, str] = {}
    nodeless: list[str] = []  # modules that ran and have no node, nor a reason of their own
    order = fw.order
    for bn, p in fw.fed_by.items():  # legacy: a BatchNormalization with no node of its own, on a layer's output
        if classes.get(bn) in BATCHNORMS and bn not in scopes and p in candidates and owner.get(candidates[p]) == p:
            folded_into[p] = bn

    const: list[set[str]] = []

    def fixed() -> set[str]:  # the graph's tensors no model input reaches (walked once, where asked)
        if not const:
            const.append(constant_tensors(model.proto))
        return const[0]

    def note(path: str, reason: str, cause: str) -> None:
        unmatched.append(Unmatched(_observable(path, classes.get(path, "?"), fw.shapes.get(path), 1 << 30), reason, cause))

    for p in order:
        if not p:
            continue
        cls = classes.get(p, "?")
        calls = fw.calls.get(p, 0)
        t = candidates.get(p)
        if calls > 1:
            note(p, f"called {calls} times in one forward pass: each call is another tensor", NO_COUNTERPART)
            continue
        if p in fw.ambiguous and p in candidates:
            note(p, f"returns {fw.ambiguous[p]} tensors of one shape: which ONNX tensor holds which is not known, so "
                    "none is compared here (the modules inside it are)", NOT_OBSERVABLE)
            continue
        if p in refused:
            note(p, refused[p], DIFFERENT_FUNCTION)
            continue
        if p in folded_into:
            bn = folded_into[p]
            a = obs_by_name[t]
            pairs.append(Pair(a, _observable(bn, classes[bn], fw.shapes.get(bn), a.index, a, probe=bn), how,
                              f"legacy scope of {p}: the exporter folded the BatchNormalization {bn} into this "
                              f"{a.op_type}, whose output is {bn}'s"))
            note(p, f"folded with the BatchNormalization {bn} into one {a.op_type}: its output exists only "
                    f"after {bn} (compared there)", FOLDED)
            continue
        if any(folded_into.get(q) == p for q in folded_into):
            continue  # the BatchNormalization that took its layer's tensor: paired above
        if t is None:
            s = scopes.get(p)
            if s is not None and s.outputs and all(o in fixed() for o in s.outputs):
                # static shapes: the exporter folded what feeds it (positions, arange) into constants, so its
                # nodes compute a constant of the graph, a weight, not a layer output (Llama's rotary_emb)
                note(p, _from_constants(f"no model input reaches it (the exporter folded what feeds it into "
                                        f"constants), so its ONNX tensors ({s.output!r}) are"), NOT_OBSERVABLE)
            elif s is not None and s.outputs:
                note(p, f"its scope's tensors are not observable here ({s.output!r})", NOT_OBSERVABLE)
            elif cls in ELIDED:
                note(p, f"no ONNX node: the exporter elides {cls} in eval mode (it is the identity)", NOT_OBSERVABLE)
            elif (fused := fused_batchnorm(p, scopes, classes, order, fw.fed_by)) is not None:
                note(p, f"no ONNX node of its own: the exporter's optimizer fused it into {fused} "
                        f"({', '.join(scopes[fused].rewrites)}); compared there", FOLDED)
            else:
                nodeless.append(p)  # said below: another branch traced, or fused away
            continue
        if owner.get(t) != p:
            child = folded_into.get(owner[t], owner[t])
            note(p, f"leaves through the same tensor as its last child {child} (compared there)", FOLDED)
            continue
        a = obs_by_name[t]
        torch_shape = fw.shapes.get(p)
        if a.shape is not None and torch_shape is not None and not shapes_agree(a.shape, tuple(torch_shape)):
            perm = one_permutation(torch_shape, a.shape)
            if perm is None:
                note(p, f"{t!r} has shape {list(a.shape)} in ONNX but {list(torch_shape)} in torch (another shape, "
                        "and no single transposition of torch's gives it)", OTHER_SHAPE)
                continue
            pairs.append(Pair(a, _observable(p, cls, tuple(torch_shape[i] for i in perm), a.index, a,
                                             probe=f"{p}{PERM}{','.join(map(str, perm))}"), how,
                              f"{kind or 'the'} scope of {p}: the {cls}'s output in another layout "
                              f"({list(torch_shape)} in torch, compared transposed to {list(a.shape)})"))
            continue
        scope = f"name_scopes {p!r}" if kind == "dynamo" else f"legacy scope of {p}"
        pairs.append(Pair(a, _observable(p, cls, torch_shape, a.index, a), how, f"{scope}: the tensor that leaves the {cls}"))
    idle = [p for p, m in modules.items() if p and p not in fw.calls and (p in leaving or _leaf(m))]
    # the graph holds nodes of modules that did not run, and modules that ran have none: the export traced
    # another branch of forward()'s control flow (`a(x) if x.sum() > 0 else b(x)`, exported where it was > 0)
    traced = [p for p in idle if p in scopes and scopes[p].nodes]
    branch = {}
    if traced and nodeless:
        branch = {p: (f"the ONNX graph holds module {_names(traced)}'s nodes but torch ran {_names(nodeless)}: the export "
                      "traced another branch of forward()'s control flow (or other inputs)") for p in traced + nodeless}
    readers = {p: unscoped_reader(model.proto, p, modules[p]) if kind is not None else None for p in nodeless}
    folded = folded_outputs(model.proto, runner, feeds, fw, [p for p in nodeless if kind is not None
                                                              and p not in branch and readers[p] is None])
    for p in nodeless:
        reader = readers[p]
        if p in folded:
            note(p, _from_constants(f"the exporter folded its whole output into the {folded[p]} (equal "
                                    "to torch's output, found by value) and left no node of it, so its values are"),
                 NOT_OBSERVABLE)
            continue
        if p in branch or reader is None:
            note(p, branch.get(p, NO_SCOPES if kind is None else "no ONNX node carries its scope: fused away or removed "
                                  "by the exporter"), NOT_OBSERVABLE)
            continue
        node, weight = reader  # its nodes are there, without its scope: which tensor is its output is not known
        why = "; the dynamo exporter writes what forward() computes inside torch.no_grad() so" if kind == "dynamo" else ""
        note(p, f"its nodes are in the graph without its scope (node {node.name or node.op_type!r} reads its parameter "
                f"{weight}{why}): which tensor is its output is not known, not compared", NOT_OBSERVABLE)
    for p in idle:
        # a module with a scope, or a leaf (a layer, not a container) whose forward never ran: listed, not left
        # out (a Linear whose weight the parent uses directly, F.linear(h, self.side.weight))
        note(p, branch.get(p, "its forward never ran (its parameters may be read directly, as F.linear(x, "
                              "self.side.weight) does): no output to compare"), NOT_OBSERVABLE)
    outputs = [o.name for o in model.proto.graph.output]
    if len(fw.outputs) != len(outputs):
        raise setting_error(UsageError, VS_TORCH, f": the module returns {len(fw.outputs)} tensor(s), the ONNX model "
                            f"has {len(outputs)} output(s) ({', '.join(outputs)}): not the model that was exported")
    for k, (name, value) in enumerate(zip(outputs, fw.outputs)):
        a = obs_by_name.get(name)
        if a is None:  # a weight or an input returned as it is: no node computes it
            note(f"output[{k}]", f"the ONNX output {name!r} is not an activation (a weight, an input returned as it "
                                 "is, or computed from weights alone): not compared", NOT_OBSERVABLE)
            continue
        if a.shape is not None and not shapes_agree(a.shape, tuple(value.shape)):
            raise setting_error(UsageError, VS_TORCH, f": output {k} of the module has shape {list(value.shape)}, ONNX "
                                f"output {name!r} is {list(a.shape)}: not the model that was exported (or other inputs)")
        maker = next((p.b.name for p in pairs if p.a.name == name), None)
        pairs = [p for p in pairs if p.a.name != name]  # the model output pairs by position, whatever module made it
        if maker is not None and maker in fw.values and not (
                np.shape(fw.values[maker]) == np.shape(value) and np.array_equal(fw.values[maker], value, equal_nan=True)):
            # forward() changes the module's output after it (adds, scales): the output is forward's own, and
            # the module's own output is not the tensor its scope ends in
            note(maker, f"its output is changed by forward() after it (model output {k} is what forward returns, compared "
                        f"as output[{k}]): the ONNX tensor its scope ends in is not the module's output", NO_COUNTERPART)
            maker = None
        made = f", made by module {maker}" if maker else ""
        pairs.append(Pair(a, _observable(maker or f"output[{k}]", classes.get(maker, "output"), value.shape, a.index, a,
                                         output=True, probe=f"{OUTPUT}{k}"),
                          "torch-output", f"the model's output {k}, what forward() returns{made}"))
    b_obs = [p.b for p in pairs] + [u.obs for u in unmatched]
    side = Side(runner.label, model, runner, Observation(b_obs))
    repeated = {t: (f"an output of {p}, which forward() calls {fw.calls[p]} times in one forward pass: each call is "
                    "another tensor, so none is compared with the module")
                for p, ts in leaving.items() if fw.calls.get(p, 0) > 1 for t in ts}
    return TorchPairing(side, sorted(pairs, key=lambda p: p.a.index), unmatched, kind, branch, repeated)


def _from_constants(how: str) -> str:
    """The reason of a module whose output the export holds as constants (``how`` ends in "are")."""
    return f"computed from constants alone: {how} constants of the export, not layer outputs: not compared"


def _leaf(m) -> bool:
    """Whether module ``m`` has no children (a layer, not a container)."""
    return not any(True for _ in getattr(m, "children", lambda: ())())


def _names(paths: list[str], shown: int = 3) -> str:
    """The outermost of ``paths`` (b, not also b.0 and b.1), a few of them."""
    paths = [p for p in paths if not any(p.startswith(q + ".") for q in paths)]
    return ", ".join(paths[:shown]) + (f" and {len(paths) - shown} more" if len(paths) > shown else "")


