"""What makes a main graph one onnxruntime refuses to load, found without running it: a tensor two nodes
write (or a node and an input or initializer), a node input nothing gives, a graph output nothing gives,
nodes that form a cycle, two nodes of one graph with the same name (and, apart, a graph output listed twice,
which it loads). An initializer a model of IR
version < 4 does not list among the graph inputs where onnxruntime needs it (``unlisted_initializers``) is
refused when the model is read (``graph.io.check_graph``), by every command alike. ``inspect`` lists them; ``extract`` refuses a cut of a graph
whose tensors have two producers (which one it kept was chance), and a cut that reads a name nothing gives
or holds a cycle or two nodes of one name (``cut_problems``); ``mark``, whose copy keeps the whole graph, refuses every one of them
(``refuse_to_write``: neither writes a model no runtime loads). Bodies of If/Loop/Scan read their outer
graphs' names, so only the main graph's own edges are checked (node names: each body's too)."""

from __future__ import annotations

from collections import Counter

import onnx

from onnxprobe.errors import ModelError, SessionError
from onnxprobe.graph.walk import all_graphs, kahn, node_label, subgraphs
from onnxprobe.text import quote, some


def producers(g: onnx.GraphProto) -> dict[str, list[str]]:
    """Tensor name -> the nodes that write it (labels), in graph order."""
    return _producers(list(g.node), None)


def _producers(nodes: list[onnx.NodeProto], numbering: list[int] | None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for i, n in enumerate(nodes):
        for o in n.output:
            if o:
                out.setdefault(o, []).append(node_label(n, numbering[i] if numbering else i))
    return out


def duplicate_producers(g: onnx.GraphProto) -> list[str]:
    """One line per tensor written twice: by two nodes, or by a node and a graph input or initializer."""
    sources = {i.name for i in g.input} | {t.name for t in g.initializer} | {t.values.name for t in g.sparse_initializer}
    out = []
    for name, who in producers(g).items():
        if len(who) > 1:
            out.append(f"tensor {quote(name)} is written by {len(who)} nodes: {some(who, 4, str)}")
        elif name in sources:
            out.append(f"tensor {quote(name)} is written by {who[0]} and is also a graph input or initializer")
    return out


def graph_problems(model: onnx.ModelProto, node_names: bool = True) -> list[str]:
    """Every reason, one line each, the main graph is not one onnxruntime loads (see the module docstring).
    ``node_names`` False: not what other runtimes may run (``refuse_broken``): two nodes of one name, a body that
    returns an outer value (onnx.reference and OpenVINO run the first)."""
    g = model.graph
    sources = {i.name for i in g.input} | {t.name for t in g.initializer} | {t.values.name for t in g.sparse_initializer}
    return (duplicate_producers(g) + _problems(list(g.node), sources, [o.name for o in g.output], None)
            + body_problems(list(g.node), sources | {o for n in g.node for o in n.output if o}, None)
            + (duplicate_node_names(list(g.node), None) + body_outputs_from_outside(g) if node_names else [])
            + body_initializers_twice(model) + recursive_functions(model) + unknown_ops(model))


def unknown_ops(model: onnx.ModelProto) -> list[str]:
    """A node of the ONNX domain whose op ONNX does not define, or not yet at the model's opset (a Gelu in an opset-17
    model): onnxruntime refuses the model, and inspect said nothing (its shapes were 'not inferred'). Not a call of a
    model-local function of that name."""
    from onnxprobe.graph.builder import opset_version

    opset = opset_version(model)
    if opset is None:
        return []
    local = {(f.domain, f.name) for f in model.functions}
    out, seen = [], set()
    for g in all_graphs(model.graph):
        for k, n in enumerate(g.node):
            if n.domain not in ("", "ai.onnx") or (n.domain, n.op_type) in local or n.op_type in seen:
                continue
            try:
                onnx.defs.get_schema(n.op_type, opset, "")
            except onnx.defs.SchemaError:
                seen.add(n.op_type)
                since = (f": it exists from opset {onnx.defs.get_schema(n.op_type, onnx.defs.onnx_opset_version(), '').since_version} "
                         f"on, and the model imports opset {opset}" if onnx.defs.has(n.op_type) else
                         ": ONNX defines no operator of that name (a custom op belongs to a domain of its own)")
                out.append(f"{node_label(n, k)}{'' if g is model.graph else f' in body {quote(g.name)}'}{since}")
    return out


def body_problems(nodes: list[onnx.NodeProto], outer: set[str], numbering: list[int] | None, where: str = "") -> list[str]:
    """What makes an If / Loop / Scan body of ``nodes`` one onnxruntime refuses, each body apart and the bodies inside it:
    a tensor two of its nodes write (or a node and the body's input or initializer), a node input that neither the
    body nor a graph around it (``outer``: every name they give) gives, a body output nothing gives, nodes that form a
    cycle (onnxruntime: "Duplicate definition", "INVALID_GRAPH", "not acyclic"; inspect listed none of them, and mark
    and extract wrote copies no runtime loads, exit 0)."""
    out = []
    for k, n in enumerate(nodes):
        for attr, body in subgraphs(n):
            label = f"{where}{node_label(n, numbering[k] if numbering else k)} {attr}"
            own = {i.name for i in body.input} | {t.name for t in body.initializer} | {t.values.name for t in body.sparse_initializer}
            made = {o for m in body.node for o in m.output if o}
            lines = duplicate_producers(body) + _problems(list(body.node), own | (outer - made),
                                                          [o.name for o in body.output if o.name not in outer], None)
            out += [f"in {label}: {line}" for line in lines]
            out += body_problems(list(body.node), outer | own | made, None, f"{label}: ")
    return out


def body_outputs_from_outside(g: onnx.GraphProto, where: str = "") -> list[str]:
    """An If / Loop / Scan body output that is an enclosing graph's value, returned directly: onnxruntime refuses the
    model ("Subgraph output (x) is an outer scope value being returned directly"), as onnx's checker does."""
    out = []
    for k, n in enumerate(g.node):
        for attr, body in subgraphs(n):
            own = ({o for m in body.node for o in m.output} | {i.name for i in body.input}
                   | {t.name for t in body.initializer} | {t.values.name for t in body.sparse_initializer})
            label = f"{where}{node_label(n, k)} {attr}"
            out += [f"{label} returns {quote(o.name)}, a value of the graph around it, directly: onnxruntime takes "
                    "only a body's own values as its outputs (an Identity in the body makes one)"
                    for o in body.output if o.name and o.name not in own]
            out += body_outputs_from_outside(body, f"{label}: ")
    return out


def recursive_functions(model: onnx.ModelProto) -> list[str]:
    """A model-local function that calls itself, through others too: onnxruntime refuses the model ("Model local
    function definitions must not be recursive"), and inlining it never ends."""
    funcs = {(f.domain, f.name): f for f in model.functions}
    calls = {k: {(n.domain, n.op_type) for n in f.node if (n.domain, n.op_type) in funcs} for k, f in funcs.items()}
    out = []
    for start in funcs:
        seen, todo = set(), list(calls[start])
        while todo:
            k = todo.pop()
            if k == start:
                out.append(f"model-local function {quote(start[1])} calls itself"
                           + ("" if start in calls[start] else " through others") + ": no runtime runs recursive functions")
                break
            if k not in seen:
                seen.add(k)
                todo.extend(calls[k])
    return out


def duplicate_node_names(nodes: list[onnx.NodeProto], numbering: list[int] | None) -> list[str]:
    """One line per node name that two nodes of one graph share: ``nodes`` (the main graph's, or a cut's,
    said by ``numbering``) and, each apart, every If / Loop / Scan body inside them. onnxruntime refuses such a
    graph ("two nodes with same node name"; measured, onnxruntime 1.32), in a body too; not an empty name,
    not the same name in two bodies or in a body and its outer graph, and not an ONNX Constant, which it makes
    a weight of before it checks the names (silero-vad's openvino variant names 15 Constants 'F0::anon')."""
    out = _names_twice(nodes, numbering, "")
    for n in nodes:
        for _, body in subgraphs(n):
            for g in all_graphs(body):
                out += _names_twice(list(g.node), None, f" in body {quote(g.name)}")
    return out


def _names_twice(nodes: list[onnx.NodeProto], numbering: list[int] | None, where: str) -> list[str]:
    named: dict[str, list[str]] = {}
    for i, n in enumerate(nodes):
        if n.name and not (n.op_type == "Constant" and n.domain in ("", "ai.onnx")):
            named.setdefault(n.name, []).append(node_label(n, numbering[i] if numbering else i))
    return [f"node name {quote(name)} is used by {len(who)} nodes{where}: {some(who, 4, str)}"
            for name, who in named.items() if len(who) > 1]


def body_initializers_twice(model: onnx.ModelProto) -> list[str]:
    """Initializers of one name that onnxruntime refuses (measured, onnxruntime 1.32): two in an If / Loop /
    Scan body ("B initializer name is not unique"), or two sparse ones in any graph ("Duplicate
    sparse_tensor_initializer"); the main graph's others it runs with the last copy
    (``graph.builder.single_initializers``)."""
    out = []
    for g in all_graphs(model.graph):
        sparse = Counter(t.values.name for t in g.sparse_initializer)
        out += [f"graph {quote(g.name)} holds {k} sparse initializers named {quote(n)}, which onnxruntime refuses"
                for n, k in sparse.items() if k > 1]
        if g is model.graph:
            continue
        seen = Counter([t.name for t in g.initializer] + list(sparse))
        out += [f"body {quote(g.name)} holds {k} initializers named {quote(n)}, which onnxruntime refuses (the main "
                "graph's it runs with the last)" for n, k in seen.items() if k > 1 and sparse[n] < 2]
    return out


def unlisted_initializers(model: onnx.ModelProto) -> list[str]:
    """A model of IR version < 4 must list each initializer among its graph's inputs: onnxruntime takes an
    unlisted one of the main graph that a main-graph node reads, and refuses one only a body reads, or none
    ("Graph ctor should have created NodeArg for initializer"), and a body's initializer its body does not
    list ("in initializer but not in graph input"; measured)."""
    if model.ir_version >= 4:
        return []
    out = []
    for g in all_graphs(model.graph):
        listed = {i.name for i in g.input}
        if g is model.graph:
            listed |= {x for n in g.node for x in n.input}
        out += [f"initializer {quote(t.name)} is not a graph input, which a model of IR version {model.ir_version} "
                f"must list it as" for t in g.initializer if t.name not in listed]
    return out


def cut_problems(model: onnx.ModelProto, nodes: list[int], sources: set[str]) -> list[str]:
    """``graph_problems`` of a cut before it is written: its nodes (indices into the main graph, and said by
    them) reading ``sources`` (the cut's inputs and weights) and one another's outputs only."""
    kept = [model.graph.node[i] for i in nodes]
    main = {i.name for i in model.graph.input} | {t.name for t in model.graph.initializer} | {
        o for n in model.graph.node for o in n.output if o}  # (what a body reads from outside the cut: said apart)
    return _problems(kept, sources, [], nodes) + body_problems(kept, main | sources, nodes) + duplicate_node_names(kept, nodes)


def _problems(nodes: list[onnx.NodeProto], sources: set[str], outputs: list[str], numbering: list[int] | None) -> list[str]:
    made = _producers(nodes, numbering)
    known = set(made) | sources
    out = []
    dangling: dict[str, str] = {}
    for i, n in enumerate(nodes):
        for x in n.input:
            if x and x not in known:
                dangling.setdefault(x, node_label(n, numbering[i] if numbering else i))
    out += [f"{who} reads {quote(x)}, which no node, graph input or initializer gives" for x, who in dangling.items()]
    for name in dict.fromkeys(outputs):
        if name and name not in known:
            out.append(f"graph output {quote(name)} is given by no node, graph input or initializer")
    cycle = _cycle(nodes, known - set(made), numbering)
    if cycle:
        out.append(f"{some(cycle, 4, str)} form a cycle: each needs another's output")
    return out


def refuse_broken(model: onnx.ModelProto, name: str | None) -> None:
    """A SessionError naming the first of ``graph_problems``, for a workflow about to run the model: those
    that run a graph of their own built from it (diff's one run of both models, grad's forward and backward
    graph) left out what onnxruntime refuses in the model as it is (a graph output no node gives) and
    judged a model that does not load (QA fuzzing). ``name``: the file the message starts with (None: a
    caller that names the model itself). Two nodes of one name are left to the runtime: onnx.reference and
    OpenVINO run such a model, and onnxruntime's own error names the name."""
    problems = graph_problems(model, node_names=False)
    if problems:
        more = f" (and {len(problems) - 1} more: `onnxprobe inspect` lists them)" if len(problems) > 1 else ""
        raise SessionError(f"{name + ': ' if name else ''}{problems[0]}{more}: onnxruntime refuses such a graph")


def refuse_to_write(problems: list[str], name: str, what: str = "") -> None:
    """A ModelError naming the first of ``problems`` (``graph_problems``, ``duplicate_producers``,
    ``cut_problems``), for a surgery about to write a model that keeps them (``mark``'s copy, ``extract``'s
    cut): one line, exit 1, and no file, where it wrote one no runtime loads with exit 0. ``name``: the
    file the message starts with; ``what``: what holds the problems, said before the first ("the cut holds
    what onnxruntime will not load: ")."""
    if problems:
        more = f" (and {len(problems) - 1} more: `onnxprobe inspect` lists them)" if len(problems) > 1 else ""
        raise ModelError(f"{name}: {what}{problems[0]}{more}: onnxruntime refuses such a graph, a broken model")


def outputs_listed_twice(g: onnx.GraphProto) -> list[str]:
    """A graph output listed more than once: onnxruntime and onnx's checker take it (measured), but it is one
    tensor, which a runtime returns twice."""
    return [f"graph output {quote(name)} is listed {k} times" for name, k in Counter(o.name for o in g.output).items() if k > 1]


def _cycle(nodes: list[onnx.NodeProto], given: set[str], numbering: list[int] | None) -> list[str]:
    """The nodes on a cycle: those Kahn's algorithm (``graph.walk.kahn``) never frees (a node input made by
    no node counts as given: a dangling name is said apart), less those that only wait on a cycle without
    being on one."""
    made = {o for n in nodes for o in n.output if o}
    _, stuck = kahn(nodes, lambda x: x in given or x not in made)
    needs = {i: {x for x in nodes[i].input if x and x in made and x not in given} for i in stuck}
    left = set(stuck)
    while True:  # drop the nodes no other left node reads: behind a cycle, not on it
        read = {x for i in left for x in needs[i]}
        tail = {i for i in left if not any(o in read for o in nodes[i].output)}
        if not tail:
            break
        left -= tail
    return [node_label(nodes[i], numbering[i] if numbering else i) for i in sorted(left)]
