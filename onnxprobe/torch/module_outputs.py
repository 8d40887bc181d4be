"""Where a torch module's output is in an ONNX export, told from the file and torch's values
(``torch.pairing`` asks): which of the tensors leaving a module's scope holds what it returns (by value), a
module's output the exporter folded whole into a constant, a module's nodes left without its scope, the
BatchNormalization an optimizer fused a layer into, and the scopes of a model that wraps the exported module."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Callable

import numpy as np
from onnx import TensorProto

from onnxprobe.graph.tensor_data import tensor_values
from onnxprobe.match.engine import shapes_agree
from onnxprobe.text import some
from onnxprobe.torch.runner import Forward, TorchRunner

FLOATS = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16)
BATCHNORMS = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm")


def folded_outputs(proto, runner: TorchRunner, feeds: dict[str, np.ndarray], fw: Forward, paths: list[str]
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


def unscoped_reader(proto, path: str, module):
    """The first node of the main graph that reads one of ``module``'s parameters by its name (``a.weight``),
    and that name: the module's computation is in the graph though no node carries its scope."""
    names = {f"{path}.{n}" for n, _ in module.named_parameters()}
    inits = {t.name for t in proto.graph.initializer}
    return next(((n, i) for n in proto.graph.node for i in n.input if i in names and i in inits), None)


def returned_tensors(leaving: dict[str, list[str]], fw: Forward, obs_by_name: dict, onnx_values: Callable | None
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
        names = some(ts, 4)
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


def one_permutation(torch_shape: tuple[int, ...], onnx_shape) -> tuple[int, ...] | None:
    """The one axis permutation that turns torch's shape into the ONNX one (an LSTM's output kept
    sequence-major), or None when there is none or more than one (equal dimensions: which is which is
    unknown). A symbolic ONNX dimension ('batch', a dynamic export's) takes any size, the same one wherever the
    symbol stands (a dynamic-batch LSTM's [seq, 'batch', hidden] against torch's [batch, seq, hidden] was "no
    single transposition"); None (an unknown one) takes any size."""
    if len(torch_shape) != len(onnx_shape) or len(torch_shape) > 6 or not all(isinstance(d, (int, str)) or d is None for d in onnx_shape):
        return None

    def fits(perm) -> bool:
        bound: dict[str, int] = {}
        for k, i in enumerate(perm):
            want, got = onnx_shape[k], torch_shape[i]
            if isinstance(want, int) and want != got:
                return False
            if isinstance(want, str) and bound.setdefault(want, got) != got:
                return False
        return True

    perms = [perm for perm in itertools.permutations(range(len(torch_shape))) if fits(perm)]
    return perms[0] if len(perms) == 1 else None


def fused_batchnorm(path: str, scopes: dict, classes: dict, order: list[str], fed_by: dict[str, str]) -> str | None:
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


def unwrapped_scopes(scopes: dict, module) -> dict:
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
