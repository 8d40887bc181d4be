"""Why a runtime that compiles the model into its own graph (OpenVINO, TensorRT) has no tensor of a name.

A compiled runtime keeps ONNX tensor names on the tensors it keeps, but not every tensor survives:
OpenVINO removes Dropout and hands its output name to the producer (whose own output then vanishes),
folds constant sub-graphs at conversion, drops unused outputs, and cannot expose tensors inside If/Loop
bodies from the main graph. ``reasons`` says which of these happened to each missing name, reading the
ONNX graph; every reason says "fused" or "not observable", so reports never show a silent gap.
"""

from __future__ import annotations

import onnx

from onnxprobe.graph.walk import constant_tensors, walk

# ops a compiled runtime removes at inference, giving their output's name to their input's producer
PASS_THROUGH = {"Dropout", "Identity"}


def compiled_unobservable(model: onnx.ModelProto, names: list[str], present: set[str], runtime: str,
                          also: set[str] = frozenset()) -> dict[str, str]:
    """A compiled runtime's ``Runner.unobservable``: {name: reason} for each of ``names`` that is not in
    ``present`` (the names its compiled graph has) nor ``also`` (names it reads another way), and not a
    graph input or weight (those come from the feeds and the initializers), and a tensor of the model: a name
    it has not (another model's tensor, asked about by a diff) is no runtime's doing."""
    g = model.graph
    known = {t.name for t in g.initializer} | {i.name for i in g.input}
    produced = {o for n in g.node for o in n.output if o} | set(body_tensors(model))
    missing = [n for n in dict.fromkeys(names) if n not in present and n not in known and n not in also and n in produced]
    return reasons(model, missing, present, runtime)


def reasons(model: onnx.ModelProto, missing: list[str], present: set[str], runtime: str) -> dict[str, str]:
    """{name: reason} for each of ``missing`` (names the runtime's converted model lacks); ``present``:
    the names it has."""
    if not missing:
        return {}
    g = model.graph
    main_outputs = {o: n for n in g.node for o in n.output if o}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    constants = constant_tensors(model)  # what depends on constants alone is folded at conversion
    inner = body_tensors(model)
    out = {}
    for name in missing:
        node = main_outputs.get(name)
        if node is None and name in inner:
            parent = inner[name]
            out[name] = (f"not observable: inside the body of {parent.op_type} {parent.name or parent.output[0]!r}, "
                         f"which {runtime} cannot expose from the main graph")
            continue
        if node is None:
            out[name] = f"not observable: {runtime}'s converted model has no tensor of this name"
            continue
        cs = consumers.get(name, [])
        through = [c for c in cs if c.op_type in PASS_THROUGH and c.output and c.output[0] in present]
        if node.op_type == "Dropout" and list(node.output).index(name) > 0:
            out[name] = f"not observable: {runtime} drops the mask of Dropout {node.name or node.output[0]!r} at inference"
        elif through and (len(cs) == 1 or any(c.op_type == "Dropout" for c in through)):  # a Dropout takes
            c = next((c for c in through if c.op_type == "Dropout"), through[0])  # it whatever else reads it
            out[name] = (f"fused: {runtime} removed {c.op_type} {c.name or c.output[0]!r} and its output name "
                         f"{c.output[0]!r} now stands for this tensor (not observable under its own name)")
        elif name in constants:
            out[name] = f"not observable: computed from constants alone, folded by {runtime} at conversion"
        elif not cs and name not in {o.name for o in g.output}:
            out[name] = f"not observable: an unused output of {node.op_type} {node.name or node.output[0]!r}, dropped by {runtime}"
        else:
            out[name] = (f"not observable: fused or folded by {runtime} at conversion "
                         f"(its converted model has no tensor {name!r})")
    return out


def body_tensors(model: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    """Tensor name -> the outermost If/Loop/Scan node whose body produces it."""
    inner: dict[str, onnx.NodeProto] = {}
    for site in walk(model):
        if site.chain:
            for o in site.node.output:
                inner.setdefault(o, site.chain[0][0])
    return inner
