"""What the interactive debugger (``onnxprobe debug``) needs, as plain functions a notebook can call too:
the model in brief, the first tensor where a condition holds, and ``Prober``, which runs any tensors of
one model on demand and keeps the probed copies (and their sessions) of its last few requests."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import numpy as np
import onnx

from onnxprobe.api.inputs import ModelLike, as_config, as_model, as_names, checked_feed, what_came
from onnxprobe.errors import UsageError
from onnxprobe.graph.extents import tensor_nbytes
from onnxprobe.graph.index import GraphIndex
from onnxprobe.graph.index import index as graph_index
from onnxprobe.graph.model import Model
from onnxprobe.runtime.feeds import model_inputs
from onnxprobe.runtime.interrupt import call_interruptibly
from onnxprobe.runtime.runners.ort import OrtRunner
from onnxprobe.stats.conditions import Condition, parse_condition
from onnxprobe.stats.status import values_status
from onnxprobe.stats.tensor_stats import TensorStats
from onnxprobe.types import ProbeResult, RunConfig, TensorRef, check_bool

T = TypeVar("T")


def index(model: ModelLike) -> GraphIndex:
    """The (cached, on a Model) GraphIndex of a Model, a path or a ModelProto: every tensor and node."""
    return graph_index(as_model(model))


def model_info(model: ModelLike) -> dict:
    """What ``debug``'s ``info`` prints: producer, IR, opsets, node and op counts, inputs, outputs, weights."""
    model = as_model(model)
    idx = index(model)
    p = model.proto
    ops = Counter(s.node.op_type for s in idx.sites)
    weights = list(idx.initializers.values())
    for s in idx.sites:  # exporters such as paddle2onnx keep weights in Constant nodes
        if s.node.op_type == "Constant":
            weights += [a.t for a in s.node.attribute if a.name == "value" and a.type == onnx.AttributeProto.TENSOR]
    init_bytes = sum(tensor_nbytes(t) for t in weights)
    init_bytes += sum(tensor_nbytes(sp.values) + tensor_nbytes(sp.indices) for sp in idx.sparse.values())  # as stored
    outs = []
    for o in p.graph.output:
        r = idx.refs.get(o.name)
        outs.append({"name": o.name, "dtype": r.dtype if r else None, "shape": r.shape if r else None})
    return {
        "path": model.source, "producer": " ".join(x for x in (p.producer_name, p.producer_version) if x),
        "ir_version": p.ir_version,
        "opsets": {(o.domain or "ai.onnx"): o.version for o in p.opset_import},
        "nodes": len(idx.sites), "nodes_in_subgraphs": sum(1 for s in idx.sites if s.chain),
        "ops": dict(ops.most_common()),
        "inputs": [{"name": s.name, "dtype": str(s.dtype), "shape": s.shape} for s in model_inputs(p)],
        "outputs": outs, "initializers": len(weights) + len(idx.sparse), "initializer_bytes": init_bytes,
        "warnings": list(model.warnings),
    }


class Prober:
    """Statistics and raw values of any tensors of one model (node outputs from a run; graph inputs and
    weights from the feed and the initializers), on one device. The probed copies and onnxruntime
    sessions of the last few requests are kept, so a run with new inputs reuses its session; Ctrl-C
    stops a run within one node and raises KeyboardInterrupt (``runtime.interrupt``)."""

    def __init__(self, model: Model, config: RunConfig | None = None) -> None:
        model = self.model = as_model(model)
        self.config = as_config(config) or RunConfig()
        self.runner = OrtRunner(model.proto, self.config, model.source, interruptible=True)

    def run(self, feed: dict[str, np.ndarray], names, *, raw=(), stats: bool = True) -> ProbeResult:
        """``stats`` covers every name of ``names`` that could be computed; ``arrays`` holds the raw values
        of the ``raw`` names. A name (one, or a list) the model lacks, or a feed that does not give the
        model's inputs as it takes them, is a UsageError."""
        stats = check_bool(stats, "Prober.run stats")  # "no" is truthy: it would compute what it says not to
        idx = index(self.model)
        names, raw = list(dict.fromkeys(as_names(names, "names"))), set(as_names(raw, "raw"))
        for what, given in (("names", names), ("raw", sorted(raw))):
            unknown = [n for n in given if n not in idx.refs]
            if unknown and idx.ambiguous(unknown[0]):
                raise idx.ambiguous(unknown[0])
            if unknown:
                raise UsageError(f"{what}: no tensor named {unknown[0]!r} in {self.model.name}")
        feed = checked_feed(self.model.proto, feed)
        wanted = sorted(set(names) | raw, key=idx.position.__getitem__)
        refs = [idx.refs[n] for n in wanted]
        # a sparse weight's values are the index's, densified on the host: onnxruntime returns no array of it
        host = {n for n in raw if n in idx.sparse}
        key = (tuple(wanted), tuple(sorted(raw)), stats)
        res = self.runner.probe(refs, feed, stats=stats, raw=raw - host, key=key, outputs=True)
        res.arrays.update({n: idx.value(n) for n in sorted(host)})
        if not stats:  # raw values were asked for: keep statistics out of the result
            res.stats = {}
        res.plan.probes = [p for p in res.plan.probes if p.ref.key in set(names)] if names else []
        res.outputs = {n: v for n, v in res.outputs.items() if n in set(idx.outputs)}
        res.feed = feed
        return res


def where(rows: ProbeResult | Iterable[tuple[TensorRef, TensorStats | None]], condition: Condition | str, *,
          shapes: dict | None = None) -> tuple[TensorRef, TensorStats] | None:
    """The first (ref, stats) in ``rows`` (topological order; or a result, whose ``rows()`` are taken)
    whose statistics satisfy ``condition`` (a string such as ``nan``, ``inf``, ``absmax>1e4``,
    ``std<1e-6``, or a parsed Condition). A tensor that did not run (inside an If branch not taken or a loop
    of no iteration: a count of 0 and no runtime shape, in a result's ``shapes`` or the ``shapes`` given with
    (ref, stats) pairs) holds no condition: it is no empty tensor, ``count==0`` among them."""
    if not isinstance(condition, (Condition, str)):
        raise UsageError(f"condition: expected a string such as 'nan' or 'absmax>1e4', or a Condition, got "
                         f"{type(condition).__name__}")
    if shapes is not None and not isinstance(shapes, dict):
        raise UsageError(f"shapes: expected a dict of tensor name -> runtime shape, got {type(shapes).__name__}")
    cond = condition if isinstance(condition, Condition) else parse_condition(condition)
    if callable(getattr(rows, "rows", None)):  # a result (ProbeResult, DatasetResult): its rows
        shapes = rows.shapes if shapes is None else shapes
        rows = rows.rows()
    elif rows is None or isinstance(rows, (str, bytes, dict)) or not hasattr(rows, "__iter__"):
        raise UsageError(f"rows: expected a result of api.layers or its rows() ((TensorRef, TensorStats) pairs), "
                         f"got {type(rows).__name__}")
    for row in rows:
        if not (isinstance(row, tuple) and len(row) == 2 and (row[1] is None or isinstance(row[1], TensorStats))):
            raise UsageError(f"rows: expected a result of api.layers or its rows() ((TensorRef, TensorStats) pairs), got an "
                             f"item {what_came(row)}")
        ref, st = row
        if st is not None and st.count == 0 and shapes is not None and values_status(0, shapes.get(ref.key)) == "not run":
            continue
        if cond.holds(st):
            return ref, st
    return None




def interruptibly(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` such that Ctrl-C interrupts the wait at once (the debugger's long calls:
    ``diff``, ``grad_plan``), raising KeyboardInterrupt; nothing half-done is kept."""
    if not callable(fn):
        raise UsageError(f"fn: expected a function to call, got {type(fn).__name__}")
    return call_interruptibly(fn, *args, grace=0, **kwargs)
