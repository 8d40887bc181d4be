"""``TensorStats.from_many_blocks``: the per-block summaries of many tensors (graph.stats_nodes.block_parts)
merged in one pass of numpy calls, as ``read_probes`` reads a run back. Each tensor's statistics are those of
``from_blocks`` over it alone, bit for bit (tensors of several block counts and sizes, constants, NaN and
Inf mixed in one call), and agree with numpy float64 over the tensor's values (the oracle)."""

from __future__ import annotations

import math

import numpy as np

from onnxprobe.stats.tensor_stats import TensorStats

FIELDS = ("count", "nan", "inf", "zeros", "min", "max", "shift", "s1", "s2", "sumabs", "unit", "distinct")


def _parts(x: np.ndarray, block: int) -> np.ndarray:
    """What the graph computes for ``x`` (float32, a multiple of ``block`` elements), in float32: per block its
    extremes, mean m_b, Σ(x - m_b), Σ(x - m_b)², Σ|x| and zeros, as rows of BLOCK_PARTS."""
    b = x.reshape(-1, block)
    with np.errstate(all="ignore"):  # a block holding Inf: a NaN deviation, as in the graph
        m = b.mean(axis=1, dtype=np.float32)
        d = b - m[:, None]
        return np.stack([b.min(axis=1), b.max(axis=1), m, d.sum(axis=1), (d * d).sum(axis=1), np.abs(b).sum(axis=1),
                         (b == 0).sum(axis=1).astype(np.float32)]).astype(np.float32).reshape(-1, 1)


def _tensors() -> list[tuple[np.ndarray, int]]:
    rng = np.random.default_rng(5)
    out = []
    for k, block in ((3, 16), (3, 16), (40, 64), (40, 64), (9000, 4), (1, 1024)):
        x = (rng.standard_normal(k * block) * 3 + 1).astype(np.float32)
        out.append((x, block))
    out.append((np.full(3 * 16, 2.5, np.float32), 16))  # a constant, among tensors of its own block count
    offset = (1e4 + rng.standard_normal(40 * 64)).astype(np.float32)  # one sign: Σ|x| from the means
    out.append((offset, 64))
    sparse = np.zeros(40 * 64, np.float32)
    sparse[::97] = 5.0
    out.append((sparse, 64))
    for bad in (np.nan, np.inf):
        x = rng.standard_normal(3 * 16).astype(np.float32)
        x[7] = bad
        out.append((x, 16))
    return out


def test_many_tensors_at_once_give_each_one_alone_bit_for_bit():
    tensors = _tensors()
    items = [(_parts(x, block), block) for x, block in tensors]
    many = TensorStats.from_many_blocks(items)
    assert len(many) == len(items)
    for (parts, block), got in zip(items, many):
        alone = TensorStats.from_blocks(parts, block)
        assert [repr(getattr(got, f)) for f in FIELDS] == [repr(getattr(alone, f)) for f in FIELDS]
        alone_again = TensorStats.from_many_blocks([(parts, block)])[0]
        assert [repr(getattr(got, f)) for f in FIELDS] == [repr(getattr(alone_again, f)) for f in FIELDS]


def test_many_tensors_at_once_agree_with_numpy_float64():
    tensors = _tensors()
    many = TensorStats.from_many_blocks([(_parts(x, block), block) for x, block in tensors])
    for (x, _), st in zip(tensors, many):
        f = x.astype(np.float64)
        assert st.count == x.size
        if not np.isfinite(f).all():  # a non-finite sum, which needs_rerun sends to the careful row
            assert not (math.isfinite(st.s1) and math.isfinite(st.s2))
            continue
        assert (st.min, st.max, st.zeros) == (f.min(), f.max(), int((f == 0).sum()))
        assert math.isclose(st.mean, f.mean(), rel_tol=1e-6, abs_tol=1e-6)
        assert math.isclose(st.std, f.std(), rel_tol=1e-5, abs_tol=1e-6)
        assert math.isclose(st.abs_mean, np.abs(f).mean(), rel_tol=1e-6)
    assert many[6].std == 0.0 and many[6].mean == 2.5  # the constant: sums of exactly 0 about its value
