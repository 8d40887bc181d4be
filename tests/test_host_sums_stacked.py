"""Small float32 pairs summed a stack at a time (``stats.host_sums.pair_sums_many``, what a merged graph's raw
pairs take): the same sums, bit for bit, as ``pair_sums`` one pair at a time, on hostile rows (NaN / Inf on one
side, a difference past float32's range, a large offset, values near float32's limits, one element) mixed
into stacks that span several chunks; and every sum against numpy float64 on the same float32 values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from onnxprobe.stats import host_sums
from onnxprobe.stats.host_sums import pair_sums, pair_sums_many
from onnxprobe.stats.metrics import rel_limits


def _pairs(rng) -> list[tuple[np.ndarray, np.ndarray]]:
    out = []
    for i in range(90):
        shape = [(16, 96), (1,), (), (3, 5), (host_sums.SMALL,), (host_sums.SMALL + 1,)][i % 6]
        a = rng.standard_normal(shape).astype(np.float32)
        scale = [1.0, 1e30, 1e-30, 1e6, 3e38][i % 5]
        with np.errstate(over="ignore"):
            a = (a * np.float32(scale)).astype(np.float32)
            b = (a + rng.standard_normal(shape).astype(np.float32) * np.float32(max(scale, 1.0) * 1e-3)).astype(np.float32)
        if i % 5 == 3:  # a large offset: values of 1e6 that differ in their last bits
            a, b = (a + np.float32(1e6)).astype(np.float32), (a + np.float32(1e6) + np.float32(0.0625)).astype(np.float32)
        if i % 7 == 0:
            a.reshape(-1)[0] = np.nan
        if i % 11 == 0:
            b.reshape(-1)[-1] = np.inf
        if i % 13 == 0 and a.size:  # opposite signs near float32's limit: |a - b| past its range
            a, b = np.full(shape, 3e38, np.float32), np.full(shape, -3e38, np.float32)
        out.append((a, b))
    out.append((np.float16([1, 2]), np.float16([1, 2.5])))  # not float32: one by one
    out.append((np.int32([1, 2]), np.int32([1, 3])))
    return out


@pytest.mark.parametrize("light", [False, True], ids=["sums", "introduced"])
def test_a_stack_sums_each_pair_as_one_by_one(light, monkeypatch):
    monkeypatch.setattr(host_sums, "STACK", 4000)  # several chunks of the [16, 96] rows, and stacks of one
    pairs = _pairs(np.random.default_rng(7))
    rtols = [(0.0, 1e-3, 0.5)[i % 3] for i in range(len(pairs))]
    many = pair_sums_many(pairs, rtols, sample=4, light=light)
    assert len(many) == len(pairs)
    for (a, b), r, got in zip(pairs, rtols, many):
        one = pair_sums(a, b, r, 4, light)
        assert got.to_dict() == one.to_dict()
        assert got.light == light and got.per_sample.keys() == {4}
        # and what numpy float64 says of the pair: a row the stack cannot take (NaN / Inf on one side, a
        # difference past float32's range) still counts its finite pairs and mismatches, its maximum in float64
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        both = np.isfinite(a64) & np.isfinite(b64)
        alike = ~both & ((np.isnan(a64) & np.isnan(b64)) | (a64 == b64))  # the same NaN / Inf on both sides
        assert (got.count, got.mismatch) == (int(both.sum()), int((~both & ~alike).sum()))
        with np.errstate(invalid="ignore"):  # Inf - Inf where ``both`` leaves it out
            d = np.abs(a64 - b64)[both]
        assert got.max_abs == pytest.approx(d.max() if d.size else 0.0, rel=1e-6)


@pytest.mark.parametrize("rtol", [0.0, 1e-3])
def test_stacked_sums_equal_numpy_float64(rtol, monkeypatch):
    monkeypatch.setattr(host_sums, "STACK", 5000)
    rng = np.random.default_rng(3)
    pairs = []
    for i in range(23):
        a = (rng.standard_normal((16, 96)) * [1, 1e-20, 1e20, 1][i % 4] + [0, 0, 0, 1e4][i % 4]).astype(np.float32)
        b = (a * (1 + 1e-3 * rng.standard_normal(a.shape))).astype(np.float32)
        pairs.append((a, b))
    pairs.append((np.float32([2.5]), np.float32([-1.0])))  # one element
    tiny, big = rel_limits(np.float32)
    for (a, b), s in zip(pairs, pair_sums_many(pairs, [rtol] * len(pairs))):
        a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
        d = np.abs(a64 - b64)
        assert s.count == a.size and s.samples == 1
        assert s.max_abs == pytest.approx(d.max(), rel=1e-7)
        assert s.worst == (0, int(np.argmax(np.abs(a - b).ravel())))
        assert s.b_absmax == np.abs(b64).max()
        assert s.max_rel == pytest.approx((d / np.maximum(np.abs(b64), tiny)).max(), rel=1e-7)
        assert s.excess == pytest.approx((d - rtol * np.abs(b64)).max() if rtol else d.max(), rel=1e-6)
        for k, want in (("sum_abs", d.sum()), ("dd", (d * d).sum()), ("aa", (a64 * a64).sum()),
                        ("bb", (b64 * b64).sum()), ("ab", (a64 * b64).sum())):
            assert s.total(k) == pytest.approx(want, rel=1e-6 if k in ("sum_abs", "dd") else 1e-12), k
        m = s.metrics(rtol)
        assert m.sqnr_db == pytest.approx(10 * math.log10((b64 * b64).sum() / (d * d).sum()), rel=1e-5)
