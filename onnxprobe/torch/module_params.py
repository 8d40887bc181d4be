"""What a torch module says of its parameters (``torch.params.map_parameters`` reads it): the tensors its
parametrizations compute, the modules holding each parameter (tied weights: more than one), a tied parameter's
other names, and how module paths relate (whether an initializer's readers are apart from a parameter's owners)."""

from __future__ import annotations

import numpy as np

from onnxprobe.torch.runner import to_numpy


def computed_weights(mod) -> dict[str, tuple[np.ndarray, list[str]]]:
    """``torch.nn.utils.parametrize``'s tensors (``conv.weight`` of weight_norm: ``g * v / ||v||``), each the
    value torch computes now and the parameters it comes from (``conv.parametrizations.weight.original0``…)."""
    out: dict[str, tuple[np.ndarray, list[str]]] = {}
    for path, m in mod.named_modules():
        for name, plist in (getattr(m, "parametrizations", None) or {}).items():
            prefix = f"{path}.parametrizations.{name}" if path else f"parametrizations.{name}"
            srcs = [f"{prefix}.{n}" for n, _ in plist.named_parameters()]
            value = getattr(m, name)
            out[f"{path}.{name}" if path else name] = (to_numpy(value), srcs)
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
