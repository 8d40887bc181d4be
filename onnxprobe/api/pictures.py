"""The values behind the pictures of a report: histograms of a few tensors (the worst rows of a
``layers``, ``diff`` or ``grad`` report, for ``--html``), fetched within a memory budget, and the node
ids Model Explorer gives a model (``explorer_ids``, for ``--overlay``)."""

from __future__ import annotations

import numpy as np

from onnxprobe.api import hints  # annotations only (hints.DiffResult: typing.get_type_hints imports it when asked)
from onnxprobe.api.core import DatasetResult, raw_chunks
from onnxprobe.api.inputs import ModelLike, as_config, as_inputs, as_max_memory, as_names, as_result, proto_of, what_came
from onnxprobe.errors import UsageError
from onnxprobe.graph.explorer_ids import ExplorerIds
from onnxprobe.graph.explorer_ids import explorer_ids as graph_explorer_ids
from onnxprobe.graph.model import Model
from onnxprobe.runtime import feeds as _feeds
from onnxprobe.runtime.arrays import as_array
from onnxprobe.runtime.budget import default_budget, plan_chunks
from onnxprobe.runtime.random_inputs import int_bounds
from onnxprobe.stats.histogram import binned, difference, histogram_bins
from onnxprobe.types import InputSpec, ProbeResult, RunConfig

BINS = 40

__all__ = ["layers_histograms", "diff_histograms", "grad_histograms", "describe_inputs", "histogram_of", "explorer_ids",
           "ExplorerIds", "BINS"]


def _bins(bins) -> int:
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, (bool, np.bool_)) and bins >= 1:
        return int(bins)
    raise UsageError(f"bins: expected a positive number of bins (an int), got {what_came(bins)}")


def _known(names: list[str], known, what: str, refs=()) -> None:
    """Each of ``names`` must be among ``known``: a name that is not would come back as no histogram, unsaid.
    ``refs``: the TensorRefs behind the keys, to name the keys of a bare name that sibling bodies share."""
    unknown = [n for n in names if n not in known]
    if unknown:
        keys = list(dict.fromkeys(r.key for r in refs if r.name == unknown[0] and r.key != r.name and r.key in known))
        if keys:
            raise UsageError(f"names: {unknown[0]!r} is ambiguous: sibling bodies each compute a tensor of that name; "
                             f"name one by its scope: {', '.join(keys)}")
        raise UsageError(f"names: {unknown[0]!r} is not {what}")


def layers_histograms(result: ProbeResult | DatasetResult, names: list[str], inputs: InputSpec | None = None, *,
                      config: RunConfig | None = None, max_memory: int | None = None, bins: int = BINS) -> dict[str, dict]:
    """Tensor key -> {"values": ``stats.histogram.binned`` counts of its values}, for these probed tensors of a
    ``layers`` result (by TensorRef.key: 'if1/then_branch/o' where sibling bodies share 'o'): rerun on the inputs the result was computed with (``result.feed``; ``inputs``, when
    given, instead) exposing at most ``max_memory`` bytes of them per run. A dataset result already holds
    the histograms of every tensor over the dataset: no run. A tensor that did not run (an If branch not
    taken) has none."""
    names, inputs, config = as_names(names, "names"), as_inputs(inputs), as_config(config)
    max_memory, bins = as_max_memory(max_memory), _bins(bins)
    as_result(result, (ProbeResult, DatasetResult), "the result of api.layers or api.layers_dataset")
    refs = [p.ref for p in result.plan.probes]  # results key a tensor by TensorRef.key ('if1/then_branch/o')
    _known(names, {r.key for r in refs}, "a tensor this result probed", refs)
    if isinstance(result, DatasetResult):
        return {n: {"values": histogram_bins(result.histograms[n], bins)} for n in names if n in result.histograms}
    measured = [n for n in names if result.stats.get(n) is not None and result.stats[n].count]
    if not measured:
        return {}
    model = Model(result.plan.base, result.plan.source)
    # the result's own feed: made again from default inputs, the histograms would be of another run
    feed = result.feed if inputs is None and result.feed else _feeds.make_feeds(model.proto, inputs).values
    config = config or RunConfig(device=result.info.device, opt_level=result.info.opt_level or RunConfig.opt_level)
    out: dict[str, dict] = {}
    for _, _, values in raw_chunks(model, result, feed, measured, max_memory=max_memory, config=config):
        out.update({n: {"values": binned(v, bins)} for n, v in values.items() if v.dtype.kind in "biuf"})
        del values
    return out


def diff_histograms(res: hints.DiffResult, names: list[str], inputs: InputSpec | None = None, *, max_memory: int | None = None,
                    bins: int = BINS) -> dict[str, dict]:
    """Tensor of A -> {"values": binned A, "error": binned A - B} for these pairs of a DiffResult, both
    sides rerun on the same inputs (the result's own, or ``inputs``), at most ``max_memory`` bytes of tensors per run."""
    from onnxprobe.compare.result import DiffResult

    names = as_names(names, "names")
    wanted = set(names)
    inputs, max_memory, bins = as_inputs(inputs), as_max_memory(max_memory), _bins(bins)
    as_result(res, DiffResult, "the result of api.diff")
    _known(names, {r.pair.a.name for r in res.results}, "the A tensor of a pair of this result")
    pairs = [r for r in res.results if r.pair.a.name in wanted and r.metrics is not None and r.shape is not None]
    if not pairs:
        return {}
    # the result's own inputs unless others are given: the histograms are of the tensors it measured
    feed = _feeds.make_feeds(res.a.model.proto, inputs).values if inputs is not None or not res.feed else res.feed
    size = {id(r): 2 * 8 * int(np.prod(r.shape, dtype=np.int64)) for r in pairs}  # both sides, as float64
    chunks = plan_chunks([(str(k), size[id(r)]) for k, r in enumerate(pairs)], (max_memory or default_budget()) // 2)
    out: dict[str, dict] = {}
    for chunk in chunks:
        part = [pairs[int(k)] for k in chunk]
        va = res.a.values([r.pair.a for r in part], feed)
        vb = res.b.values([r.pair.b for r in part], feed)
        for r in part:
            a, b = va.get(r.pair.a.probe), vb.get(r.pair.b.probe)
            if a is None or b is None or np.shape(a) != np.shape(b):
                continue
            a64 = np.asarray(a, dtype=np.float64)
            out[r.pair.a.name] = {"values": binned(a64, bins), "error": binned(difference(a, b), bins)}
        del va, vb
    return out


def grad_histograms(result: hints.GradResult, names: list[str], *, bins: int = BINS) -> dict[str, dict]:
    """Forward tensor -> {"values": ``binned`` counts of its gradient}, from a GradResult run with ``save=True``;
    a name may be the forward tensor's (``conv1.weight``) or its gradient's (``conv1.weight_grad``)."""
    from onnxprobe.api.grad import GradResult
    from onnxprobe.types import forward_name

    names, bins = as_names(names, "names"), _bins(bins)
    as_result(result, GradResult, "the result of api.grad")
    if not result.arrays:
        raise UsageError("result: holds no gradient values: run api.grad(..., save=True)")
    names = [forward_name(n) or n for n in names]
    _known(names, result.arrays, "a tensor whose gradient this result holds")
    return {n: {"values": binned(result.arrays[n], bins)} for n in names}


def describe_inputs(model: ModelLike, inputs: InputSpec | None = None, *, feed: dict | None = None,
                    source: str | None = None) -> list[str]:
    """One line per input of ``model`` (a Model, a path or a ModelProto), as a report header shows it:
    'x float32 [1x3x224x224] from x.npy', '... random (seed 0)'. The feeds are made again from the same
    spec (they are deterministic), or, given ``feed``, are those values (a result's own, ``res.feed``);
    ``source``: where the inputs that no file or array of ``inputs`` gives came from, where not from the spec's
    random draw ('the example arguments of build.py:build', diff --vs-torch's)."""
    spec = as_inputs(inputs) or InputSpec()
    values = feed if feed else _feeds.make_feeds(proto_of(model), spec).values
    spec = _feeds.named_files(spec, list(values))
    out = []
    for name, v in values.items():
        v = np.asarray(v) if not hasattr(v, "dtype") else v
        if name in spec.files:
            origin = f"from {spec.files[name]}"
        elif name in spec.arrays:
            origin = "given"
        elif source is not None:
            origin = f"from {source}"
        elif v.dtype.kind == "b":
            origin = f"random booleans (seed {spec.seed})"
        elif v.dtype.kind in "iu":  # the range drawn from: --int-range within what the dtype holds
            lo, hi = int_bounds(v.dtype, spec.int_range)
            origin = f"random integers in [{lo}, {hi}) (seed {spec.seed})"
        else:
            origin = f"random (seed {spec.seed})"
        dims = "x".join(str(d) for d in v.shape) or "scalar"
        out.append(f"{name} {v.dtype} [{dims}] {origin}")
    return out


def explorer_ids(model: ModelLike) -> ExplorerIds:
    """The node ids Model Explorer gives ``model`` (a Model, a path or a ModelProto)."""
    return graph_explorer_ids(proto_of(model))


def histogram_of(values: np.ndarray, bins: int = BINS) -> dict:
    """{"values": ``stats.histogram.binned`` counts} of one array, as the report histograms take them."""
    a = as_array(values, "values") if isinstance(values, (np.ndarray, list, tuple)) else None  # a bare number is no array
    if a is None or a.dtype.kind not in "biuf":
        raise UsageError(f"values: expected an array of numbers (a numpy array, list or tuple), got {what_came(values)}")
    return {"values": binned(a, _bins(bins))}
