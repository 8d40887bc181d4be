"""The error a layer introduces: B's producing node(s) run on A's matched inputs.

For each pair (a, b), take the cone of B's graph that ends at b and starts at tensors A has values for
(matched tensors, graph inputs) or constants. Running that cone on A's values gives what B would compute
from A's inputs; comparing a with it isolates the error of this layer from the error it inherited.
All cones go into one model, run once.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from onnxprobe.graph.merge import cone_node_name
from onnxprobe.graph.walk import subgraphs

MAX_CONE_NODES = 64


def cone(g: onnx.GraphProto, target: str, known: set[str], producer: dict | None = None,
         inits: set[str] | None = None, order: dict[int, int] | None = None) -> tuple[list[onnx.NodeProto], list[str], set[str]] | None:
    """The nodes of ``g`` that compute ``target`` from tensors in ``known`` (or graph inputs) and
    constants, in graph order: (nodes, boundary tensors it reads, initializers it reads); None when it
    would pass through a control-flow node, exceed MAX_CONE_NODES or has no node. ``producer``,
    ``inits`` and ``order`` (id(node) -> index) may be given when many cones of one graph are taken."""
    producer = producer if producer is not None else {o: n for n in g.node for o in n.output if o}
    inits = inits if inits is not None else {i.name for i in g.initializer}
    # a graph input: what no node writes and no initializer holds (a set of g.input's names, rebuilt per
    # cone, made a diff of a model of 4,000 inputs quadratic)
    if target not in producer:
        return None
    nodes: list[onnx.NodeProto] = []
    boundary: list[str] = []
    used: set[str] = set()
    seen: set[str] = set()
    stack = [target]
    while stack:
        x = stack.pop()
        if x in seen or not x:
            continue
        seen.add(x)
        if x != target and (x in known or (x not in producer and x not in inits)):
            boundary.append(x)
            continue
        if x in inits:
            used.add(x)
            continue
        n = producer.get(x)
        if n is None or any(True for _ in subgraphs(n)):
            return None
        if all(n is not c for c in nodes):
            nodes.append(n)
            if len(nodes) > MAX_CONE_NODES:
                return None
        stack.extend(n.input)
    order = order if order is not None else {id(n): i for i, n in enumerate(g.node)}
    return sorted(nodes, key=lambda n: order[id(n)]), boundary, used


def copy_cone(nodes: list[onnx.NodeProto], prefix: str, rename: dict[str, str]) -> list[onnx.NodeProto]:
    """Copies of a cone's nodes: inputs renamed by ``rename`` (boundary and inner tensors), outputs
    prefixed."""
    out = []
    for n in nodes:
        c = onnx.NodeProto()
        c.CopyFrom(n)
        c.name = cone_node_name(prefix, n)  # an unnamed node: its op and first output
        c.input[:] = [rename.get(i, i) if i else i for i in n.input]
        c.output[:] = [prefix + o if o else o for o in n.output]
        out.append(c)
    return out


def build_cones(model: onnx.ModelProto, targets: list[str], known: set[str]) -> tuple[onnx.ModelProto | None, dict[str, tuple[str, list[str]]]]:
    """One model holding one cone per target. Returns (model, {target: (output name, [(input name, source tensor)...])})."""
    g = model.graph
    producer = {o: n for n in g.node for o in n.output if o}
    inits = {i.name: i for i in g.initializer}
    sparse = {i.values.name: i for i in g.sparse_initializer}  # weights too: the cone carries them as they are
    types = {vi.name: vi.type for vi in list(g.value_info) + list(g.input) + list(g.output)}
    nodes, inputs, outputs, used_inits = [], [], [], {}
    index: dict[str, tuple[str, list[str]]] = {}
    order = {id(n): i for i, n in enumerate(g.node)}
    names = set(inits) | set(sparse)
    for k, t in enumerate(targets):
        got = cone(g, t, known, producer, names, order)
        if got is None:
            continue
        members, boundary, used = got
        used_inits.update({u: inits.get(u) or sparse[u] for u in used})
        prefix = f"cone{k}/"
        inner = {o for n in members for o in n.output if o}
        rename = {x: prefix + x for x in inner | set(boundary)}
        nodes += copy_cone(members, prefix, rename)
        for b in boundary:
            vi = onnx.ValueInfoProto(name=prefix + b)
            if b in types and types[b].tensor_type.elem_type:
                vi.type.CopyFrom(helper.make_tensor_type_proto(types[b].tensor_type.elem_type, None))
            inputs.append(vi)
        outputs.append(onnx.ValueInfoProto(name=prefix + t))
        index[t] = (prefix + t, [(prefix + b, b) for b in boundary])
    if not index:
        return None, {}
    dense = [t for t in used_inits.values() if isinstance(t, onnx.TensorProto)]
    graph = helper.make_graph(nodes, "onnxprobe_cones", inputs, outputs, initializer=dense,
                              sparse_initializer=[t for t in used_inits.values() if not isinstance(t, onnx.TensorProto)])
    m = helper.make_model(graph, opset_imports=list(model.opset_import), functions=list(model.functions))
    m.ir_version = model.ir_version  # the model's own functions: a cone may call one
    return m, index


def cone_inputs(model: onnx.ModelProto, targets: list[str], known: set[str], built: tuple | None = None) -> dict[str, list[str]]:
    """For each target, the known tensors its cone starts from (graph inputs excluded). ``built``: what
    ``build_cones`` returned for these arguments, when the caller keeps it."""
    _, index = built if built is not None else build_cones(model, targets, known)
    return {t: [src for _, src in ins if src in known] for t, (_, ins) in index.items()}


def run_cones(runner, targets: list[str], values: dict, feeds: dict[str, np.ndarray],
              all_known: set[str] | None = None, keep_on_device: bool = False, key=None, built: tuple | None = None) -> dict:
    """B's output at each target, computed from A's values (``values``: B tensor name -> A's value) by
    B's runner (a ``runtime.runners.base.GraphRunner``). ``all_known``: every tensor A has a value for
    (cones stop there), when ``values`` holds only some. ``key``: keep the cones' session for the next
    call with the same targets (a dataset's samples). ``built``: ``build_cones`` of these arguments, when
    the caller keeps it."""
    cones, index = built if built is not None else build_cones(runner.model, targets, all_known if all_known is not None else set(values))
    if cones is None:
        return {}
    elem = {vi.name: vi.type.tensor_type.elem_type for vi in cones.graph.input}
    feed = {}
    for _t, (_out, ins) in index.items():
        for name, src in ins:
            v = values[src] if src in values else feeds[src]
            want = onnx.helper.tensor_dtype_to_np_dtype(elem[name]) if elem.get(name) else None
            if hasattr(v, "element_type"):  # an OrtValue on the device: bind it as it is if the type fits
                if want is None or v.element_type() == f"tensor({np.dtype(want).name.replace('float32', 'float').replace('float64', 'double')})":
                    feed[name] = v
                    continue
                v = v.numpy()
            if want is not None:
                with np.errstate(over="ignore"):  # past float16's range: inf, as a Cast in the model makes it
                    v = np.asarray(v).astype(want, copy=False)
            feed[name] = v
    key = None if key is None else ("cones", key, tuple(targets))
    out, _ = runner.execute(cones, feed, [], device_outputs=[o for o, _ in index.values()], keep_on_device=keep_on_device,
                            key=key)
    return {t: out[o] for t, (o, _) in index.items()}


def quantized_b_note(report: list, introduced: bool, one_model: bool = False) -> list[str]:
    """The note for the pairs whose intro dB stays empty because B's tensor is a quantized value (or a
    dynamically quantized layer's float result): B's node is fed A's values only where B computes in float
    (a float model as the reference). ``one_model``: B is A's own model run another way (--vs-runtime,
    --vs-device, --vs-opt-level), where no float B can be given."""
    n = sum(1 for p in report if p.b.kind != "float") if introduced else 0
    if not n:
        return []
    how = "" if one_model else ": give the float model as B for it"
    return [f"intro dB is not measured for the {n} pair{'s' if n != 1 else ''} whose B tensor is a quantized layer's value "
            f"(B's nodes are fed A's values only where B computes in float{how})"]


def exact_inputs(model: onnx.ModelProto, targets: list[str], exact: set[str], paired: set[str], same_inputs: set[str]) -> set[str]:
    """The targets whose cone in ``model`` (B) starts only from tensors A holds exactly (``exact``: paired and
    exact; ``same_inputs``: graph inputs both models take alike). Their introduced error is their accumulated
    one by definition: B's node fed its own inputs gives B's tensor. Measured through a cone it need not be:
    a runtime that computes between nodes at a higher precision than the tensors it exposes (onnxruntime runs
    a float16 model's nodes without a float16 kernel in float32 and keeps float32 between them) gave a
    float16 copy compared with itself intro dB of 65-72 where every pair was exact. A weight given as an output
    reads nothing: its difference is its own, as a Constant node's is."""
    g = model.graph
    producer = {o: n for n in g.node for o in n.output if o}
    inits = {i.name for i in g.initializer}
    order = {id(n): i for i, n in enumerate(g.node)}
    out = set()
    for t in targets:
        if t in inits and t not in producer:  # a weight given as an output: no node, nothing read
            out.add(t)
            continue
        got = cone(g, t, paired, producer, inits, order)
        if got is not None and all(b in exact or b in same_inputs for b in got[1]):
            out.add(t)
    return out
