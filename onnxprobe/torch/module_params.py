"""What a torch module says of its parameters (``torch.params.map_parameters`` reads it): the tensors its
parametrizations compute, the modules holding each parameter (tied weights: more than one), a tied parameter's
other names, and how module paths relate (whether an initializer's readers are apart from a parameter's owners)."""

from __future__ import annotations

import numpy as np

from onnxprobe.graph.tensor_data import array_digest as digest
from onnxprobe.torch.runner import to_numpy


def computed_weights(mod) -> dict[str, tuple[np.ndarray, list[str]]]:
    """The weights torch computes from parameters, each the value torch computes now and the parameters it comes
    from: ``torch.nn.utils.parametrize``'s tensors (``conv.weight`` of weight_norm: ``g * v / ||v||``, from
    ``conv.parametrizations.weight.original0``…) and the hook-based ``torch.nn.utils.weight_norm``'s and
    ``spectral_norm``'s (from ``conv.weight_g`` and ``conv.weight_v``, or ``conv.weight_orig``), recomputed
    without a power iteration (the module's ``weight`` attribute is only what its last forward computed)."""
    out: dict[str, tuple[np.ndarray, list[str]]] = {}
    for path, m in mod.named_modules():
        at = f"{path}." if path else ""
        for name, plist in (getattr(m, "parametrizations", None) or {}).items():
            prefix = f"{at}parametrizations.{name}"
            srcs = [f"{prefix}.{n}" for n, _ in plist.named_parameters()]
            value = getattr(m, name)
            out[f"{at}{name}"] = (to_numpy(value), srcs)
        for hook in getattr(m, "_forward_pre_hooks", {}).values():
            kind, name = type(hook).__name__, getattr(hook, "name", None)
            if kind not in ("WeightNorm", "SpectralNorm") or not isinstance(name, str):
                continue
            own = dict(m.named_parameters(recurse=False))
            srcs = [f"{at}{name}{s}" for s in (("_g", "_v") if kind == "WeightNorm" else ("_orig",))
                    if f"{name}{s}" in own]
            if not srcs:
                continue
            value = hook.compute_weight(m) if kind == "WeightNorm" else hook.compute_weight(m, False)
            out[f"{at}{name}"] = (to_numpy(value), srcs)
    return out


def param_owners(mod) -> dict[str, set[str]]:
    """torch parameter (its first name) -> the module paths that hold it (more than one: tied weights)."""
    first = {id(p): n for n, p in mod.named_parameters()}
    out: dict[str, set[str]] = {}
    for n, p in mod.named_parameters(remove_duplicate=False):
        out.setdefault(first[id(p)], set()).add(n.rpartition(".")[0])
    return out


def param_aliases(mod) -> dict[str, str]:
    """A tied parameter's other names -> its first name (``head.weight`` -> ``emb.weight``): the dynamo exporter
    names its initializer by one of them (GPT-2's ``lm_head.weight``)."""
    first = {id(p): n for n, p in mod.named_parameters()}
    return {n: first[id(p)] for n, p in mod.named_parameters(remove_duplicate=False) if n != first[id(p)]}


def foreign_readers(readers: set[str], owners: set[str]) -> bool:
    """Whether the modules that read an initializer (``readers``: their paths with every ancestor, as
    ``initializer_users`` gives them) are all apart from those holding a parameter (none of its modules, their
    ancestors or descendants): a constant the exporter made for another module (LayerNorm(elementwise_affine=
    False)'s ones), however equal its values. Unknown readers (no scopes in the file) are never apart."""
    inner = innermost(readers)
    return bool(inner) and not any(related_paths(r, o) for r in inner for o in owners)


def related_paths(a: str, b: str) -> bool:
    """Module paths one of which is the other or inside it ('' is the root, around everything)."""
    return not a or not b or a == b or a.startswith(b + ".") or b.startswith(a + ".")


def innermost(paths: set[str]) -> set[str]:
    return {r for r in paths if not any(len(q) > len(r) and related_paths(r, q) for q in paths)}


def merged_twin(params: dict[str, np.ndarray], users: dict[str, set[str]], modules: set[str] | None, module: str,
                readers: set[str]) -> bool:
    """Whether ``module``, which reads no initializer at all, is a twin of one of ``readers``: the same parameters
    (by name within the module) of the very same values, each. Dynamo's common subexpressions merge two such
    modules applied to one input (a GPT-NeoX block's two fresh LayerNorms: one node left, whose weight's gradient
    is the sum of both). Not a module with a parameter of its own values (a Linear whose all-zero bias the optimizer
    dropped reads its weight, and reads: its bias's gradient flows nowhere in the graph), nor one of other
    parameters, nor one of zeros alone (a module of a zero bias, whose Add of 0 was removed)."""
    reading = set().union(*users.values())
    if module in reading or (modules is not None and module not in modules):
        return False

    def own(m: str) -> dict[str, np.ndarray]:
        return {q[len(m) + 1:]: v for q, v in params.items() if q.rpartition(".")[0] == m}

    mine = own(module)
    # zeros alone tell nothing: all-zero biases are what exporters dedup and drop (the Adds of 0 removed)
    if not any(np.any(v) for v in mine.values()):
        return False
    values = {k: digest(v) for k, v in mine.items()}
    return any({k: digest(v) for k, v in own(r).items()} == values for r in readers)
