"""Memory budgets: parsing ``--max-memory``, the default budget, packing tensors into chunks, and whether a
run fits beside its inputs (``check_run_fits``)."""

from __future__ import annotations


import numpy as np
import onnx

from onnxprobe.errors import UsageError
from onnxprobe.graph.shapes import shape_bytes, shapes_with_folded, value_types
from onnxprobe.runtime.arrays import available_memory
from onnxprobe.runtime.sizes import parse_size  # noqa: F401 (re-exported: where every caller has it from)
from onnxprobe.types import element_count

DEFAULT_FRACTION = 0.25  # of the memory available when the command starts


def default_budget() -> int:
    return int(available_memory() * DEFAULT_FRACTION)


def nbytes(shape: tuple[int, ...] | None, dtype: str | None, count: int | None = None) -> int:
    n = count if count is not None else ((element_count(shape) or 0) if shape is not None else 0)
    try:
        item = np.dtype(dtype).itemsize if dtype else 4
    except TypeError:
        item = 4
    return n * item


def plan_chunks(sizes: list[tuple[str, int]], budget: int) -> list[list[str]]:
    """Greedy packing in the given (topological) order; a tensor larger than the budget gets a chunk
    of its own (it cannot be split)."""
    chunks: list[list[str]] = []
    cur: list[str] = []
    used = 0
    for name, size in sizes:
        if cur and used + size > budget:
            chunks.append(cur)
            cur, used = [], 0
        cur.append(name)
        used += size
    if cur:
        chunks.append(cur)
    return chunks


def check_run_fits(model: onnx.ModelProto, input_shapes: dict, fed: int) -> None:
    """A UsageError, before any run, when inputs this large (``fed`` bytes, held already: an eighth of the
    memory available or more) make a tensor that cannot fit beside them: the run needs its largest tensor
    and one more of that size (the next op's output, or a statistic's temporary). Smaller inputs are not
    checked: the shapes would cost inference on every run (a process the OS kills for memory says nothing)."""
    from onnxprobe.runtime.arrays import available_memory  # looked up at the call (tests set it)
    from onnxprobe.text import clean, human_bytes

    avail = available_memory()
    if fed * 8 < avail:
        return
    try:
        inferred, _ = shapes_with_folded(model, input_shapes, fold=False)
    except Exception:  # noqa: BLE001 - no shapes, no check: the run says what it says
        return
    types = value_types(model)
    sizes = [(shape_bytes(types.get(n), s) or 0, n, s) for n, s in inferred.items() if types.get(n) is not None]
    if not sizes:
        return
    largest, name, shape = max(sizes, key=lambda x: x[0])
    if 2 * largest > avail:
        raise UsageError(f"running the model on inputs of {human_bytes(fed)} needs about {human_bytes(2 * largest)} more (its "
                         f"largest tensor, {clean(name)} [{'x'.join(map(str, shape))}], is {human_bytes(largest)}), more than "
                         f"the {human_bytes(avail)} of memory available beside the inputs: give smaller input shapes")


def _declared_bytes(ref) -> int | None:
    """The bytes of a tensor of fully known declared shape (None: a dimension unknown until the run)."""
    shape = ref.shape
    if shape is None or not all(isinstance(d, (int, np.integer)) and d >= 0 for d in shape):
        return None
    return nbytes(tuple(int(d) for d in shape), ref.dtype)


def probe_within(runner, refs: list, feeds: dict, raw: set[str], max_memory: int | None, **kw):
    """``runner.probe`` of ``refs`` with the raw values of the tensors named in ``raw``, at most
    ``max_memory`` bytes of them alive at once (default: ``default_budget``): one run when their declared
    sizes fit in half the budget (onnxruntime's buffers and their numpy copies both exist for a moment),
    else a run of the statistics and then the raw values in runs of at most half the budget each
    (``raw_runs``)."""
    budget = (max_memory or default_budget()) // 2
    wanted = [r for r in refs if r.name in raw]
    declared = [_declared_bytes(r) for r in wanted]
    if not wanted or (None not in declared and sum(declared) <= budget):
        return runner.probe(refs, feeds, raw=set(raw) if wanted else False, **kw)
    res = runner.probe(refs, feeds, raw=False, **kw)
    for part in raw_runs(runner, wanted, feeds, res, max_memory):  # each run's values taken in before the next
        res.arrays.update(part)
        del part
    return res


def raw_plan(refs: list, res, max_memory: int | None) -> list[list]:
    """``refs`` (tensors ``res`` has the statistics and shapes of) packed, in order, into runs whose raw values
    take at most half of ``max_memory`` bytes each (default: ``default_budget``; onnxruntime's output buffers
    and their numpy copies both exist for a moment; a tensor larger than that gets a run of its own)."""
    sizes = []
    for r in refs:
        st = res.stats.get(r.key)
        count = None if r.key in res.shapes else (st.count if st is not None else 0)
        sizes.append((r.key, nbytes(res.shapes.get(r.key), r.dtype, count)))
    by_key = {r.key: r for r in refs}
    return [[by_key[k] for k in chunk] for chunk in plan_chunks(sizes, (max_memory or default_budget()) // 2)]


def raw_runs(runner, refs: list, feeds: dict, res, max_memory: int | None):
    """The raw values of ``refs`` (tensors ``res`` has the statistics and shapes of, from a run of
    ``runner``), a run's worth at a time (``raw_plan``): {tensor: value}, in the order of ``refs``. The caller
    drops each run's values before asking for the next (to write them to a file as they come:
    ``runtime.npz.NpzWriter``), or two runs' tensors are alive at once."""
    for chunk in raw_plan(refs, res, max_memory):
        part = runner.probe(chunk, feeds, stats=False, shapes=False, raw=True, outputs=False)
        values = part.arrays
        del part
        yield values
        del values
