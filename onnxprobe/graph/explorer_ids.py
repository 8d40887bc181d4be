"""The ids Google's Model Explorer gives the nodes and graphs of an ONNX model, so that node data written
for it (``report.overlay``) lands on the right nodes.

Model Explorer reads ONNX through the model-explorer-onnx adapter (0.4.2, on onnx-ir 1.1.0), which keys a
node by its final name, after these passes: NameFixPass names unnamed nodes ``node``, ``node_1``... and
renames duplicates (``dup``, ``dup_1``; counters shared by a graph and all its subgraphs, node names
unique per graph, value names per scope chain); a node whose bodies read outer values (Loop, Scan, an If
of a custom domain) gets a ``<name>_capture`` node before it; an If of the default domain is flattened
into its graph: its branch nodes become ``<if>/<then_branch>/<child>`` and a ``<if>_phi`` node follows.
Graph ids: the main graph's name (``<main>`` when the field is absent), ``<node>/<attr>`` for the bodies
of the nodes of the main graph (after flattening); deeper bodies are not shown. Inputs, initializers and
outputs are nodes too: ``[value] <name>``.

A key that is not such an id is silently ignored by the viewer, so this is reproduced exactly with onnx
alone (the adapter pulls in onnx-ir, sympy and a web server): tests/test_overlay.py checks it against the
adapter itself on the real models. Model-local functions are left out: onnxprobe reports nothing in them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import onnx
from onnx import AttributeProto

from onnxprobe.graph.walk import walk

VALUE = "[value] "


class _Value:
    def __init__(self, name: str, graph: "_Graph | None"):
        self.name, self.graph, self.original = name, graph, name


@dataclass(eq=False)
class _Node:
    proto: onnx.NodeProto | None
    name: str
    op: str
    domain: str = ""
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    bodies: list = field(default_factory=list)  # (attribute, [graphs], single GRAPH attribute)
    phi: "_Node | None" = None  # a flattened If's '<if>_phi' node, which carries the If's outputs


@dataclass(eq=False)
class _Graph:
    inputs: list = field(default_factory=list)
    inits: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    nodes: list = field(default_factory=list)


def _build(gp: onnx.GraphProto, scopes: list[dict]) -> _Graph:
    """The graph with its values resolved as onnx-ir resolves them: inputs, then initializers, then every
    node output, declared up front; a name is looked up innermost scope first; an unknown one is a new
    value of no graph."""
    g = _Graph()
    own: dict[str, _Value] = {}
    scopes.append(own)
    for i in gp.input:
        own[i.name] = v = _Value(i.name, g)
        g.inputs.append(v)
    for t in gp.initializer:
        if t.name:
            own.setdefault(t.name, _Value(t.name, g))
            g.inits.append(own[t.name])
    for n in gp.node:
        for o in n.output:
            if o:
                own.setdefault(o, _Value(o, g))
    for n in gp.node:
        node = _Node(n, n.name, n.op_type, n.domain)
        for i in n.input:
            if not i:
                node.inputs.append(None)
                continue
            found = next((s[i] for s in reversed(scopes) if i in s), None)
            if found is None:
                found = scopes[-1][i] = _Value(i, None)
            node.inputs.append(found)
        for a in n.attribute:
            if a.type == AttributeProto.GRAPH:
                node.bodies.append((a.name, [_build(a.g, scopes)], True))
            elif a.type == AttributeProto.GRAPHS:
                node.bodies.append((a.name, [_build(x, scopes) for x in a.graphs], False))
        node.outputs = [own[o] if o else _Value("", g) for o in n.output]
        g.nodes.append(node)
    g.outputs = [own.get(o.name) or _Value(o.name, None) for o in gp.output]
    scopes.pop()
    return g


def _unique(name: str, used: set[str], counter: Counter) -> str:
    new = name
    while new in used:
        counter[name] += 1
        new = f"{name}_{counter[name]}"
    used.add(new)
    return new


def _fix_names(root: _Graph) -> None:
    """onnx-ir's NameFixPass: depth first, a graph's inputs, outputs and initializers, then per node its
    name, inputs, outputs and bodies; each value once."""
    seen: set[int] = set()
    node_count, value_count = Counter(), Counter()

    def value(v: _Value | None, used: set[str]) -> None:
        if v is None or id(v) in seen:
            return
        seen.add(id(v))
        v.name = _unique(v.name or "v", used, value_count)

    def visit(g: _Graph, outer_values: set[str]) -> None:
        values, nodes = set(outer_values), set()
        for v in (*g.inputs, *g.outputs, *g.inits):
            value(v, values)
        for n in g.nodes:
            n.name = _unique(n.name or "node", nodes, node_count)
            for v in (*n.inputs, *n.outputs):
                value(v, values)
            for _, graphs, _ in n.bodies:
                for b in graphs:
                    visit(b, values)

    visit(root, set())


def _reads_outside(body: _Graph) -> bool:
    inside: set[int] = set()
    used: list[_Value] = []

    def collect(g: _Graph) -> None:
        inside.add(id(g))
        for n in g.nodes:
            used.extend(v for v in n.inputs if v is not None)
            for _, graphs, _ in n.bodies:
                for b in graphs:
                    collect(b)

    collect(body)
    return any(id(v.graph) not in inside for v in used)


def _add_captures(g: _Graph) -> None:
    nodes = []
    for n in g.nodes:
        for _, graphs, _ in n.bodies:
            for b in graphs:
                _add_captures(b)
        default_if = n.op == "If" and n.domain in ("", "ai.onnx")
        if n.bodies and not default_if and any(_reads_outside(b) for _, graphs, _ in n.bodies for b in graphs):
            nodes.append(_Node(None, f"{n.name}_capture", "(Capture)"))
        nodes.append(n)
    g.nodes = nodes


def _embed_ifs(g: _Graph) -> None:
    nodes = []
    for n in g.nodes:
        for _, graphs, _ in n.bodies:
            for b in graphs:
                _embed_ifs(b)
        nodes.append(n)
        if n.op == "If" and n.domain in ("", "ai.onnx"):
            branches = [(attr, graphs[0]) for attr, graphs, single in n.bodies if single]
            n.bodies = [b for b in n.bodies if not b[2]]
            for attr, b in branches:
                for child in b.nodes:
                    child.name = f"{n.name}/{attr}/{child.name}"
                    nodes.append(child)
            if branches:
                n.phi = _Node(None, f"{n.name}_phi", "(Phi)")
                nodes.append(n.phi)
    g.nodes = nodes


@dataclass
class ExplorerIds:
    """``graphs``: graph id -> node ids, in the adapter's order; ``nodes``: a node's index in
    ``graph.walk`` order (the ``#`` of every report) -> (graph id, node id), for the nodes Model Explorer
    shows; ``tensors``: a node output's name -> the (graph id, node id) of its producer; ``values``: a
    graph input, initializer or output name -> (graph id, ``[value] ...`` id); ``outputs``: a node's index ->
    the names of its outputs (what a report's row read by its node index must be one of); ``twins``: a
    flattened If's (graph id, node id) -> its ``<if>_phi`` node's, which the viewer shows the If's output
    tensors on (the If's own outputs are renamed): what colours the If colours its phi node too; ``hidden``: the
    indices of the nodes it does not show (bodies deeper than the main graph's own), whose rows go nowhere (by
    their name they landed on a shown node writing a tensor of the same name)."""

    graphs: dict[str, list[str]]
    nodes: dict[int, tuple[str, str]]
    tensors: dict[str, tuple[str, str]]
    values: dict[str, tuple[str, str]]
    outputs: dict[int, tuple[str, ...]] = field(default_factory=dict)
    twins: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    hidden: frozenset[int] = frozenset()


def explorer_ids(model: onnx.ModelProto) -> ExplorerIds:
    sites = walk(model)  # holds the NodeProto objects while their id()s are compared
    index = {id(s.node): s.index for s in sites}
    gp = model.graph
    main = _build(gp, [])
    _fix_names(main)
    _add_captures(main)
    _embed_ifs(main)
    main_id = gp.name if gp.HasField("name") else "<main>"
    shown = [(main_id, main)]
    for n in main.nodes:
        shown += [(f"{n.name}/{attr}", graphs[0]) for attr, graphs, single in n.bodies if single]
    out = ExplorerIds({}, {}, {}, {})
    for gid, g in shown:
        ids = [VALUE + v.name for v in g.inputs]
        ids += [n.name for n in g.nodes]
        inputs = {id(v) for v in g.inputs}
        ids += [VALUE + v.name for v in g.inits if id(v) not in inputs]
        ids += [VALUE + v.name for v in g.outputs]
        out.graphs.setdefault(gid, ids)
        for n in g.nodes:
            if n.proto is not None and id(n.proto) in index:
                out.nodes.setdefault(index[id(n.proto)], (gid, n.name))
                out.outputs.setdefault(index[id(n.proto)], tuple(o for o in n.proto.output if o))
                if n.phi is not None:
                    out.twins.setdefault((gid, n.name), (gid, n.phi.name))
                for o in n.proto.output:
                    if o:
                        out.tensors.setdefault(o, (gid, n.name))
        for v in (*g.inputs, *g.inits, *g.outputs):
            if v.original:
                out.values.setdefault(v.original, (gid, VALUE + v.name))
    out.hidden = frozenset(s.index for s in sites) - set(out.nodes)
    return out
