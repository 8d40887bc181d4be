"""The ranks of Loop / Scan body tensors that shape inference leaves unknown, learned from one run.

A body that declares its carried value without a type or shape (exporters often do) leaves onnx's shape
inference with no rank for it nor for what the body computes from it. The backward graph needs those ranks
(a broadcast gradient summed back; the backward Scan's outputs, which onnxruntime wants shaped). One run
tells them: each such tensor's Shape, stacked one per iteration by the Loop / Scan, leaves the body. Only
the rank is kept (a carried value's dimensions may change between iterations; its rank does not); the
shapes of If branches are learned by ``grad_plan._runtime_shapes``."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxprobe.errors import ExecutionError
from onnxprobe.graph.builder import all_names, fresh_name
from onnxprobe.graph.select import Selection, select
from onnxprobe.graph.walk import subgraphs
from onnxprobe.runtime.runners.ort import OrtRunner
from onnxprobe.types import RunConfig

LOOPS = ("Loop", "Scan")


def _bodies(g: onnx.GraphProto, out: list) -> list[onnx.GraphProto]:
    """The bodies of Loop / Scan nodes, reached through Loop / Scan bodies only (an If branch's tensors
    leave it empty when it is not taken, which no per-iteration stack holds), in a fixed order."""
    for n in g.node:
        if n.op_type in LOOPS and n.domain in ("", "ai.onnx"):
            for _, sg in subgraphs(n):
                out.append(sg)
                _bodies(sg, out)
    return out


def _rankless(g: onnx.GraphProto) -> dict[str, int]:
    """Tensor name -> element type, for the body's inputs and node outputs typed without a shape."""
    declared = {vi.name: vi.type for vi in list(g.input) + list(g.output) + list(g.value_info)}
    found = {}
    for name in [i.name for i in g.input] + [o for n in g.node for o in n.output if o]:
        tp = declared.get(name)
        if tp is not None and tp.HasField("tensor_type") and tp.tensor_type.elem_type and not tp.tensor_type.HasField("shape"):
            found[name] = tp.tensor_type.elem_type
    return found


def learn_body_ranks(model: onnx.ModelProto, feed: dict[str, np.ndarray], warnings: list[str], *,
                     cache: bool = True) -> onnx.ModelProto:
    """``model`` with the ranks (dimensions unknown) of its Loop / Scan body tensors that have none, as one
    run on ``feed`` gives them; ``model`` itself where none lacks one, or the run tells nothing (a warning)."""
    wanted = [_rankless(b) for b in _bodies(model.graph, [])]
    if not any(wanted):
        return model
    probed = onnx.ModelProto()
    probed.CopyFrom(model)
    names = all_names(probed)
    asked: dict[str, tuple[int, str]] = {}  # the Shape's output -> (body number, tensor)
    for k, (body, want) in enumerate(zip(_bodies(probed.graph, []), wanted)):
        for t in want:
            s = fresh_name(names, f"onnxprobe.rank:{t}")
            body.node.append(helper.make_node("Shape", [t], [s], name=fresh_name(names, f"onnxprobe.rank/{t}")))
            body.value_info.append(helper.make_tensor_value_info(s, TensorProto.INT64, [None]))
            asked[s] = (k, t)
    refs = [r for r in select(probed, Selection(all=True, include_constants=True), strict=False) if r.name in asked]
    try:
        got = OrtRunner(probed, RunConfig(cache=cache)).probe(refs, feed, stats=False, shapes=False, raw=set(asked),
                                                                outputs=False).arrays
    except ExecutionError as e:
        warnings.append(f"could not run the model to learn the ranks of Loop / Scan body tensors ({e})")
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    bodies = _bodies(out.graph, [])
    for s, (k, t) in asked.items():
        a = np.asarray(got[s]) if s in got else None
        if a is None or a.ndim == 0 or a.size == 0:  # no iteration ran: nothing told
            continue
        vi = helper.make_tensor_value_info(t, wanted[k][t], [None] * int(a.shape[-1]))
        g = bodies[k]
        slots = [v for v in list(g.input) + list(g.output) + list(g.value_info) if v.name == t]
        for v in slots:
            v.type.CopyFrom(vi.type)
        if t not in {i.name for i in g.input} and not any(v.name == t for v in g.value_info):
            g.value_info.append(vi)
    return out
