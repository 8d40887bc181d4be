"""Reading a run back: a probed copy's outputs (``graph.expose``'s statistics rows, runtime shapes and raw
values) turned into statistics, shapes and values per probed tensor, and the values of graph inputs and
weights, which are never run: they come from the feeds and the initializers and are summarised on the host.

No onnx at import: a cached ``layers`` run (``runtime.direct``) reads its outputs back with ``read_probes`` and
never imports it; the functions that read a model import what they need of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from onnxprobe.stats.tensor_stats import TensorStats, has_statistics, needs_rerun, widened
from onnxprobe.types import Probe, TensorRef, element_count

if TYPE_CHECKING:
    import onnx


def read_probes(probes: list[Probe], out: dict, host_stats: bool = False) -> tuple[dict, dict, dict]:
    """A run's outputs, read back per probed tensor: (statistics, runtime shapes, raw values).
    Statistics come from the in-graph rows, or from the raw values for probes marked stats_on_host (and
    for every raw probe with ``host_stats``)."""
    stats, shapes, arrays = {}, {}, {}
    # per-block summaries (the shape's size, checked by the graph's Reshape), merged for all tensors at once
    blocked = [k for k, p in enumerate(probes) if p.stats_output and p.stats_block]
    merged = dict(zip(blocked, TensorStats.from_many_blocks([(out[probes[k].stats_output], probes[k].stats_block,
                                                              probes[k].stats_extras) for k in blocked])))
    for k, p in enumerate(probes):
        name = p.ref.key
        if p.shape_output and p.shape_output in out:
            shapes[name] = tuple(int(d) for d in out[p.shape_output])
        if k in merged:
            stats[name] = merged[k]
        elif p.stats_output and p.stats_sums:  # the row's two computed pieces: count from the shape, no NaN/Inf
            row = np.concatenate([[float(element_count(shapes[name])), 0.0, 0.0],
                                  np.asarray(out[p.stats_output], np.float64).reshape(-1),
                                  np.asarray(out[p.stats_sums], np.float64).reshape(-1), [1.0]])  # unit 1 (fast sums)
            stats[name] = TensorStats.from_rows(row)
        elif p.stats_output:
            stats[name] = TensorStats.from_rows(out[p.stats_output])
        if p.exact_extremes and p.exact_extremes in out and stats.get(name) is not None:
            # [min, max], or one per iteration of the Loop/Scan bodies it was carried out of (none: no run)
            pairs = np.asarray(out[p.exact_extremes]).reshape(-1, 2)
            if pairs.size:
                stats[name] = stats[name].with_extremes(min(int(v) for v in pairs[:, 0]), max(int(v) for v in pairs[:, 1]))
        if p.raw_output:
            value = out[p.raw_output]
            if p.raw_scalar:  # an If branch's scalar, carried as [1] (graph.expose)
                value = _as_scalar(value)
            if p.stats_on_host or (host_stats and name not in stats):
                stats[name] = host_statistics(value)
                # a Loop/Scan body's values are stacked over its iterations (and a Scan-8's over its batch too):
                # not the tensor's shape, which stays the body's own, as where the graph summarises it
                if not p.shape_output and not any(sc.endswith("/body") for sc in p.ref.scope):
                    shapes[name] = tuple(np.shape(value))
            if not p.raw_for_stats:
                arrays[name] = value
        if p.ref.scope and shapes.get(name) == () and (p.ref.shape or (stats.get(name) is not None and stats[name].count == 0)):
            del shapes[name]  # an If branch that did not run carries its shape out empty: no shape (a scalar's is () too)
    return stats, shapes, arrays


def _shape(value) -> tuple:
    """The shape of a numpy array or an OrtValue."""
    return tuple(value.shape()) if hasattr(value, "element_type") else tuple(np.shape(value))


def _size(value) -> int:
    """Elements of a numpy array or an OrtValue."""
    return element_count(_shape(value))


def _as_scalar(value):
    """An If branch's scalar from the [1] it is carried as (graph.expose; [iterations, 1] in a loop);
    empty ([0]: its branch did not run) as it is."""
    shape = tuple(value.shape()) if hasattr(value, "element_type") else np.shape(value)
    if not shape or shape[-1] != 1:
        return value
    return np.asarray(value.numpy() if hasattr(value, "element_type") else value).reshape(shape[:-1])


def without_idle_branches(values: dict, model: onnx.ModelProto) -> dict:
    """``values`` without the tensors of If branches that did not run, nor of Loop or Scan bodies that ran no
    iteration: those come back empty (``graph.expose``; stacked over no iteration, [0x0] for a body tensor of rank
    1), which is no value of theirs (the debugger showed such a tensor as run and empty)."""
    if not any(_size(v) == 0 for v in values.values()):
        return values
    from onnxprobe.graph.walk import in_if_branch, in_loop_body

    branch, looped = in_if_branch(model), in_loop_body(model)
    return {n: v for n, v in values.items()
            if not (_size(v) == 0 and (n in branch or (n in looped and _shape(v)[:1] == (0,))))}


def host_statistics(value) -> TensorStats | None:
    """A value's statistics, computed on the host from its values; None for a dtype that has none."""
    a = np.asarray(value)
    return TensorStats.from_array(a) if has_statistics(a.dtype) else None


def read_host_refs(refs: list[TensorRef], feeds: dict, model: onnx.ModelProto, st: dict, shp: dict, arrays: dict, *,
                   stats: bool, shapes: bool, raw: bool | set[str]) -> None:
    """Graph inputs and weights among ``refs``: values from ``feeds`` and the initializers of ``model``,
    statistics and shapes on the host, added to ``st``, ``shp`` and (when ``raw`` names them) ``arrays``."""
    for r in refs:
        if r.kind == "node":
            continue
        v = feeds.get(r.name) if r.kind == "input" else constant_value(model, r.name)
        if v is None:
            continue
        if stats:
            st[r.name] = host_statistics(v)
        if shapes:
            shp[r.name] = tuple(np.shape(v))
        if (r.name in raw) if isinstance(raw, set) else raw:
            arrays[r.name] = widened(np.asarray(v))  # a bfloat16 input or weight as a node output's is read back


def constant_value(model: onnx.ModelProto, name: str) -> np.ndarray | None:
    """An initializer's values, the main graph's first, then an If/Loop/Scan body's (a sparse one's densified on
    the host, as nodes read it)."""
    from onnxprobe.graph.tensor_data import to_array

    from onnxprobe.graph.densify import dense_array
    from onnxprobe.graph.walk import all_graphs

    for g in all_graphs(model.graph):
        for t in g.initializer:
            if t.name == name:
                return to_array(t)
        for s in g.sparse_initializer:
            if s.values.name == name:
                return dense_array(s)
    return None


def body_weights(model: onnx.ModelProto) -> set[str]:
    """The initializers of If/Loop/Scan bodies (sparse ones too) that are no name of the main graph's own weights:
    no node of the probed copy produces them, so their values are read on the host (``constant_value``)."""
    from onnxprobe.graph.walk import all_graphs

    main = {t.name for t in model.graph.initializer} | {s.values.name for s in model.graph.sparse_initializer}
    bodies = list(all_graphs(model.graph))[1:]
    return {n for g in bodies for n in [*(t.name for t in g.initializer), *(s.values.name for s in g.sparse_initializer)]
            if n not in main}


def misplanned(p: Probe, st: TensorStats | None, shape: tuple | None) -> bool:
    """Whether ``p``'s statistics row was laid out for other dims than the run's tensor has
    (``Probe.planned_shape``): its runtime ``shape`` where exposed, else its element count."""
    planned = p.planned_shape
    if not planned or st is None:
        return False
    if shape is not None:
        return len(shape) != len(planned) or any(a is not None and a != b for a, b in zip(planned, shape))
    return (n := element_count(planned)) is not None and st.count != n


def second_look(probes: list[Probe], st: dict, shp: dict) -> tuple[set[str], list[TensorRef]]:
    """What a run's statistics cannot stand as they are: (the names of tensors whose rows were laid out for other
    dims than they ran with, ``misplanned``; the refs to summarise again, those and the ones whose fast rows
    came out non-finite, ``stats.tensor_stats.needs_rerun``). ``runners.base.run_plan`` summarises them again."""
    moved = {p.ref.name for p in probes if p.stats_output and misplanned(p, st.get(p.ref.key), shp.get(p.ref.key))}
    bad = [p.ref for p in probes if p.stats_output and (needs_rerun(st.get(p.ref.key)) or p.ref.name in moved)]
    return moved, bad
