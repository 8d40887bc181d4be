"""Symbolic dims that two merged models share by name but not by size, told apart (``diff``'s one run).

Shape inference names the dims it invents model by model ("unk__0", "unk__1"...), and exporters name
alike ("seq"); in the graph of model A beside model B (``graph.merge.side_by_side``) one name can then
stand for a dim of A's and an unrelated dim of B's. onnxruntime's allocation planner takes two tensors
whose dims share a name for tensors of one size and may hand B's tensor a freed buffer of A's: where the
sizes differ at run time (a NonZero count that differs between A and B), the run fails ("Shape mismatch
attempting to re-use buffer"). Renaming all of B's dims costs the other way: with none shared, the planner
reuses none of A's buffers for B's tensors (PP-OCRv4 det 480x480, diff --all: 252 -> 277 MB).

``keep_apart_in_place(model, concrete, inputs, prefix)`` renames (``prefix`` + name) the dims of the main
graph's declarations of ``prefix``'s tensors whose name does not stand for one size in this run: a name
some declaration holds where the run's shapes (``concrete``, inferred for the input shapes ``inputs``)
give no size (a data-dependent dim), or give two different sizes. A name that is one size everywhere
stays shared. It changes ``model`` in place (the caller's own merged copy) and returns how many dims it
renamed.
"""

from __future__ import annotations

import onnx


def _declared(g: onnx.GraphProto):
    """(name, dims) of each main-graph tensor declaration with a shape."""
    for vi in (*g.input, *g.value_info, *g.output):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            yield vi.name, vi.type.tensor_type.shape.dim


def keep_apart_in_place(model: onnx.ModelProto, concrete: dict[str, tuple[int, ...]], inputs: dict[str, tuple[int, ...]],
                        prefix: str) -> int:
    sizes: dict[str, set] = {}
    for name, dims in _declared(model.graph):
        shape = inputs.get(name) or concrete.get(name)
        known = shape is not None and len(shape) == len(dims)
        for i, d in enumerate(dims):
            if d.dim_param:
                sizes.setdefault(d.dim_param, set()).add(int(shape[i]) if known else None)
    apart = {p for p, s in sizes.items() if len(s) != 1 or None in s}
    renamed = 0
    for name, dims in _declared(model.graph):
        if name.startswith(prefix):
            for d in dims:
                if d.dim_param in apart:
                    d.dim_param = prefix + d.dim_param
                    renamed += 1
    return renamed


__all__ = ["keep_apart_in_place"]
