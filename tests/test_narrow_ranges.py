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


def test_debugger_show_draws_uint64_near_2_to_the_64(tmp_path):
    """show's histogram binned uint64 values near 2^64 as float64 (np.arange over one rounded value: no
    bin, "max() arg is an empty sequence"): integer bins are taken in the integers."""
    path = identity(tmp_path, TensorProto.UINT64, 4)
    f = tmp_path / "s.txt"
    vals = [2 ** 64 - 1 - k for k in range(4)]
    f.write_text(f"input x {vals}\nrun\nshow y\n")
    r = runner.invoke(app, ["debug", str(path), "--script", str(f)])
    assert r.exit_code == 0 and "internal error" not in r.output, r.output
    for v in vals:  # a bin of its own, labelled with its exact value
        assert f"{v} │" in r.output, r.output


def _bins(values):
    from onnxprobe.session.render import histogram

    rows = [ln for ln in histogram(np.asarray(values)).plain.splitlines() if "│" in ln]
    return [(ln.split("│")[0].strip(), int(ln.split()[-1])) for ln in rows]


def test_histogram_labels_tell_bins_apart_and_count_exactly():
    """int64 2^62 + k read the same label on every bin with 14 of 16 bins empty (float64 edges); float64
    1 and 1 + 2^-52 read `1 … 1`. The labels now differ and the counts match the exact integers."""
    k = np.arange(100)
    rows = _bins((2 ** 62 + k).astype(np.int64))
    labels = [lab for lab, _ in rows]
    assert len(set(labels)) == len(labels) and all(c > 0 for _, c in rows)
    for lab, c in rows:  # each bin's count is the number of integers in its exact [low, high]
        low, high = (int(t) for t in lab.split(" … "))
        assert c == sum(low <= 2 ** 62 + int(i) <= high for i in k)
    assert sum(c for _, c in rows) == 100
    rows = _bins([1.0, 1.0000000000000002])
    assert [lab for lab, _ in rows] == ["1", "1.0000000000000002"] and [c for _, c in rows] == [1, 1]
    rows = _bins(np.array([-2 ** 63, 2 ** 63 - 1], np.int64))  # the whole int64 range: exact offsets too
    assert sum(c for _, c in rows) == 2 and rows[0][1] == 1 and rows[-1][1] == 1


def test_float64_offset_rows_show_up_to_17_digits(tmp_path):
    """The table read `1e+10  1e+10  1e+10` for 1e10 and 1e10 + 2e-5: the spread's digits were capped at
    ten; float64 tensors get up to 17, so min, max and mean read back as numpy's values."""
    path = identity(tmp_path, TensorProto.DOUBLE, 2)
    x = np.array([1e10, 1e10 + 2e-5])
    r = runner.invoke(app, ["layers", str(path), "--input", f"x={x.tolist()}", "--columns", "tensor,min,max,mean"],
                      env={"COLUMNS": "160"})
    assert r.exit_code == 0, r.output
    row = next(ln.split() for ln in r.output.splitlines() if ln.split()[:1] == ["y"])
    lo, hi, mean = (float(v) for v in row[1:4])
    assert lo == x.min() and hi == x.max() and lo < mean < hi and abs(mean - x.mean()) <= 1e-6
