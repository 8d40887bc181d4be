"""A large float32 tensor summarised on the host (OpenVINO's and onnx.reference's runs, datasets) a chunk at a time:
its float64 copy and |x| took three times the tensor in scratch (a 512 MB activation: 1.5 GB more at the peak, QA).
The statistics are those numpy computes in float64 over the whole tensor, on hostile distributions (a large offset,
values near float32's limits, a single outlier), and the scratch stays near a chunk's."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from onnxprobe.stats.tensor_stats import HOST_CHUNK, TensorStats

N = HOST_CHUNK * 3 + 12345  # several chunks and a ragged last one


def _cases():
    rng = np.random.default_rng(0)
    yield "offset", (1e4 + rng.standard_normal(N) * 1e-2).astype(np.float32)
    big = rng.uniform(-3e38, 3e38, N).astype(np.float32)
    yield "near the limits", big
    spike = np.zeros(N, np.float32)
    spike[N - 7] = 1e30
    yield "one outlier in the last chunk", spike


@pytest.mark.parametrize("name,x", list(_cases()), ids=lambda v: v if isinstance(v, str) else "")
def test_chunked_statistics_are_numpys_float64(name, x):
    st = TensorStats.from_array(x)
    x64 = x.astype(np.float64)
    mean = x64.mean()
    assert st.count == x.size and st.min == float(x.min()) and st.max == float(x.max())
    # (float32 data resolves 6e-8 of itself; a lone 1e30 among zeros cancels about the midpoint shift, chunked or
    # not: its std reads 1.2e-7 off numpy's here, 1.8e-7 summarised whole)
    assert st.mean == pytest.approx(mean, rel=1e-8, abs=1e-300)
    assert st.std == pytest.approx(np.sqrt(np.mean((x64 - mean) ** 2)), rel=5e-7)
    assert st.zeros == int((x == 0).sum())


def test_the_scratch_stays_near_a_chunk():
    x = np.random.default_rng(1).standard_normal(N).astype(np.float32)
    tracemalloc.start()
    try:
        TensorStats.from_array(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # a chunk's float64 copy and its |x| (~16 bytes an element of a chunk), where the whole tensor's took 12 bytes an
    # element of the tensor (151 MB here)
    assert peak < 20 * HOST_CHUNK < 12 * N, (peak, x.nbytes)
