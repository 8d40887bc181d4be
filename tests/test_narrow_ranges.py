"""Tensors whose values are fewer float64 steps apart than a chart has bins, or than float64 can tell apart
(1 and 1 + 2^-52, 1e10 + 1e-5 noise, int64 near 2^62, uint64 near 2^64): charts, labels, digits and
statistics that keep them apart, checked against numpy float64 and Python ints."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from conftest import make_model
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app
from onnxprobe.stats.histogram import binned

runner = CliRunner()


def identity(tmp_path, elem: int, n: int):
    m = make_model([helper.make_node("Identity", ["x"], ["y"], name="id")], [helper.make_tensor_value_info("x", elem, [n])],
                   [helper.make_tensor_value_info("y", elem, [n])])
    path = tmp_path / f"id{elem}.onnx"
    onnx.save(m, path)
    return path


NARROW = {
    "one ulp": np.array([1.0, np.nextafter(1.0, 2.0)]),
    "1e10 + noise": 1e10 + np.random.default_rng(0).normal(0, 1e-5, 200),
    "int64 near 2^62": (2 ** 62 + np.arange(-8, 8)).astype(np.int64),
    "top of float64": np.array([np.finfo(np.float64).max, np.nextafter(np.finfo(np.float64).max, 0)]),
}


@pytest.mark.parametrize("name", sorted(NARROW))
def test_binned_takes_any_range(name):
    """np.histogram(bins=40, range=(lo, hi)) refused a range of fewer than 40 float64 steps ('Too many bins
    for data range'), which --html reported as an internal error: such values get a bin each."""
    x = NARROW[name]
    b = binned(x)
    x64 = x.astype(np.float64)
    assert sum(b["counts"]) == b["count"] == x.size
    edges = np.array(b["edges"])
    assert np.all(edges[:-1] < edges[1:]) and edges[0] <= x64.min() and edges[-1] >= x64.max()
    if name == "one ulp":  # the two values in bins of their own
        assert b["counts"] == [1, 1]


def test_layers_html_of_a_one_ulp_float64_range(tmp_path):
    path = identity(tmp_path, TensorProto.DOUBLE, 2)
    r = runner.invoke(app, ["layers", str(path), "--input", "x=[1.0, 1.0000000000000002]", "--html", str(tmp_path / "r.html")])
    assert r.exit_code == 0 and "internal error" not in r.output, r.output
    assert (tmp_path / "r.html").stat().st_size > 0
