"""TensorStats against numpy, and exact, order-independent merging."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from onnxprobe.stats.tensor_stats import TensorStats


def test_from_array_matches_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 2.0, size=10_000).astype(np.float32)
    x[:10] = 0
    st = TensorStats.from_array(x)
    x64 = x.astype(np.float64)
    assert st.count == 10_000 and st.zeros == 10
    assert st.mean == pytest.approx(x64.mean(), rel=1e-12)
    assert st.std == pytest.approx(x64.std(), rel=1e-9)
    assert st.abs_mean == pytest.approx(np.abs(x64).mean(), rel=1e-12)
    assert (st.min, st.max) == (float(x64.min()), float(x64.max()))
    assert st.zero_fraction == pytest.approx(0.001)


def test_nonfinite_values_are_counted_and_excluded():
    st = TensorStats.from_array(np.array([np.nan, np.inf, -np.inf, 1.0, 3.0]))
    assert (st.nan, st.inf, st.finite) == (1, 2, 2)
    assert st.mean == 2.0 and st.min == 1.0 and st.max == 3.0
    empty = TensorStats.from_array(np.array([np.nan]))
    assert math.isnan(empty.mean) and empty.to_dict()["mean"] is None and empty.to_dict()["min"] is None


def test_merge_is_exact_and_order_independent():
    rng = np.random.default_rng(1)
    shards = [rng.normal(size=n) for n in (5, 100, 1, 37)]
    x64 = np.concatenate(shards)
    whole = TensorStats.from_array(x64)
    parts = [TensorStats.from_array(s) for s in shards]
    for perm in itertools.permutations(parts):
        merged = TensorStats()
        for p in perm:
            merged = merged.merge(p)
        assert merged.count == whole.count and merged.min == whole.min and merged.max == whole.max
        # numpy float64 is the oracle (whole is our own from_array); abs=0: approx's default abs of 1e-12
        # would hide a relative error of 1e-11 in the mean (about -0.08)
        assert merged.mean == pytest.approx(x64.mean(), rel=1e-12, abs=0)
        assert merged.std == pytest.approx(x64.std(), rel=1e-12, abs=0)


def test_row_round_trip():
    st = TensorStats.from_array(np.array([0.0, -2.0, np.nan, np.inf, 5.0]))
    from onnxprobe.stats.tensor_stats import ROW

    col = {"count": st.count, "nan": st.nan, "nonfinite": st.nan + st.inf, "nonzero": st.count - st.zeros,
           "min": st.min, "max": st.max, "shift": st.shift, "sum_d": st.s1, "sumsq_d": st.s2, "sumabs": st.sumabs,
           "unit": st.unit}
    row = np.array([[col[c] for c in ROW]])
    assert TensorStats.from_row(row) == st
    assert TensorStats.from_rows(np.concatenate([row, row])) == st.merge(st)


def test_large_offset_keeps_std_accurate():
    # float64 accumulation: a mean of 1e4 with a std of 1 still gives 6+ correct digits
    x = 1e4 + np.random.default_rng(2).normal(size=100_000)
    assert TensorStats.from_array(x).std == pytest.approx(x.std(), rel=1e-6)


def _block_parts(x: np.ndarray, block: int) -> np.ndarray:
    """What graph.stats_nodes.block_parts computes, in numpy: float32 rows of ``block`` elements."""
    rows = x.astype(np.float32).reshape(-1, block)
    m = rows.mean(axis=1, dtype=np.float32)
    d = rows - m[:, None]
    return np.stack([rows.min(axis=1), rows.max(axis=1), m, d.sum(axis=1, dtype=np.float32),
                     (d * d).sum(axis=1, dtype=np.float32), np.abs(rows).sum(axis=1, dtype=np.float32),
                     (rows == 0).sum(axis=1).astype(np.float32)])


@pytest.mark.parametrize("name", ["large_offset", "skewed_sparse", "signed", "zeros"])
def test_from_blocks_merges_block_moments_exactly(name):
    """Blocks summarised about their own means, merged in float64 (Chan et al.), against numpy float64;
    a midpoint shift with float32 sums left a skewed tensor's std 1.7% off."""
    rng = np.random.default_rng(3)
    x = {"large_offset": (1000 + 0.001 * rng.random(8192)),
         "skewed_sparse": np.where(rng.random(8192) < 1e-3, 1.0, 1e-7 * (1 + rng.random(8192))),
         "signed": rng.normal(-5.0, 1e3, 8192),
         "zeros": np.where(rng.random(8192) < 0.5, 0.0, rng.normal(size=8192))}[name].astype(np.float32)
    st = TensorStats.from_blocks(_block_parts(x, 1024), 1024)
    x64 = x.astype(np.float64)
    assert (st.count, st.zeros, st.min, st.max) == (x.size, int((x == 0).sum()), float(x64.min()), float(x64.max()))
    assert st.mean == pytest.approx(x64.mean(), rel=1e-6, abs=1e-7 * x64.std())
    assert st.std == pytest.approx(x64.std(), rel=1e-5)
    assert st.abs_mean == pytest.approx(np.abs(x64).mean(), rel=1e-6)


def test_from_blocks_of_a_nonfinite_tensor_asks_for_a_rerun():
    from onnxprobe.stats.tensor_stats import needs_rerun

    for bad in (np.nan, np.inf, -np.inf):
        x = np.ones(2048, np.float32)
        x[5] = bad
        with np.errstate(all="ignore"):
            assert needs_rerun(TensorStats.from_blocks(_block_parts(x, 1024), 1024)), bad
    # squares past float32's range (values near 1e20) overflow the block sums: also rerun, with scaling
    with np.errstate(all="ignore"):
        huge = TensorStats.from_blocks(_block_parts(np.random.default_rng(4).normal(0, 1e20, 2048), 1024), 1024)
    assert needs_rerun(huge)
    assert not needs_rerun(TensorStats.from_blocks(_block_parts(np.ones(2048, np.float32), 1024), 1024))


def test_percentiles_of_offset_data_sharing_one_bucket_are_ordered_and_near():
    """1e4 + N(0, 1): every value falls in one log bucket 216 wide. The percentiles are read at their rank
    within it, narrowed to the data's range: p0.01 below p1 and p99.99 above p99 of numpy's, within a few
    standard deviations (the bucket's middle put both at the max, 13 standard deviations off)."""
    from onnxprobe.stats.histogram import Histogram

    x = 1e4 + np.random.default_rng(5).standard_normal(200_000)
    h = Histogram.from_array(x)
    assert len(h.counts) <= 2
    p_lo, p_hi = h.percentile(0.01, x.min(), x.max()), h.percentile(99.99, x.min(), x.max())
    assert x.min() <= p_lo < np.percentile(x, 1) < np.percentile(x, 99) < p_hi <= x.max()
    assert abs(p_lo - np.percentile(x, 0.01)) < 3 and abs(p_hi - np.percentile(x, 99.99)) < 3
    # spread data keeps the bound of a bucket's width
    y = np.random.default_rng(6).lognormal(0, 2, 100_000)
    for q in (0.01, 1, 50, 99, 99.99):
        exact = np.percentile(y, q, method="inverted_cdf")
        assert abs(Histogram.from_array(y).percentile(q, y.min(), y.max()) - exact) <= exact / 32


def test_zero_fraction_is_over_the_finite_values_as_the_other_statistics():
    """[1, nan, inf, -inf, 2, 0]: one zero among three finite values (it was 1/6, over every element,
    where mean and std are over the finite three); an all-NaN tensor has none to count. Oracle: numpy."""
    import math

    import numpy as np

    from onnxprobe.stats.tensor_stats import TensorStats

    x = np.array([1, np.nan, np.inf, -np.inf, 2, 0], np.float32)
    st = TensorStats.from_array(x)
    finite = x[np.isfinite(x)]
    assert st.zero_fraction == pytest.approx(float((finite == 0).mean())) and st.count == x.size
    assert math.isnan(TensorStats.from_array(np.full(4, np.nan, np.float32)).zero_fraction)


@pytest.mark.parametrize("numpy_own", [True, False], ids=["vecdot", "einsum"])
def test_dot_equals_exact_sums_on_both_numpy_paths(monkeypatch, numpy_own):
    """stats.tensor_stats.dot (the squares of every host statistic and host pair metric, kept off BLAS's
    thread pool) against math.fsum of the exact products; numpy < 2 has no vecdot and takes einsum."""
    import math

    from onnxprobe.stats import tensor_stats

    if not numpy_own:
        monkeypatch.delattr(np, "vecdot", raising=False)
    rng = np.random.default_rng(5)
    for x in (rng.normal(1e4, 1.0, 70_001), rng.normal(0, 1e-150, 30_000), np.array([3.0]), np.linspace(-1, 1, 12_345)):
        y = rng.normal(size=x.size)
        for u, v in ((x, x), (x, y)):
            want = math.fsum(float(p) for p in (u.astype(np.float64) * v.astype(np.float64)))
            assert tensor_stats.dot(u, v) == pytest.approx(want, rel=1e-12, abs=1e-300)
