"""The one-run diff's stacks of small pairs (``graph.stack_nodes``, ``compare.fused_stacks``): many small float32
pairs of one static shape measured K at a time in the merged graph, none of their values on the host. Every metric
of every pair, and every introduced error, against numpy float64 on the tensors each model computes alone
(onnxruntime, no optimisation), on hostile distributions: a large offset, near-constant values (float32 partial
sums drift the most), one element, values whose squares overflow or underflow float32 (those pairs are handed to
the host, and still right), a NaN in one tensor. Served from the plan cache, the same numbers."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api
from onnxprobe.compare import fused_stacks
from onnxprobe.graph.stack_nodes import STACK_MIN, partial_length, stack_size
from tests.test_diff_direct import _same, _served, cache  # noqa: F401  (a fixture)
from tests.test_diff_light import _values


def _chain(path, blocks: int, shape: tuple, scale: float, seed: int, nan_at: int | None = None, declared=None) -> str:
    """x -> (x * w_i) -> (+ c_i) -> ... : two tensors of ``shape`` per block; w near 1, c of ``scale``. ``nan_at``: the
    block whose c holds one NaN (that block's Add and every tensor after it hold a NaN there). ``declared``: x's
    declared shape (symbolic dims), else ``shape``."""
    rng = np.random.default_rng(seed)
    width = shape[-1]
    nodes, inits, x = [], [], "x"
    for i in range(blocks):
        w = (1 + 1e-3 * rng.standard_normal(width)).astype(np.float32)
        c = (scale * 1e-3 * rng.standard_normal(width)).astype(np.float32)
        if nan_at == i:
            c[0] = np.nan
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(c, f"c{i}")]
        nodes += [helper.make_node("Mul", [x, f"w{i}"], [f"m{i}"], name=f"mul{i}"),
                  helper.make_node("Add", [f"m{i}", f"c{i}"], [f"h{i}"], name=f"add{i}")]
        x = f"h{i}"
    vi = helper.make_tensor_value_info
    dims = list(declared or shape)
    g = helper.make_graph(nodes, "chain", [vi("x", TensorProto.FLOAT, dims)], [vi(x, TensorProto.FLOAT, dims)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def _oracle(a: np.ndarray, b: np.ndarray) -> dict:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    d = np.abs(a - b)
    return {"max_abs": d.max(), "mean_abs": d.mean(), "rmse": np.sqrt((d * d).mean()), "b_absmax": np.abs(b).max(),
            "cosine": (a @ b) / np.sqrt((a @ a) * (b @ b)), "max_rel": (d / np.maximum(np.abs(b), 1e-45)).max(),
            "sqnr_db": 10 * np.log10((b @ b) / (d @ d)), "argmax": int(np.argmax(d))}


CASES = {  # name -> (shape, x, scale of c, pairs the graph measures: all but those handed to the host)
    "normal, one stack": ((4, 33), lambda r, s: r.standard_normal(s), 1.0, "all"),
    "large offset, two stacks": ((8, 1024), lambda r, s: 1e4 + r.standard_normal(s), 1.0, "all"),
    "near-constant, rows of 700": ((3, 700), lambda r, s: 0.1 + 1e-4 * r.standard_normal(s), 1e-3, "all"),
    "one element": ((1,), lambda r, s: r.standard_normal(s), 1.0, "all"),
    "squares past float32": ((4, 33), lambda r, s: 3e36 * (1 + 0.1 * r.standard_normal(s)), 1e33, "none"),
    "squares below float32": ((4, 33), lambda r, s: 1e-22 * r.standard_normal(s), 1e-22, "none"),
}


def _check(res, va: dict, vb: dict, b: str, extras: bool = True) -> int:
    """Every pair's metrics and introduced error against numpy float64 (``b``: B's file, whose weights its nodes
    recomputed on A's inputs read); the number of pairs checked."""
    weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(b).graph.initializer}
    checked = 0
    for r in res.results:
        ta, tb = va[r.pair.a.name], vb[r.pair.b.name]
        want, m = _oracle(ta, tb), r.metrics
        for k in ("max_abs", "b_absmax", *(("max_rel",) if extras else ())):
            assert getattr(m, k) == pytest.approx(want[k], rel=1e-6, abs=0), (r.pair.b.name, k)
        for k in ("rmse", "cosine", "sqnr_db", *(("mean_abs",) if extras else ())):
            assert getattr(m, k) == pytest.approx(want[k], rel=2e-5), (r.pair.b.name, k)
        if extras:
            assert m.worst == np.unravel_index(want["argmax"], ta.shape), r.pair.b.name
        # B's node on A's inputs (numpy float32, as onnxruntime's elementwise Mul / Add round), against A's tensor
        mul, i = r.pair.b.name[0] == "m", int(r.pair.b.name[1:])
        src = "x" if r.pair.b.name == "m0" else (f"h{i - 1}" if mul else f"m{i}")
        inp = res.feed["x"] if src == "x" else va[src]
        c = inp * weights[f"w{i}"] if mul else inp + weights[f"c{i}"]
        wi = _oracle(ta, c)
        assert r.introduced is not None, r.pair.b.name
        assert r.introduced.max_abs == pytest.approx(wi["max_abs"], rel=1e-6, abs=0), r.pair.b.name
        if wi["max_abs"] > 0:
            assert r.introduced.sqnr_db == pytest.approx(wi["sqnr_db"], rel=2e-5), r.pair.b.name
            assert r.introduced.cosine == pytest.approx(wi["cosine"], rel=2e-5), r.pair.b.name
            assert r.introduced.rmse == pytest.approx(wi["rmse"], rel=2e-5), r.pair.b.name
        checked += 1
    return checked


@pytest.mark.parametrize("extras", [True, False], ids=["full", "light"])
@pytest.mark.parametrize("case", list(CASES))
def test_stacked_pairs_equal_numpy_float64(case, extras, tmp_path):
    shape, make, scale, measured = CASES[case]
    blocks = 20  # 40 pairs of one shape: stacked
    a, b = _chain(tmp_path / "a.onnx", blocks, shape, scale, 0), _chain(tmp_path / "b.onnx", blocks, shape, scale, 1)
    x = make(np.random.default_rng(2), shape).astype(np.float32)
    res = api.diff(a, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays={"x": x}), extras=extras)
    assert not any("one-run diff failed" in n for n in res.notes), res.notes
    stacks = res.plan.fused.stacks
    assert sorted(k for s in stacks for k in s["pairs"]) == list(range(2 * blocks))  # every pair in a stack
    assert len(stacks) == -(-2 * blocks // stack_size(int(np.prod(shape))))
    assert not res.plan.fused.raw
    # the stacks' values never leave the run: a few rows per stack
    assert all(o.startswith(fused_stacks.STACK_PREFIX) for o in res.plan.fused.outputs)
    assert res.in_graph == (2 * blocks if measured == "all" else 0)
    va, vb = _values(a, {"x": x}), _values(b, {"x": x})
    assert _check(res, va, vb, b, extras) == 2 * blocks


def test_symbolic_dims_stack_at_the_input_shapes_given(tmp_path):
    """x declared [batch, 33]: the pairs' shapes are those shape inference gives for the input fed ([4, 33])."""
    shape = (4, 33)
    a = _chain(tmp_path / "a.onnx", 20, shape, 1.0, 0, declared=("batch", 33))
    b = _chain(tmp_path / "b.onnx", 20, shape, 1.0, 1, declared=("batch", 33))
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    res = api.diff(a, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays={"x": x}))
    assert [s["shape"] for s in res.plan.fused.stacks] == [[4, 33]] and res.in_graph == 40
    assert _check(res, _values(a, {"x": x}), _values(b, {"x": x}), b) == 40


def test_a_nan_in_a_stack_is_measured_on_the_host(tmp_path):
    """A NaN in one block's bias: that pair and every one after it are measured on the host (their non-finite
    mismatches counted there), the stack's others in the graph, all as numpy says on the finite elements."""
    shape = (4, 33)
    a, b = _chain(tmp_path / "a.onnx", 20, shape, 1.0, 0, nan_at=15), _chain(tmp_path / "b.onnx", 20, shape, 1.0, 1)
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    res = api.diff(a, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays={"x": x}))
    assert sum(len(s["pairs"]) for s in res.plan.fused.stacks) == 40
    assert res.in_graph == 31  # m0..m15 and h0..h14
    va, vb = _values(a, {"x": x}), _values(b, {"x": x})
    for r in res.results:
        fa, fb = va[r.pair.a.name], vb[r.pair.b.name]
        bad = ~np.isfinite(fa) | ~np.isfinite(fb)
        assert r.metrics.nonfinite_mismatch == int(bad.sum()), r.pair.b.name
        want = _oracle(fa[~bad], fb[~bad])
        assert r.metrics.max_abs == pytest.approx(want["max_abs"], rel=1e-6), r.pair.b.name
        assert r.metrics.sqnr_db == pytest.approx(want["sqnr_db"], rel=2e-5), r.pair.b.name


@pytest.mark.parametrize("rtol", [0.0, 1e-3, 0.5])
def test_stacked_allclose_excess_against_numpy(rtol, tmp_path):
    """max(|a - b| - rtol |b|) of each stacked pair, for the pair's criterion's rtol (0: max |a - b|)."""
    shape = (8, 1024)
    a, b = _chain(tmp_path / "a.onnx", 20, shape, 1.0, 0), _chain(tmp_path / "b.onnx", 20, shape, 1.0, 1)
    x = (5 + np.random.default_rng(2).standard_normal(shape)).astype(np.float32)
    res = api.diff(a, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays={"x": x}), tolerance=api.Tolerance("allclose", atol=1e-5, rtol=rtol))
    assert sum(len(s["pairs"]) for s in res.plan.fused.stacks) == 40 and res.in_graph == 40
    va, vb = _values(a, {"x": x}), _values(b, {"x": x})
    for r in res.results:
        ta, tb = (v.astype(np.float64) for v in (va[r.pair.a.name], vb[r.pair.b.name]))
        want = (np.abs(ta - tb) - rtol * np.abs(tb)).max()
        assert r.metrics.allclose_excess == pytest.approx(want, rel=1e-5, abs=1e-6 * np.abs(tb).max()), r.pair.b.name
        assert r.passed == (want <= 1e-5), r.pair.b.name


def test_few_pairs_of_a_shape_stay_raw(tmp_path):
    """Fewer than STACK_MIN pairs of a shape: no stack (they leave the run raw, summed on the host in float64)."""
    shape, blocks = (4, 33), (STACK_MIN - 1) // 2
    a, b = _chain(tmp_path / "a.onnx", blocks, shape, 1.0, 0), _chain(tmp_path / "b.onnx", blocks, shape, 1.0, 1)
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    res = api.diff(a, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays={"x": x}))
    assert res.plan.fused.stacks == [] and len(res.plan.fused.raw) == 2 * blocks
    assert _check(res, _values(a, {"x": x}), _values(b, {"x": x}), b) == 2 * blocks


def test_stacked_diff_is_served_with_the_same_numbers(tmp_path, cache):  # noqa: F811
    shape = (8, 1024)
    a, b = _chain(tmp_path / "a.onnx", 20, shape, 1.0, 0), _chain(tmp_path / "b.onnx", 20, shape, 1.0, 1)
    kw = dict(selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))
    first, second = api.diff(a, b, **kw), api.diff(a, b, **kw)
    assert first.plan.fused.stacks and not _served(first) and _served(second)
    _same(first, second)
    assert _check(second, _values(a, second.feed), _values(b, second.feed), b) == 40


def test_partial_rows_are_at_most_1024_long():
    assert partial_length(132) == 132 and partial_length(1) == 1 and partial_length(8192) == 1024
    assert partial_length(2100) == 700 and partial_length(3 * 1031) is None  # no divisor within [16, 1024]
    assert stack_size(8192) == 32 and stack_size(132) == 64


@pytest.mark.parametrize("bad", [
    "not a list", [{"pairs": [0], "shape": [2], "names": [["a", "b"]]}, {"pairs": [0], "shape": [2], "names": [["a", "b"]]}],
    [{"pairs": [5], "shape": [2], "names": [["a", "b"]]}], [{"pairs": [0], "shape": [0], "names": [["a", "b"]]}],
    [{"pairs": [0], "shape": [2], "names": [["a"]]}], [{"pairs": [0, 1], "shape": [2], "names": [["a", "b"]]}],
    [{"pairs": [0], "shape": [2], "names": [["a", 3]]}], [{"pairs": [0], "shape": [2], "names": [["a", "zz"]]}],
], ids=["type", "pair twice", "pair out of range", "empty dim", "one name", "names short", "name type", "unknown name"])
def test_damaged_stack_records_are_refused(bad):
    assert fused_stacks.fits([{"pairs": [0, 1], "shape": [2, 3], "names": [["a", "b"], ["a", "b", "c"]]}], 2, {"a", "b", "c"})
    assert not fused_stacks.fits(bad, 2, {"a", "b", "c"})


def test_cached_merged_graph_keeps_its_stacks(tmp_path, cache, monkeypatch):  # noqa: F811
    """A diff the direct mode does not serve (inputs given as arrays) takes the merged graph an earlier one built from
    the plan cache (``compare.fused_cache``): its stacks with it, and the same numbers."""
    from onnxprobe.compare import fused

    shape = (4, 33)
    a, b = _chain(tmp_path / "a.onnx", 20, shape, 1.0, 0), _chain(tmp_path / "b.onnx", 20, shape, 1.0, 1)
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    kw = dict(selection=api.Selection(all=True), config=api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays={"x": x}))
    first = api.diff(a, b, **kw)
    monkeypatch.setattr(fused, "build", lambda *x, **y: (_ for _ in ()).throw(AssertionError("built again")))
    second = api.diff(a, b, **kw)
    assert not _served(second) and second.plan.fused.stacks == first.plan.fused.stacks != []
    assert [r.metrics for r in second.results] == [r.metrics for r in first.results] and second.in_graph == 40


def test_a_dataset_of_other_shapes_is_not_stacked_for_the_first_ones(tmp_path):
    """A dataset's one-run graph is built for its first sample's shapes and runs every sample: a pair whose type has
    a symbolic dim is not stacked there at the first sample's shape (samples of other batch sizes would fail the
    stacks' Concat, and the whole dataset go through separate runs); pooled over the samples, as numpy says."""
    a = _chain(tmp_path / "a.onnx", 20, (4, 33), 1.0, 0, declared=("batch", 33))
    b = _chain(tmp_path / "b.onnx", 20, (4, 33), 1.0, 1, declared=("batch", 33))
    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((n, 33)).astype(np.float32) for n in (4, 7, 2)]
    for i, x in enumerate(xs):
        np.savez(data / f"s{i}.npz", x=x)
    res = api.diff_dataset(a, b, str(data), selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False))
    assert not any("one-run diff failed" in n or "separate runs" in n for n in res.notes), res.notes
    values = [(_values(a, {"x": x}), _values(b, {"x": x})) for x in xs]
    for r in res.results:
        want = max(np.abs(va[r.pair.a.name].astype(np.float64) - vb[r.pair.b.name]).max() for va, vb in values)
        assert r.metrics.max_abs == pytest.approx(want, rel=1e-6), r.pair.b.name


@pytest.mark.parametrize("criterion", ["sqnr", "atol"])
def test_a_criterion_that_would_stack_other_pairs_is_not_served(tmp_path, cache, criterion):  # noqa: F811
    """One pair judged by a rule of rtol 0 beside 39 of the default's 1e-3: the entry stacks the 39. Asked again by
    SQNR (every rtol 0), the normal path stacks all 40: not served from rows that measure that pair apart. Asked by
    another atol (the same rtols): served, as the normal path measures it."""
    shape = (8, 1024)
    a, b = _chain(tmp_path / "a.onnx", 20, shape, 1.0, 0), _chain(tmp_path / "b.onnx", 20, shape, 1.0, 1)
    kw = dict(selection=api.Selection(all=True), per_tensor={"h3": api.Tolerance("max_abs", atol=1.0)})
    first = api.diff(a, b, config=api.RunConfig(device="cpu"), **kw)
    stacked = {first.plan.report[k].b.name for s in first.plan.fused.stacks for k in s["pairs"]}
    assert len(stacked) == 39 and "h3" not in stacked
    tol = api.Tolerance("sqnr", min_sqnr=40.0) if criterion == "sqnr" else api.Tolerance("allclose", atol=1e-2)
    again = api.diff(a, b, config=api.RunConfig(device="cpu"), tolerance=tol, **kw)
    normal = api.diff(a, b, config=api.RunConfig(device="cpu", cache=False), tolerance=tol, **kw)
    assert _served(again) == (criterion == "atol")
    _same(normal, again)
