"""Pin the shapes onnxruntime's kernels compute where its shape inference says others.

MaxPool / AveragePool with ceil_mode and pads on odd sizes (onnx's inference 5x5, onnxruntime's kernel
and torch 4x4: the last window would start in the padding, and is dropped), ConvTranspose SAME_LOWER with
output_padding: onnxruntime infers the tensor, and everything computed from it, with inference's shape
whatever value_info says (it falls back to a lenient merge and re-infers as it optimises), while the
backward graph is built on the run's shapes. A Sin after a Flatten of such a pool then had a cos of 25
elements (inference) times a gradient of 16 (the run): onnxruntime refused to load the backward graph, and
an exported one failed when run. A no-op Reshape to the run's sizes after the node that starts the
disagreement makes inference say what the run computes from there on."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxprobe.graph.builder import all_names, fresh_name
from onnxprobe.graph.stale_shapes import PINNED


def pin_shapes(model: onnx.ModelProto, contested: dict[str, list[int]]) -> list[str]:
    """In place: for each main-graph tensor T of ``contested`` (name -> the Reshape's shape: the run's size
    where inference's differs, 0 (copy) elsewhere) whose node reads no other contested tensor, the node
    writes T under a new name and ``Reshape(new, shape) -> T`` follows it; the new name's value_info is T's
    (the run's shape, for the node's own gradient rule). Returns the added nodes' names."""
    producer = {o: i for i, n in enumerate(model.graph.node) for o in n.output if o}
    sources = [t for t in contested if t in producer and not any(x in contested for x in model.graph.node[producer[t]].input)]
    if not sources:
        return []
    taken = all_names(model)
    vi = {v.name: v for v in list(model.graph.output) + list(model.graph.value_info)
          if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape")}
    nodes = list(model.graph.node)
    after: dict[int, list[onnx.NodeProto]] = {}
    added = []
    for t in sources:
        i = producer[t]
        node = nodes[i]
        raw, shape, name = (fresh_name(taken, f"{t}/onnxprobe.run_shape{s}") for s in ("", ".shape", ".pin"))
        node.output[list(node.output).index(t)] = raw
        model.graph.initializer.append(numpy_helper.from_array(np.array(contested[t], np.int64), shape))
        after.setdefault(i, []).append(helper.make_node("Reshape", [raw, shape], [t], name=name,
                                                        doc_string=f"onnxprobe: {t} at the size onnxruntime computes"))
        added.append(name)
        if t in vi:
            copy = onnx.ValueInfoProto()
            copy.CopyFrom(vi[t])
            copy.name = raw
            copy.doc_string = PINNED  # the run's size, which onnx's inference contradicts: no stale declaration
            model.graph.value_info.append(copy)
    del model.graph.node[:]
    for i, n in enumerate(nodes):
        model.graph.node.append(n)
        model.graph.node.extend(after.get(i, []))
    return added
