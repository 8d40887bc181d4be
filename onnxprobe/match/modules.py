"""Which ONNX tensors stand for the outputs of which ``nn.Module``: read from the ONNX file alone.

PyTorch's two exporters record module paths differently (measured with torch 2.13):

- the **dynamo** exporter gives every node the metadata ``pkg.torch.onnx.name_scopes``, a Python-repr
  list ``['', 'features', 'features.0', 'features.0.bn', '<fx node>']``: the full paths of the modules
  whose forward the node ran in, outermost first;
- the **legacy** (TorchScript) exporter names nodes ``/features/features.0/conv/Conv``: one component per
  module whose forward ran, each component the module path from its last non-numeric atom (``body.0``
  under ``features.1`` is ``features.1.body.0``), ModuleLists adding none; a second call of one module
  gets ``_1`` (``/lin_1/Gemm``).

A module's nodes are those that ran inside it (its descendants' included); its outputs are the float
tensors those nodes make that leave the group (read by another node, or graph outputs), in node order,
and the last one is the module's output. Modules with no node (a Dropout in eval mode, a Conv whose
BatchNormalization the exporter folded into it) have no output here; ``torch.pairing`` explains them.
Nothing here imports torch.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

import onnx

from onnxprobe.graph.shapes import value_types
from onnxprobe.graph.walk import copied_from

FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE}
SCOPES_KEY = "pkg.torch.onnx.name_scopes"
RULE_KEY = "pkg.onnxscript.rewriter.rule_name"
_CALL = re.compile(r"^(.*?)_(\d+)$")


@dataclass
class ModuleScope:
    path: str  # the module's dotted path ("" for the root module)
    nodes: list[int] = field(default_factory=list)  # main-graph node indices that ran inside it
    outputs: list[str] = field(default_factory=list)  # float tensors that leave it, in node order
    calls: int = 1  # how many separate calls the exporter recorded (legacy "_1" scopes)
    rewrites: list[str] = field(default_factory=list)  # the dynamo optimizer's rule names on its nodes

    @property
    def output(self) -> str | None:
        return self.outputs[-1] if self.outputs else None


def exporter(model: onnx.ModelProto) -> str | None:
    """"dynamo", "legacy" or None, from what the nodes carry."""
    nodes = list(model.graph.node)
    if any(p.key == SCOPES_KEY for n in nodes for p in n.metadata_props):
        return "dynamo"
    if any(n.name.startswith("/") for n in nodes):
        return "legacy"
    return None


def exporter_guess(model: onnx.ModelProto) -> str | None:
    """``exporter``, else the exporter a file without module scopes most likely came from: torch's dynamo
    exporter names its nodes ``node_linear``; converted below opset 18 by onnx's version converter, which
    drops node metadata (measured, torch 2.13: opset_version=17), it keeps those names and no scopes."""
    kind = exporter(model)
    if kind is not None or model.producer_name != "pytorch":
        return kind
    names = [n.name for n in model.graph.node]
    return "dynamo" if names and sum(n.startswith("node_") for n in names) * 2 > len(names) else None


def _meta(node: onnx.NodeProto, key: str) -> str | None:
    return next((p.value for p in node.metadata_props if p.key == key), None)


def dynamo_paths(node: onnx.NodeProto) -> list[str]:
    """The module paths a dynamo-exported node ran in, outermost first ('' is the root)."""
    raw = _meta(node, SCOPES_KEY)
    if raw is None:
        return []
    try:
        scopes = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return []
    if not isinstance(scopes, (list, tuple)) or not scopes:
        return []
    return [str(s) for s in scopes[:-1]]  # the last entry is the FX node, not a module


def _numeric_tail(full: list[str], comp: list[str]) -> list[str] | None:
    """``full`` with a component like ``body.0`` folded into it when ``body`` is its last name atom."""
    j = max((k for k, a in enumerate(full) if not a.isnumeric()), default=None)
    if j is None or len(comp) < 2 or not all(a.isnumeric() for a in comp[1:]):
        return None
    if full[j:] == comp[: len(full) - j]:
        return full[:j] + comp
    return None


def legacy_path(node_name: str, known: set[str] | None = None) -> tuple[str, int] | None:
    """(module path, call index) of a legacy-exported node name such as ``/features/features.1/body/
    body.0/conv/Conv``; None for a node outside every scope (``Constant_35``). ``known``: the model's
    module paths, which settle the ambiguous cases (``lin_1``: a module of that name, or call 1 of lin)."""
    got = legacy_components(node_name, known)
    return None if got is None else (got[0][-1] if got[0] else "", got[1])


def _in_container(full: list[str], atoms: list[str], known: set[str]) -> list[str] | None:
    """``full`` + a container + ``atoms``, where that is the one known path so: a ModuleDict's child runs
    as ``/a/Gemm`` (``heads.a``), the ModuleDict having no forward, so no component, of its own."""
    head, tail = ".".join(full), "." + ".".join(atoms)
    hits = [p for p in known if p.endswith(tail) and (p.startswith(head + ".") if head else True)
            and "." not in p[len(head) + 1 if head else 0: len(p) - len(tail)] and len(p) > len(head) + len(tail)]
    return hits[0].split(".") if len(hits) == 1 else None


def legacy_components(node_name: str, known: set[str] | None = None) -> tuple[list[str], int] | None:
    """(the paths of the modules whose forward ran around the node, outermost first, one per component of
    its name; the call index), as ``legacy_path``. A container that never runs (ModuleList, ModuleDict)
    has no component, so is not among them."""
    if not node_name.startswith("/"):
        return None
    comps = _slashed(node_name.split("/")[1:-1], known)
    full: list[str] = []
    ran: list[str] = []
    call = 0
    for c in comps:
        atoms = c.split(".")
        folded = _numeric_tail(full, atoms)
        options = [o for o in (folded, full + atoms) if o is not None]
        chosen = options[0]
        if known is not None:
            hit = next((o for o in options if ".".join(o) in known), None)
            if hit is None:
                m = _CALL.match(atoms[-1])
                if m:  # a second call of a module: its component carries _k
                    base = atoms[:-1] + [m.group(1)]
                    for o in (_numeric_tail(full, base), full + base):
                        if o is not None and ".".join(o) in known:
                            hit, call = o, int(m.group(2))
                            break
            if hit is None:
                hit = _in_container(full, atoms, known)
            chosen = hit if hit is not None else chosen
        full = chosen
        ran.append(".".join(full))
    return ran, call


def _slashed(comps: list[str], known: set[str] | None) -> list[str]:
    """The components of a legacy node name, those of a module whose name holds a '/' (a ModuleDict key
    ``"a/b"``, which legacy writes as it is: ``/a/b/Gemm``, its child ``/a/b/a/b.0/Gemm``) joined again: the
    longest run of components that ends a known module path wins."""
    if not known or len(comps) < 2:
        return comps
    tails = {t for p in known if "/" in p for k in range(p.count(".") + 1)  # heads.a/b.0 is a/b.0 under a/b
             if "/" in (t := p.split(".", k)[-1])}
    if not tails:
        return comps
    out, i = [], 0
    while i < len(comps):
        j = next((j for j in range(len(comps), i + 1, -1) if "/".join(comps[i:j]) in tails), i + 1)
        out.append("/".join(comps[i:j]))
        i = j
    return out


def module_scopes(model: onnx.ModelProto, known: set[str] | None = None) -> dict[str, ModuleScope]:
    """Every module path the exporter recorded, with its nodes and the tensors that leave it."""
    kind = exporter(model)
    nodes = list(model.graph.node)
    scopes: dict[str, ModuleScope] = {}

    def add(path: str, i: int, call: int = 0) -> None:
        s = scopes.setdefault(path, ModuleScope(path))
        s.nodes.append(i)
        s.calls = max(s.calls, call + 1)
        rule = _meta(nodes[i], RULE_KEY)
        if rule and rule not in s.rewrites:
            s.rewrites.append(rule)

    for i, n in enumerate(nodes):
        if kind == "dynamo":
            for p in dynamo_paths(n):
                add(p, i)
        elif kind == "legacy":
            got = legacy_components(n.name, known)
            if got is None:
                continue
            ran, call = got
            atoms = ran[-1].split(".") if ran else []
            add("", i)
            for k in range(1, len(atoms) + 1):  # a node runs in every enclosing module too: those that ran,
                prefix = ".".join(atoms[:k])       # not a ModuleList or ModuleDict (no forward: as dynamo has it)
                if known is None or (prefix in known and (prefix in ran or k == len(atoms))):
                    add(prefix, i, call if k == len(atoms) else 0)
    _escaping(model, scopes)
    return scopes


def _escaping(model: onnx.ModelProto, scopes: dict[str, ModuleScope]) -> None:
    g = model.graph
    nodes = list(g.node)
    types = value_types(model)
    graph_outputs = {o.name for o in g.output}
    readers: dict[str, set[int]] = {}
    for i, n in enumerate(nodes):
        for x in n.input:
            readers.setdefault(x, set()).add(i)

    def is_float(t: str) -> bool:
        tp = types.get(t)
        return tp is None or not tp.HasField("tensor_type") or tp.tensor_type.elem_type in FLOAT_TYPES

    for s in scopes.values():
        members = set(s.nodes)
        outs = []
        for i in sorted(members):
            n = nodes[i]
            if n.op_type == "Constant":
                continue
            for o in n.output:
                if o and is_float(o) and (o in graph_outputs or readers.get(o, set()) - members):
                    outs.append(o)
        s.outputs = outs


def initializer_users(model: onnx.ModelProto, known: set[str] | None = None) -> dict[str, set[str]]:
    """initializer -> the module paths of the nodes that read it (through Identity nodes: legacy keeps a
    merged parameter's name as an Identity of the one it was merged into). Tells which of several
    equal-valued parameters an exporter really merged into one initializer, and which it removed."""
    kind = exporter(model)
    nodes = list(model.graph.node)

    def paths_of(n: onnx.NodeProto) -> list[str]:
        if kind == "dynamo":
            return dynamo_paths(n)
        if kind == "legacy":
            got = legacy_path(n.name, known)
            atoms = got[0].split(".") if got and got[0] else []
            return [".".join(atoms[:k]) for k in range(len(atoms) + 1)]
        return []

    paths = {id(n): paths_of(n) for n in nodes}
    # chains from initializers: Identity, and a node of constants alone that ran in no module (an optimizer's:
    # dynamo's Split of an in_proj_bias that two attentions read, one each half, left without scopes)
    source = copied_from(nodes, [i.name for i in model.graph.initializer], passes=lambda n: not paths[id(n)])
    users: dict[str, set[str]] = {}
    for n in nodes:
        for x in n.input:
            if x in source:
                users.setdefault(source[x], set()).update(paths[id(n)])
                if n.op_type == "Identity" and n.output:  # the name legacy kept: the module it was
                    users[source[x]].add(n.output[0].rpartition(".")[0])
    return users
