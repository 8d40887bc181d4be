"""Walk every node of a model, subgraphs included, in one topological order.

Each ``NodeSite`` knows the chain of control-flow nodes (If/Loop/Scan and their graph attribute) that
encloses it, which is what exposing a subgraph tensor needs. The body of a control-flow node is visited
before the node itself, so a body tensor always comes before the values its parent node returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import onnx

from onnxprobe.text import quote

CONSTANT_OPS = {"Constant"}  # no input: fixed (ConstantOfShape is as constant as its shape)
NONDETERMINISTIC_OPS = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}


@dataclass
class NodeSite:
    node: onnx.NodeProto
    graph: onnx.GraphProto  # the graph that holds the node
    chain: tuple[tuple[onnx.NodeProto, str], ...]  # enclosing (control-flow node, graph attribute), outermost first
    index: int  # position in the whole-model topological order
    name: str  # display name: the node's name, or OpType_index when it has none
    parents: tuple[str, ...] | None = None  # the display names of the chain's nodes (``walk`` sets them)

    @property
    def scope(self) -> tuple[str, ...]:
        # an unnamed parent by its listed name ('If_3'): two unnamed Ifs' branches both read 'If/then_branch',
        # and the second one's tensors were taken for the first's
        if not self.chain:  # a main-graph node (most of them; selecting asks ~3 times a node)
            return ()
        names = self.parents or tuple(node_display_name(n) for n, _ in self.chain)
        return tuple(f"{name}/{attr}" for name, (_, attr) in zip(names, self.chain))

    @property
    def path(self) -> str:
        """The name qualified by its bodies ('Loop/body/Add_7'): what listings show, which every command
        takes as well as the bare name (an unnamed body node's 'Add_7' tells no body apart)."""
        return "/".join(self.scope + (self.name,))


def node_display_name(node: onnx.NodeProto, index: int | None = None) -> str:
    if node.name:
        return node.name
    return f"{node.op_type}_{index}" if index is not None else node.op_type


def node_label(node: onnx.NodeProto, index: int) -> str:
    """The one way a message says a node: its number in its graph, its name as listings show it (an unnamed
    node's ``node_display_name``, which every command takes) and its op: "node #3 'conv1' (Conv)"."""
    return f"node #{index} {quote(node_display_name(node, index))} ({node.op_type})"


def subgraphs(node: onnx.NodeProto) -> Iterator[tuple[str, onnx.GraphProto]]:
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.name, a.g
        elif a.type == onnx.AttributeProto.GRAPHS:  # pragma: no cover - no standard op uses it
            for g in a.graphs:
                yield a.name, g


def all_graphs(g: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``g`` and every If / Loop / Scan body in it, nested ones included: each graph before its bodies, the
    bodies in node order (the one walk of a model's graphs for what reads each graph as a whole)."""
    yield g
    for n in g.node:
        for _, sg in subgraphs(n):
            yield from all_graphs(sg)


def unread_inputs(model: onnx.ModelProto) -> list[str]:
    """The graph inputs (not initializers) that no node reads, in any graph of the model, and no graph
    output is: an onnxruntime-optimized copy of an IR-3 model declares such ``..._SHAPE`` inputs, which
    onnxruntime still requires fed (with a value nothing reads)."""
    read: set[str] = set()
    for g in all_graphs(model.graph):
        read.update(x for n in g.node for x in n.input)
        read.update(o.name for o in g.output)
    inits = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in read and i.name not in inits]


def unread_extras(a: onnx.ModelProto, b: onnx.ModelProto) -> tuple[list[str], list[str]]:
    """(A's, B's) inputs that the one model declares, none of its nodes reads and the other model does not
    declare (``unread_inputs``): no feed both run on (each side's runner feeds them zeros: ``runtime.feeds.fed``)."""
    na, nb = ({i.name for i in m.graph.input} - {t.name for t in m.graph.initializer} for m in (a, b))
    return [n for n in unread_inputs(a) if n not in nb], [n for n in unread_inputs(b) if n not in na]


def implicit_inputs(node: onnx.NodeProto) -> list[str]:
    """Names a node's bodies read from enclosing graphs, in first-use order."""
    return outer_reads(*(sg for _, sg in subgraphs(node)))


def first_readers(sites, *, implicit: bool = False) -> dict[str, NodeSite]:
    """{tensor: the first of ``sites`` (in their order) that reads it}; ``implicit``: the tensors a node's
    bodies read from enclosing graphs count as its reads too."""
    out: dict[str, NodeSite] = {}
    for s in sites:
        for i in (list(s.node.input) + implicit_inputs(s.node)) if implicit else s.node.input:
            out.setdefault(i, s)
    return out


def slot_readers(nodes) -> dict[str, list[tuple[onnx.NodeProto, int]]]:
    """{tensor: every (node, input slot) of ``nodes`` that reads it}, in their order; empty (optional) slots left out."""
    out: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for n in nodes:
        for k, t in enumerate(n.input):
            if t:
                out.setdefault(t, []).append((n, k))
    return out


def in_if_branch(model: onnx.ModelProto) -> set[str]:
    """Tensors computed inside an If branch (at any depth): lifted out, they are empty when it did not run.
    Each by its name and by its name qualified by its scope (``TensorRef.key`` of a name sibling bodies share)."""
    return {k for s in walk(model) if any(n.op_type == "If" for n, _ in s.chain) for o in s.node.output if o
            for k in (o, "/".join(s.scope + (o,)))}


def in_loop_body(model: onnx.ModelProto) -> set[str]:
    """Tensors computed inside a Loop or Scan body (at any depth): lifted out, their values are stacked one per
    iteration, none when it ran no iteration. Named as ``in_if_branch`` names them."""
    return {k for s in walk(model) if any(n.op_type in ("Loop", "Scan") for n, _ in s.chain) for o in s.node.output if o
            for k in (o, "/".join(s.scope + (o,)))}


def copied_from(nodes, names, passes=None) -> dict[str, str]:
    """Each of ``names`` (initializers) and each tensor that is a copy of one, in node order -> the name it copies:
    an Identity's output (legacy exporters keep a merged initializer's other names so), and the outputs of a node
    ``passes`` accepts that reads only such tensors (its first input's)."""
    source = {t: t for t in names}
    for n in nodes:
        if not n.input or n.input[0] not in source or not n.output:
            continue
        if n.op_type == "Identity":
            source[n.output[0]] = source[n.input[0]]
        elif passes is not None and passes(n) and all(not x or x in source for x in n.input):
            source.update((o, source[n.input[0]]) for o in n.output if o)
    return source


def needed_nodes(nodes, outputs) -> list[onnx.NodeProto]:
    """The nodes (in order) that ``outputs`` depend on, through the names their bodies read from outside."""
    need = set(outputs)
    keep = []
    for n in reversed(list(nodes)):
        if any(o in need for o in n.output if o):
            keep.append(n)
            need.update(i for i in n.input if i)
            need.update(implicit_inputs(n))
    keep.reverse()
    return keep


def outer_reads(*graphs: onnx.GraphProto) -> list[str]:
    """Names these graphs (and the bodies inside them) read from enclosing graphs, in first-use order."""
    found: dict[str, None] = {}

    def visit(g: onnx.GraphProto, outer_defined: set[str]) -> None:
        defined = set(outer_defined)
        defined.update(i.name for i in g.input)
        defined.update(i.name for i in g.initializer)
        defined.update(i.values.name for i in g.sparse_initializer)
        for n in g.node:
            for i in n.input:
                if i and i not in defined:
                    found.setdefault(i)
            for _, sg in subgraphs(n):
                visit(sg, defined)
            defined.update(o for o in n.output if o)
        for o in g.output:
            if o.name not in defined:
                found.setdefault(o.name)

    for sg in graphs:
        visit(sg, set())
    return list(found)


def walk(model: onnx.ModelProto) -> list[NodeSite]:
    sites: list[NodeSite] = []

    def visit(g: onnx.GraphProto, chain: tuple) -> None:
        for node in g.node:
            for attr, sg in subgraphs(node):
                # name the parent before its body so body display names can refer to it
                visit(sg, chain + ((node, attr),))
            i = len(sites)
            sites.append(NodeSite(node, g, chain, i, node_display_name(node, i)))

    visit(model.graph, ())
    index = {id(s.node): s.index for s in sites}  # a body comes before its node: its parents' indices now
    for s in sites:
        s.parents = tuple(node_display_name(n, index[id(n)]) for n, _ in s.chain)
    return sites


def constant_tensors(model: onnx.ModelProto, sites: list[NodeSite] | None = None) -> set[str]:
    """Tensors fixed before any input arrives: initializers, Constant outputs, and the outputs of
    deterministic nodes whose inputs are all such tensors (weights computed at load time: a
    ConstantOfShape of a constant shape; one of ``Shape(x)`` changes with x)."""
    sites = sites if sites is not None else walk(model)
    const: set[str] = set()
    for g in all_graphs(model.graph):
        const.update(i.name for i in g.initializer)
        const.update(i.values.name for i in g.sparse_initializer)
    # graph inputs that are also initializers (IR < 4) can be overridden at run time: keep them const anyway
    for s in sites:
        n = s.node
        if n.op_type in CONSTANT_OPS and n.domain in ("", "ai.onnx"):
            const.update(o for o in n.output if o)
            continue
        if n.op_type in NONDETERMINISTIC_OPS or any(True for _ in subgraphs(n)):
            continue
        ins = [i for i in n.input if i]
        if ins and all(i in const for i in ins):
            const.update(o for o in n.output if o)
    return const


def kahn(nodes: list, ready, reads=None) -> tuple[list[int], list[int]]:
    """Kahn's algorithm over ``nodes``, linear in their edges: (the positions in an order where each node
    comes after the nodes whose outputs it reads, the positions of those never freed). ``ready(name)``: a
    name available from the start (a graph input, an initializer); any other name waits for the node that
    writes it (the first to run, of two), and a name no node writes never frees its reader. ``reads(node)``: the names a node waits
    for (default: its inputs). Of the nodes free at one time the first in ``nodes`` goes first, so a graph
    already in order keeps it. The one topological pass of the package: ``toposort`` and the cycle check
    of ``graph.integrity`` both take it."""
    import heapq

    reads = reads or (lambda n: n.input)
    waiting, readers = [0] * len(nodes), {}
    for i, n in enumerate(nodes):
        for x in dict.fromkeys(reads(n)):
            if not x or ready(x):
                continue
            waiting[i] += 1
            readers.setdefault(x, []).append(i)
    heap = [i for i, k in enumerate(waiting) if k == 0]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        i = heapq.heappop(heap)
        order.append(i)
        for o in nodes[i].output:  # the first of two writers of a name frees its readers
            if o:
                for r in readers.pop(o, ()):
                    waiting[r] -= 1
                    if waiting[r] == 0:
                        heapq.heappush(heap, r)
    placed = set(order)
    return order, [i for i in range(len(nodes)) if i not in placed]


def toposort(nodes: list, available: set[str]) -> list:
    """``nodes`` in an order where each comes after what it reads (``available``: graph inputs and
    initializers); nodes whose inputs never become available keep their relative order at the end."""
    nodes = list(nodes)
    order, stuck = kahn(nodes, available.__contains__, lambda n: [*n.input, *implicit_inputs(n)])
    return [nodes[i] for i in order + stuck]
