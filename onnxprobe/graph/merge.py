"""Two models side by side in one graph, fed from the same inputs: the pass behind ``diff``'s in-graph
pair metrics (``compare.fused``).

Contract: ``side_by_side(a, b, pairs)`` returns a *new* model holding A's graph and B's, every name of
each prefixed (inside If/Loop/Scan bodies too) except the graph inputs, which they share (the same
feeds run both). Neither input model is touched. The
nodes are ordered so that the two models advance together along ``pairs`` (A tensor, B tensor), each
pair's producers next to each other: a tensor is then compared and freed while both models run, as each
would alone, instead of one model's activations waiting for the other's.

``origin(name)`` tells which model a node of the merged graph is: A's or B's own (the name it has in its
model), or a copy of B's node that ``compare.fused`` runs on A's tensors (named with ``cone_prefix``,
``cone_node_name``); None for the nodes onnxprobe adds (metrics, statistics: "onnxprobe/...").

Models that cannot share a graph raise ``NotMergeable`` with the reason (different opset versions of a
domain, model-local functions); the caller then runs the two separately.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import onnx

from onnxprobe.graph.builder import opset_version
from onnxprobe.graph.walk import subgraphs, unread_extras

PREFIX_A, PREFIX = "onnxprobe.a/", "onnxprobe.b/"
CONE_PREFIX = "onnxprobe.cone"  # + k + "/": the copies of B's nodes fed with A's tensors (``cone_prefix``)
_CONE = re.compile(re.escape(CONE_PREFIX) + r"\d+/")
_UNNAMED = re.compile(r"([A-Za-z0-9_]+)\((.*)\)")  # ``cone_node_name`` of an unnamed node: op(first output)


def cone_prefix(k: int) -> str:
    """The prefix of the names (nodes, outputs) of pair ``k``'s copy of B's nodes."""
    return f"{CONE_PREFIX}{k}/"


def cone_node_name(prefix: str, n: onnx.NodeProto) -> str:
    """The name of a copy of node ``n``: an unnamed one is named by its op and first output (unique: two
    unnamed nodes of one op in a cone would otherwise share a name, which onnxruntime refuses)."""
    return prefix + (n.name or f"{n.op_type}({next((o for o in n.output if o), '')})")


@dataclass(frozen=True)
class Origin:
    """A merged graph's node, as its model has it: ``side`` "A" or "B", ``node`` its name there ("" when
    unnamed: then ``op`` and ``output``, the tensor it writes), ``cone`` True for B's node run again on A's
    tensors (the error it introduces)."""

    side: str
    node: str
    cone: bool = False
    op: str = ""
    output: str = ""

    def __str__(self) -> str:
        what = (f"node {self.node!r} of model {self.side}" if self.node
                else f"model {self.side}'s unnamed {self.op} node that writes {self.output!r}")
        return what + (", fed with model A's tensors (its copy that measures the introduced error)" if self.cone else "")


def origin(name: str) -> Origin | None:
    """Which model's node ``name`` (a node of ``side_by_side``'s graph, or of ``compare.fused``'s) is;
    None for a node onnxprobe adds."""
    cone = _CONE.match(name)
    rest = name[cone.end():] if cone else name
    if rest.startswith(PREFIX):
        return Origin("B", rest[len(PREFIX):], bool(cone))
    if rest.startswith(PREFIX_A) and not cone:
        return Origin("A", rest[len(PREFIX_A):])
    unnamed = _UNNAMED.fullmatch(rest) if cone else None
    if unnamed and unnamed.group(2).startswith(PREFIX):
        return Origin("B", "", True, unnamed.group(1), unnamed.group(2)[len(PREFIX):])
    return None


class NotMergeable(Exception):
    """The two models cannot run in one graph (the reason is the message)."""


def _opsets(model: onnx.ModelProto) -> dict[str, int]:
    return {d: opset_version(model, d) for d in {("" if o.domain == "ai.onnx" else o.domain) for o in model.opset_import}}


def _prefixed(model: onnx.ModelProto, prefix: str) -> tuple[onnx.GraphProto, dict[str, str]]:
    """The model's graph with every name prefixed but its (non-initializer) inputs, and the name map of
    the main graph. Ours, not ``onnx.compose.add_prefix_graph``: that one leaves the initializers of
    If/Loop bodies unrenamed while it renames their uses (onnx 1.23), which breaks every model with a
    weight inside a branch."""
    g = onnx.GraphProto()
    g.CopyFrom(model.graph)
    inits = {i.name for i in g.initializer}
    keep = [i for i in g.input if i.name not in inits]  # IR < 4: initializers listed as inputs are constants
    del g.input[:]
    g.input.extend(keep)
    return g, _rename(g, prefix, {}, shared={i.name for i in keep})


def _rename(g: onnx.GraphProto, prefix: str, outer: dict[str, str], shared: set[str] = frozenset()) -> dict[str, str]:
    """Prefix every name ``g`` defines (inputs but ``shared``, initializers, node outputs, node names) and
    every use of them, in bodies too (a body sees the names of the graphs around it)."""
    local = dict(outer)
    p = (lambda n: prefix + n if n else n)
    for i in g.input:
        local[i.name] = i.name if i.name in shared else p(i.name)
    for t in g.initializer:
        local[t.name] = p(t.name)
    for t in g.sparse_initializer:
        local[t.values.name] = p(t.values.name)
    for n in g.node:
        for o in n.output:
            if o:
                local[o] = p(o)
    for i in g.input:
        i.name = local[i.name]
    for t in g.initializer:
        t.name = local[t.name]
    for t in g.sparse_initializer:
        t.values.name = local[t.values.name]
    for vi in list(g.value_info) + list(g.output):
        vi.name = local.get(vi.name, p(vi.name))
    for n in g.node:
        n.name = p(n.name)
        n.input[:] = [local.get(x, x) if x else x for x in n.input]
        n.output[:] = [local[o] if o else o for o in n.output]
        for _, sg in subgraphs(n):
            _rename(sg, prefix, local)
    return local


def side_by_side(a: onnx.ModelProto, b: onnx.ModelProto, pairs: list[tuple[str, str]]) -> tuple[onnx.ModelProto, dict[str, str], dict[str, str]]:
    """(the merged model, {A tensor: its merged name}, {B tensor: its merged name}). ``pairs``: (A tensor,
    B tensor) in the order they are compared (A's topological order). Both models' names are prefixed
    (onnxruntime names what it inlines after the op, ``_inlfunc_HardSwish_HS_X``: a name a quantizer may
    already have written into the other model)."""
    oa, ob = _opsets(a), _opsets(b)
    clash = sorted(d for d in set(oa) & set(ob) if oa[d] != ob[d])
    if clash:
        d = clash[0]
        raise NotMergeable(f"the models import different versions of {d or 'ai.onnx'}: A {oa[d]}, B {ob[d]}")
    if a.functions or b.functions:
        raise NotMergeable("a model holds local functions")
    a_in = {i.name for i in a.graph.input} - {t.name for t in a.graph.initializer}
    b_in = {i.name for i in b.graph.input} - {t.name for t in b.graph.initializer}
    # an input one model declares, none of its nodes reads and the other lacks is no shared feed: the runner
    # feeds it zeros (an onnxruntime-optimized copy of an IR-3 model declares such ``..._SHAPE`` inputs)
    ua, ub = unread_extras(a, b)
    a_in, b_in = a_in - set(ua), b_in - set(ub)
    if a_in != b_in:
        raise NotMergeable("the models take different inputs")
    # the shared inputs keep their names: one named as a prefixed name ('onnxprobe.a/y' beside a tensor 'y') would
    # be defined twice in the merged graph
    taken = sorted(n for n in a_in | set(ua) | set(ub) | b_in if n.startswith((PREFIX_A, PREFIX, CONE_PREFIX)))
    if taken:
        raise NotMergeable(f"a graph input is named as onnxprobe names the merged graph's tensors ({taken[0]!r})")
    ga, a_name = _prefixed(a, PREFIX_A)
    gb, b_name = _prefixed(b, PREFIX)
    out = onnx.ModelProto()
    out.CopyFrom(a)
    g = out.graph
    g.CopyFrom(ga)
    g.initializer.extend(gb.initializer)
    g.sparse_initializer.extend(gb.sparse_initializer)
    g.value_info.extend(gb.value_info)
    g.output.extend(gb.output)
    nodes = _lockstep(list(ga.node), list(gb.node), [(a_name.get(x, x), b_name.get(y, y)) for x, y in pairs])
    del g.node[:]
    g.node.extend(nodes)
    for d, v in ob.items():
        if d not in oa:
            out.opset_import.append(onnx.helper.make_opsetid(d, v))
    # IR 4 at least: the initializers are no longer listed as inputs (``_prefixed``), which before IR 4
    # onnxruntime accepts only for initializers some node reads (an unused one fails the graph's creation)
    out.ir_version = max(a.ir_version, b.ir_version, 4)
    return out, a_name, b_name


def _lockstep(na: list[onnx.NodeProto], nb: list[onnx.NodeProto], pairs: list[tuple[str, str]]) -> list[onnx.NodeProto]:
    """A's and B's nodes, each in its own order, merged so that for each pair both producers come before
    the next pair's."""
    pa = {o: k for k, n in enumerate(na) for o in n.output if o}
    pb = {o: k for k, n in enumerate(nb) for o in n.output if o}
    out: list[onnx.NodeProto] = []
    i = j = 0
    for x, y in pairs:
        ka, kb = pa.get(x, -1), pb.get(y, -1)
        while i <= ka:
            out.append(na[i])
            i += 1
        while j <= kb:
            out.append(nb[j])
            j += 1
    return out + na[i:] + nb[j:]
