"""The pairs of a one-run diff's merged graph (``compare.fused``) whose two tensors' shapes differ at run time: found
in a run of a copy of the graph that computes those shapes and nothing after them (``compare.measure`` then builds
the graph again without them)."""

from __future__ import annotations

import numpy as np
import onnx

from onnxprobe.compare.fused import SHAPE_PREFIX, FusedGraph
from onnxprobe.compare.sides import Side
from onnxprobe.graph.walk import needed_nodes


def runtime_shapes(a: Side, fg: FusedGraph, feeds: dict) -> dict[int, tuple[list[int], list[int]]]:
    """The pairs of ``fg`` whose two tensors' shapes differ on ``feeds`` -> (A's shape, B's), from one run
    of a copy of the merged graph that computes those shapes and nothing after them (not the rows, which
    fail the whole run when a pair's difference cannot broadcast)."""
    if fg.model is None:
        return {}
    shapes = [o for o in fg.outputs if o.startswith(SHAPE_PREFIX) and o[-1] in "ab"]
    # the pairs read as values (taken raw, or a stack's members): (pair, [A's tensor, B's, ...])
    members = [*fg.raw.items(), *((k, n) for s in fg.stacks for k, n in zip(s["pairs"], s["names"]))]
    wanted = list(dict.fromkeys(shapes + [t for _, names in members for t in names[:2]]))
    model = onnx.ModelProto()
    model.CopyFrom(fg.model)
    _prune(model.graph, wanted)
    got, _ = a.any_runner.execute(model, feeds, wanted, weights=fg.weights)
    out = {}
    for o in shapes:
        if o.endswith("a"):
            k = int(o[len(SHAPE_PREFIX):-1])
            sa, sb = (np.asarray(got[f"{SHAPE_PREFIX}{k}{s}"]).reshape(-1).tolist() for s in "ab")
            if sa != sb:
                out[k] = ([int(d) for d in sa], [int(d) for d in sb])
    for k, names in members:
        sa, sb = (list(np.shape(got[t])) for t in names[:2])
        if sa != sb:
            out[k] = (sa, sb)
    return out


def _prune(g: onnx.GraphProto, outputs: list[str]) -> None:
    """Keep only the nodes ``outputs`` need (a body's reads from outside included), and make them the
    graph's outputs."""
    keep = needed_nodes(g.node, outputs)
    nodes = [onnx.NodeProto() for _ in keep]
    for c, n in zip(nodes, keep):
        c.CopyFrom(n)
    del g.node[:]
    g.node.extend(nodes)
    del g.output[:]
    g.output.extend(onnx.ValueInfoProto(name=o) for o in outputs)


__all__ = ["runtime_shapes"]
