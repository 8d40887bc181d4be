"""A global pool written as a reduce over the spatial axes: torch.onnx's legacy exporter writes
nn.AdaptiveAvgPool2d(1) as GlobalAveragePool, its dynamo exporter as ReduceMean over axes [2, 3] (or [-2, -1])
with keepdims=1. Both read tensors already paired and compute one function of one shape, yet each was listed
"no counterpart" (QA: mobilenet_v3_small's 11 squeeze-excitation pools), so a fault there showed a layer later.
The pair's numbers are checked against numpy in float64; a reduce over other axes, or one that drops them,
stays unpaired."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.match.observe import observe

RNG = np.random.default_rng(5)
SCALE_A, SCALE_B = np.float32(2.0), np.float32(2.001)  # B's tensors a little off A's: the pair's numbers say something


def _model(pool: list, shape: tuple, opset: int, out_shape: list, suffix: str, scale: np.float32, consts=()):
    """x -> Mul by ``scale`` -> m -> the pool's node(s) -> p -> Sigmoid -> y; names end in ``suffix`` so that
    no pair is made by name (the exporters name every tensor their own way)."""
    s = suffix
    nodes = [helper.make_node("Mul", ["x", f"k{s}"], [f"m{s}"]), *pool, helper.make_node("Sigmoid", [f"p{s}"], [f"y{s}"])]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                      [helper.make_tensor_value_info(f"y{s}", TensorProto.FLOAT, out_shape)],
                      [numpy_helper.from_array(np.array(scale, np.float32), f"k{s}"), *consts], opset=opset)


def _global(op: str, shape: tuple, opset: int = 17):
    """Model A: the legacy exporter's spelling, a GlobalAveragePool (GlobalMaxPool)."""
    out = list(shape[:2]) + [1] * (len(shape) - 2)
    return _model([helper.make_node(op, ["m_a"], ["p_a"])], shape, opset, out, "_a", SCALE_A)


def _reduce(op: str, shape: tuple, axes: list[int], opset: int, keepdims: int | None = 1):
    """Model B: the dynamo exporter's spelling, a ReduceMean (ReduceMax) over ``axes``: an attribute before
    opset 18, a second input (an initializer) from it; ``keepdims`` None: left to its default (1)."""
    kept = {} if keepdims is None else {"keepdims": keepdims}
    out = [1 if (k in axes or k - len(shape) in axes) else d for k, d in enumerate(shape)] if keepdims != 0 else \
        [d for k, d in enumerate(shape) if k not in axes and k - len(shape) not in axes]
    if opset < 18:
        node, consts = helper.make_node(op, ["m_b"], ["p_b"], axes=axes, **kept), ()
    else:
        node, consts = helper.make_node(op, ["m_b", "axes_b"], ["p_b"], **kept), (numpy_helper.from_array(np.array(axes, np.int64), "axes_b"),)
    return _model([node], shape, opset, out, "_b", SCALE_B, consts)


def _diff(tmp_path, a, b, x):
    onnx.save(a, tmp_path / "a.onnx")
    onnx.save(b, tmp_path / "b.onnx")
    return api.diff(tmp_path / "a.onnx", tmp_path / "b.onnx", selection=api.Selection(all=True),
                    config=api.RunConfig(device="cpu", cache=False), inputs=api.InputSpec(arrays={"x": x}))


@pytest.mark.parametrize("pool, reduce, shape, axes, opset, keepdims", [
    ("GlobalAveragePool", "ReduceMean", (2, 3, 5, 4), [2, 3], 17, 1),  # axes as an attribute
    ("GlobalAveragePool", "ReduceMean", (2, 3, 5, 4), [-2, -1], 17, None),  # keepdims by default
    ("GlobalAveragePool", "ReduceMean", (2, 3, 5, 4), [-1, 2], 18, 1),  # axes as an input, one negative
    ("GlobalAveragePool", "ReduceMean", (1, 4, 3, 2, 5), [2, 3, 4], 18, 1),  # rank 5: three spatial axes
    ("GlobalAveragePool", "ReduceMean", (2, 3, 7), [-1], 18, 1),  # rank 3: one
    ("GlobalMaxPool", "ReduceMax", (2, 3, 5, 4), [-2, -1], 18, 1),
    ("GlobalMaxPool", "ReduceMax", (2, 3, 5, 4), [2, 3], 17, 1),
])
def test_a_reduce_over_every_spatial_axis_pairs_with_the_global_pool(tmp_path, pool, reduce, shape, axes, opset, keepdims):
    x = RNG.standard_normal(shape).astype(np.float32)
    res = _diff(tmp_path, _global(pool, shape, opset), _reduce(reduce, shape, axes, opset, keepdims), x)
    got = {(r.pair.a.name, r.pair.b.name): r for r in res.results}
    assert set(got) == {("m_a", "m_b"), ("p_a", "p_b"), ("y_a", "y_b")}, (set(got), res.matching.unmatched_a)
    assert not res.matching.unmatched_a and not res.matching.unmatched_b
    r = got["p_a", "p_b"]
    assert f"{pool} in A and {reduce} in B are one function" in r.pair.reason, r.pair.reason
    # the oracle: each side's pool in float64, from the float32 values each Mul computes
    spatial = tuple(range(2, len(shape)))
    f = np.mean if reduce == "ReduceMean" else np.max
    a = f((x * SCALE_A).astype(np.float64), axis=spatial, keepdims=True)
    b = f((x * SCALE_B).astype(np.float64), axis=spatial, keepdims=True)
    m = r.metrics
    assert tuple(r.shape) == a.shape
    np.testing.assert_allclose(m.max_abs, np.abs(a - b).max(), rtol=1e-3)
    np.testing.assert_allclose(m.mean_abs, np.abs(a - b).mean(), rtol=1e-3)
    np.testing.assert_allclose(m.sqnr_db, 10 * np.log10((b ** 2).sum() / ((a - b) ** 2).sum()), atol=0.05)
    np.testing.assert_allclose(m.cosine, (a * b).sum() / np.sqrt((a ** 2).sum() * (b ** 2).sum()), atol=1e-6)


@pytest.mark.parametrize("axes, keepdims", [([1], 1), ([2], 1), ([1, 2, 3], 1), ([2, 3], 0), ([-2, -1], 0)])
def test_a_reduce_over_other_axes_or_dropping_them_stays_unpaired(tmp_path, axes, keepdims):
    """Another function (the channels' mean, one spatial axis only) or another shape (keepdims=0): no pair,
    in either spelling of the axes; the Mul before and the Sigmoid after are what they were."""
    shape = (2, 3, 5, 4)
    x = RNG.standard_normal(shape).astype(np.float32)
    for opset in (17, 18):
        res = _diff(tmp_path, _global("GlobalAveragePool", shape, opset), _reduce("ReduceMean", shape, axes, opset, keepdims), x)
        assert ("m_a", "m_b") in {(r.pair.a.name, r.pair.b.name) for r in res.results}
        assert "p_a" in {u.obs.name for u in res.matching.unmatched_a}
        assert "p_b" in {u.obs.name for u in res.matching.unmatched_b}


@pytest.mark.parametrize("axes, keepdims, want", [
    ([2, 3], 1, "GlobalAveragePool"), ([-1, -2], None, "GlobalAveragePool"), ([3, 2], 1, "GlobalAveragePool"),
    ([2], 1, ""), ([1], 1, ""), ([0, 2, 3], 1, ""), ([2, 3], 0, ""), ([2, 3, 4], 1, ""), ([-5, 3], 1, ""), ([2, 4], 1, ""), ([2, 2, 3], 1, ""),
])
@pytest.mark.parametrize("opset", [17, 18])
def test_what_a_reduce_is_observed_as(axes, keepdims, want, opset):
    """The rule itself, where shapes would not tell (a reduce over [2] against a pool of a tensor of width 1):
    exactly the spatial axes, each once, kept."""
    m = onnx.shape_inference.infer_shapes(_reduce("ReduceMean", (2, 3, 5, 4), axes, opset, keepdims))  # as a diff reads it
    obs = {o.name: o for o in observe(m).observables}
    assert obs["p_b"].global_pool == want
    assert obs["m_b"].global_pool == "" and obs["p_b"].effective_op == "ReduceMean"  # shown as its own op


def test_a_reduce_with_no_axes_reduces_them_all():
    """ReduceMean without axes (opset 18: no second input) averages every axis: no global pool."""
    m = _model([helper.make_node("ReduceMean", ["m_b"], ["p_b"])], (2, 3, 5, 4), 18, [1, 1, 1, 1], "_b", SCALE_B)
    assert {o.name: o for o in observe(onnx.shape_inference.infer_shapes(m)).observables}["p_b"].global_pool == ""


def _window(op: str, shape: tuple, **attrs):
    """Model B as torch.onnx's legacy exporter writes nn.AdaptiveMaxPool2d(1): a pool of one window over the input."""
    out = list(shape[:2]) + [1] * (len(shape) - 2)
    return _model([helper.make_node(op, ["m_b"], ["p_b"], **attrs)], shape, 17, out, "_b", SCALE_B)


@pytest.mark.parametrize("op, pool", [("MaxPool", "GlobalMaxPool"), ("AveragePool", "GlobalAveragePool")])
def test_a_pool_of_one_window_pairs_with_the_global_pool(tmp_path, op, pool):
    shape = (2, 3, 5, 4)
    x = RNG.standard_normal(shape).astype(np.float32)
    res = _diff(tmp_path, _global(pool, shape), _window(op, shape, kernel_shape=[5, 4], strides=[2, 2]), x)
    r = next(r for r in res.results if r.pair.a.name == "p_a")
    assert r.pair.b.name == "p_b" and f"{pool} in A and {op} in B are one function" in r.pair.reason, r.pair.reason
    f = np.max if op == "MaxPool" else np.mean
    a, b = (f((x * s).astype(np.float64), axis=(2, 3), keepdims=True) for s in (SCALE_A, SCALE_B))
    np.testing.assert_allclose(r.metrics.max_abs, np.abs(a - b).max(), rtol=1e-3)


@pytest.mark.parametrize("attrs", [{"kernel_shape": [5, 3]}, {"kernel_shape": [5, 4], "pads": [1, 0, 0, 0]},
                                   {"kernel_shape": [3, 2], "dilations": [2, 3]}, {"kernel_shape": [5, 4], "auto_pad": "SAME_UPPER"}])
def test_what_a_pool_is_observed_as(attrs):
    """One window over the whole input, unpadded and undilated, is a global pool; a smaller window, padding or a
    dilated one (a 3x2 kernel dilated to cover 5x4) is not; a MaxPool's Indices never are."""
    m = onnx.shape_inference.infer_shapes(_window("MaxPool", (2, 3, 5, 4), **attrs))
    assert {o.name: o for o in observe(m).observables}["p_b"].global_pool == ""
    ok = onnx.shape_inference.infer_shapes(_window("MaxPool", (2, 3, 5, 4), kernel_shape=[5, 4]))
    assert {o.name: o for o in observe(ok).observables}["p_b"].global_pool == "GlobalMaxPool"
    two = _model([helper.make_node("MaxPool", ["m_b"], ["p_b", "i_b"], kernel_shape=[5, 4])], (2, 3, 5, 4), 17, [2, 3, 1, 1], "_b", SCALE_B)
    two.graph.output.append(helper.make_tensor_value_info("i_b", TensorProto.INT64, [2, 3, 1, 1]))
    obs = {o.name: o for o in observe(onnx.shape_inference.infer_shapes(two)).observables}
    assert obs["p_b"].global_pool == "GlobalMaxPool" and obs["i_b"].global_pool == ""
