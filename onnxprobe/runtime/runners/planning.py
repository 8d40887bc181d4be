"""Making probe plans: the probed copy of a model that exposes a set of tensors (``graph.expose``), with
statistics rows laid out for the run's input shapes, the small tensors left to be summarised on the host
(``planned_shapes``), declared shapes that the input shapes contradict left out (``unstale``), and the
copy taken from, or kept in, the disk cache of probed copies (``runtime.plan_cache``).
"""

from __future__ import annotations

from dataclasses import replace

import onnx

from onnxprobe.graph.expose import expose
from onnxprobe.graph.shapes import shape_bytes, shapes_with_folded, static_shape, value_types
from onnxprobe.graph.skeleton import large_constants, large_initializers, skeleton, stub_weights, stubs
from onnxprobe.graph.stale_shapes import stale_note, stale_shapes, without_shapes
from onnxprobe.runtime import plan_cache
from onnxprobe.types import ProbePlan, TensorRef


def make_plan(model: onnx.ModelProto, refs: list[TensorRef], input_shapes: dict | None, *, label: str,
              takes_weights: bool, cache: bool, **kw) -> ProbePlan:
    """The probed copy of ``model`` that exposes ``refs`` (``kw``: ``graph.expose``'s options, and
    ``small``: (each, total[, free]) bytes of tensors summarised on the host, see ``runners.base.SMALL_ON_HOST``),
    from the disk cache when ``cache`` allows and it holds one. ``takes_weights``: the runner takes a
    skeleton's weights apart (``GraphRunner.takes_weights``), so a model with large weights is probed as a
    skeleton and never copied whole. ``label``: the plan's source."""
    warnings: list[str] = []
    lean = takes_weights and bool(large_initializers(model) or large_constants(model)) and not stubs(model)
    disk = plan_cache.key(model, refs, kw, input_shapes) if plan_cache.enabled(cache) else None
    hit = plan_cache.load(disk, model, restore=not lean) if disk else None
    if hit is not None:
        rewritten, probes, warnings = hit
    else:
        small = kw.pop("small", None)
        shapes = shapes_with_folded(model, input_shapes, fold=True) if input_shapes else None
        src = skeleton(model, constants=True) if lean else model  # what the probed copy is made from
        src, refs = unstale(src, refs, shapes[0] if shapes else {}, warnings)
        known, host = (planned_shapes(src, refs, input_shapes or {}, *small, shapes=shapes)
                       if small and kw.get("stats", True) else ({}, set()))
        rewritten, probes = expose(src, refs, warnings=warnings, host=host, known=known, **kw)
        if disk:
            plan_cache.store(disk, rewritten, probes, warnings)
    return ProbePlan(rewritten, probes, label, warnings, base=model, weights_from=model if lean else None,
                     weights=stub_weights(rewritten, model) if lean else None)


def planned_shapes(model: onnx.ModelProto, refs: list[TensorRef], input_shapes: dict, each: int,
                   total: int, free: int = 0, shapes: tuple | None = None) -> tuple[dict[str, tuple], set[str]]:
    """For these input shapes: the concrete shapes of ``refs`` that agree in rank with the model's own
    (so that a statistics row planned on them fits the run), and the refs small enough to be summarised
    on the host (see ``runners.base.SMALL_ON_HOST``: at most ``each`` bytes, ``total`` in all, and those of at most
    ``free`` bytes whatever the total). The shapes that only folding the model's shape computations tells
    (``graph.shape_values``: a transformer export's position ids) count for the host's share alone: a tensor
    summarised on the host takes any shape it has at run time, a row planned on a shape does not.
    ``shapes``: ``shapes_with_folded``'s answer, when the caller has it."""
    inferred, folded = shapes or shapes_with_folded(model, input_shapes, fold=True)
    types = value_types(model)
    host, used, fitting, sizes = set(), 0, {}, []
    for r in refs:
        s, t = inferred.get(r.name, folded.get(r.name)), types.get(r.name)
        if s is None or t is None or r.qualified:  # a name sibling bodies share: whose shape is it?
            continue
        own = static_shape(t)
        if (r.name in inferred and own is not None and len(own) == len(s)
                and all(not isinstance(a, int) or a == b for a, b in zip(own, s))):
            fitting[r.name] = s
        n = shape_bytes(t, s)
        if n is None:  # an element type numpy lacks: summarised in the graph
            continue
        if n <= each:
            sizes.append((n, r.name))
    for n, name in sorted(sizes):  # the smallest first: the most tensors (and their nodes) the total allows
        if used + n > total and n > free:
            break
        host.add(name)
        used += n
    return fitting, host


def unstale(model: onnx.ModelProto, refs: list[TensorRef], concrete: dict,
            warnings: list[str]) -> tuple[onnx.ModelProto, list[TensorRef]]:
    """``model`` and ``refs`` without the declared shapes that the run's input shapes contradict
    (``graph.stale_shapes``; a note says so), else as they are. ``model`` is copied (a skeleton, for
    a runner that takes its weights apart: never a second copy of big weights)."""
    stale = stale_shapes(model, concrete)
    if not stale:
        return model, refs
    warnings.append(stale_note(stale))
    model = without_shapes(model, stale)
    types = value_types(model)
    return model, [replace(r, shape=static_shape(types.get(r.name))) if r.name in stale else r for r in refs]
