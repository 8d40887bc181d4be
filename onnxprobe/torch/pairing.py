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

import itertools
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np
from onnx import TensorProto

from onnxprobe.compare.sides import Side
from onnxprobe.errors import UsageError, setting_error
from onnxprobe.graph.model import Model
from onnxprobe.graph.shapes import concrete_sizes
from onnxprobe.graph.tensor_data import tensor_values
from onnxprobe.graph.walk import constant_tensors
from onnxprobe.match.engine import (DIFFERENT_FUNCTION, FOLDED, NO_COUNTERPART, NOT_OBSERVABLE, OTHER_SHAPE, MAP, Matching, Pair,
                                    Unmatched, shapes_agree)
from onnxprobe.match.modules import exporter, module_scopes
from onnxprobe.match.observe import Observable, Observation
from onnxprobe.runtime.budget import default_budget
from onnxprobe.torch.runner import OUTPUT, PERM, Forward, TorchRunner
from onnxprobe.torch.load import VS_TORCH

FLOATS = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16)
BATCHNORMS = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm")
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
    scopes = _unwrapped(module_scopes(model.proto, set(modules)), runner.module)
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
    candidates, refused = _returned(leaving, fw, obs_by_name, onnx_values)
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
            elif (fused := _fused_into(p, scopes, classes, order, fw.fed_by)) is not None:
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
            perm = _permutation(torch_shape, a.shape)
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
    readers = {p: _unscoped_reader(model.proto, p, modules[p]) if kind is not None else None for p in nodeless}
    folded = _folded_outputs(model.proto, runner, feeds, fw, [p for p in nodeless if kind is not None
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


def _folded_outputs(proto, runner: TorchRunner, feeds: dict[str, np.ndarray], fw: Forward, paths: list[str]
                    ) -> dict[str, str]:
    """module -> the main graph's initializer (or Constant) that holds its output ("initializer 'w'"), for those of
    ``paths`` (modules that ran and left no node) whose torch output a constant of the graph equals: the exporter
    folded a module of
    constant inputs whole (an Embedding of ``arange(n)``, n static: Whisper's embed_positions). Found by value,
    where a constant of the module's shape is: only then is the module run again, keeping those outputs."""
    consts: dict[str, TensorProto] = {t.name: t for t in proto.graph.initializer}
    inits = set(consts)
    for n in proto.graph.node:
        if n.op_type == "Constant" and n.output and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = n.attribute[0].t
    by_shape: dict[tuple[int, ...], list[str]] = {}
    for name, t in consts.items():
        if t.data_type in FLOATS:
            by_shape.setdefault(tuple(t.dims), []).append(name)
    ask = {p: by_shape[tuple(fw.shapes[p])] for p in paths if tuple(fw.shapes.get(p, (-1,))) in by_shape}
    if not ask:
        return {}
    got = runner.forward(feeds, set(ask)).values
    out: dict[str, str] = {}
    for p, names in ask.items():
        if p not in got:
            continue
        b = np.asarray(got[p], np.float64)
        t = next((t for t in names[:64] if _relative_error(np.asarray(tensor_values(consts[t]), np.float64), b) <= 1e-6),
                 None)
        if t is not None:
            out[p] = f"{'initializer' if t in inits else 'Constant output'} {t!r}"
    return out


def _unscoped_reader(proto, path: str, module):
    """The first node of the main graph that reads one of ``module``'s parameters by its name (``a.weight``),
    and that name: the module's computation is in the graph though no node carries its scope."""
    names = {f"{path}.{n}" for n, _ in module.named_parameters()}
    inits = {t.name for t in proto.graph.initializer}
    return next(((n, i) for n in proto.graph.node for i in n.input if i in names and i in inits), None)


def _leaf(m) -> bool:
    return not any(True for _ in getattr(m, "children", lambda: ())())


def _names(paths: list[str], shown: int = 3) -> str:
    """The outermost of ``paths`` (b, not also b.0 and b.1), a few of them."""
    paths = [p for p in paths if not any(p.startswith(q + ".") for q in paths)]
    return ", ".join(paths[:shown]) + (f" and {len(paths) - shown} more" if len(paths) > shown else "")


def _returned(leaving: dict[str, list[str]], fw: Forward, obs_by_name: dict, onnx_values: Callable | None
              ) -> tuple[dict[str, str], dict[str, str]]:
    """(module -> the tensor leaving its scope that holds what its forward returns, module -> why none does).
    A forward may compute after its return value (``self.aux = y * 2 + 1``, a statistic kept on self) and the
    parent read both: the last tensor to leave is then not the output. Those of torch's shape are the
    candidates; where several are, values decide: the one closest to torch's, if closer than torch's value
    is large (SQNR > 0 dB; an add of y has SQNR -9 dB against y, a float32 export's own one ~150 dB)."""
    chosen: dict[str, str] = {}
    refused: dict[str, str] = {}
    ask: dict[str, list[str]] = {}
    for p, ts in leaving.items():
        shape = fw.shapes.get(p)
        fit = [t for t in ts if shape is None or shapes_agree(obs_by_name[t].shape, tuple(shape))]
        if len(fit) > 1 and onnx_values is not None and p in fw.values:
            ask[p] = fit
        else:  # none of torch's shape: the last, which the pairing transposes or says has another shape
            chosen[p] = (fit or ts)[-1]
    got = onnx_values(sorted({t for ts in ask.values() for t in ts})) if ask else {}
    for p, ts in ask.items():
        b = np.asarray(fw.values[p], np.float64)
        errs = {t: _relative_error(np.asarray(got[t], np.float64), b) for t in ts
                if t in got and np.shape(got[t]) == b.shape}
        best = min(errs, key=errs.get, default=None)
        if best is not None and errs[best] < 1:
            chosen[p] = best
            continue
        names = ", ".join(repr(t) for t in ts[:4]) + (" …" if len(ts) > 4 else "")
        closest = f" (the closest, {best!r}, is {_db(errs[best])} from it)" if best is not None else ""
        refused[p] = (f"none of the {len(ts)} tensors of its shape that leave its scope ({names}) holds what its forward "
                      f"returns{closest}: the export computes it elsewhere, or not at all")
    return chosen, refused


def _relative_error(a: np.ndarray, b: np.ndarray) -> float:
    """||a - b|| / ||b|| (NaN where both are NaN counts as equal); inf where b is all zero and a is not."""
    d = np.where(np.isnan(a) & np.isnan(b), 0.0, a - b)
    num, den = float(np.linalg.norm(d.ravel())), float(np.linalg.norm(np.nan_to_num(b).ravel()))
    if not np.isfinite(num):
        return float("inf")
    return num / den if den > 0 else (0.0 if num == 0 else float("inf"))


def _db(err: float) -> str:
    return f"SQNR {-20 * np.log10(err):.3g} dB" if np.isfinite(err) else "SQNR -inf dB"


def _permutation(torch_shape: tuple[int, ...], onnx_shape) -> tuple[int, ...] | None:
    """The one axis permutation that turns torch's shape into the ONNX one (an LSTM's output kept
    sequence-major), or None when there is none or more than one (equal dimensions: which is which is
    unknown)."""
    if len(torch_shape) != len(onnx_shape) or len(torch_shape) > 6 or not all(isinstance(d, int) for d in onnx_shape):
        return None
    perms = [perm for perm in itertools.permutations(range(len(torch_shape)))
             if tuple(torch_shape[i] for i in perm) == tuple(onnx_shape)]
    return perms[0] if len(perms) == 1 else None


def _fused_into(path: str, scopes: dict, classes: dict, order: list[str], fed_by: dict[str, str]) -> str | None:
    """The BatchNormalization whose nodes the exporter's optimizer rewrote (dynamo FuseBatchNormIntoConv) to
    hold ``path``'s work: the BatchNorm carrying such a rewrite that ``path``'s output fed (``fed_by``), else
    the first sibling of it run after it (``order``: the forward pass's module order) that is one (conv2's
    is bn2, not the block's first BatchNorm, bn1)."""
    fed = next((bn for bn, p in fed_by.items() if p == path and classes.get(bn) in BATCHNORMS
                and bn in scopes and scopes[bn].rewrites), None)
    if fed is not None:
        return fed
    parent = path.rpartition(".")[0]
    after = order[order.index(path) + 1:] if path in order else []
    return next((p for p in after if p.rpartition(".")[0] == parent and classes.get(p) in BATCHNORMS
                 and p in scopes and scopes[p].rewrites), None)


def _unwrapped(scopes: dict, module) -> dict:
    """The export's scopes under the torch model's paths where the model wraps the exported module as its one
    child (nn.DataParallel's ``module``, torch.compile's ``_orig_mod``): the scopes then name the child's
    paths (``a``; legacy's names may find ``module.a`` already), never the model's, and the root's is the
    child's too."""
    children = [n for n, _ in module.named_children()]
    paths = {p for p, _ in module.named_modules()}
    inner = set(scopes) - {""}
    if len(children) != 1 or "" not in scopes or children[0] in scopes:
        return scopes
    head = children[0]
    renamed = {q: q for q in inner if q.startswith(head + ".")}  # legacy: its names found the child's paths
    if len(renamed) < len(inner):
        renamed = {q: f"{head}.{q}" for q in inner if f"{head}.{q}" in paths and q not in paths}
    if not inner or len(renamed) < len(inner):
        return scopes
    out = {"": scopes[""], head: replace(scopes[""], path=head)}
    out.update({renamed[q]: replace(s, path=renamed[q]) for q, s in scopes.items() if q})
    return out
