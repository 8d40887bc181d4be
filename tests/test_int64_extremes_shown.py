"""int64 and uint64 tensors at their types' limits, as every view shows them. The debugger's `show --bins 1` of a
tensor holding -2^63 and 2^63-1 raised "internal error: OverflowError" (one bin 2^64 wide, past uint64); its
statistics line rounded the exact extremes through float64 (max 2^63, outside int64, beside a min 24 below the
tensor's); and the dataset table's p0.01/p99.99 read 2^63 beside a max of 2^63-1. The oracle:
Python's integers over the values themselves."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

ENV = {"COLUMNS": "200", "ONNXPROBE_NO_CACHE": "1"}


def _model(path, elem, n):
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["t0"], name="id0")], "g",
                          [helper.make_tensor_value_info("x", elem, [n])], [helper.make_tensor_value_info("t0", elem, [n])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def _debug(tmp_path, model, npz, lines):
    script = tmp_path / "s.txt"
    script.write_text("\n".join(lines) + "\n")
    return CliRunner().invoke(app, ["debug", model, "--inputs", str(npz), "--script", str(script)], env=ENV)


def test_one_bin_over_the_whole_64_bit_range_and_the_exact_extremes_in_show(tmp_path):
    for elem, values in ((TensorProto.INT64, np.array([-2**63, 0, 2**63 - 1], np.int64)),
                         (TensorProto.UINT64, np.array([0, 5, 2**64 - 1], np.uint64))):
        m = _model(tmp_path / "m.onnx", elem, values.size)
        np.savez(tmp_path / "x.npz", x=values)
        r = _debug(tmp_path, m, tmp_path / "x.npz", ["show t0 --bins 1", "show t0"])
        assert r.exit_code == 0 and "internal error" not in r.output, r.output
        bins = [ln for ln in r.output.splitlines() if "│" in ln]
        assert bins[0].rstrip().endswith(" 3"), r.output  # one bin, every value in it
        lo, hi = int(values.min()), int(values.max())
        assert f"min {lo} · max {hi}" in r.output, r.output


def test_near_the_limit_the_extremes_are_exact_and_the_mean_is_a_float(tmp_path):
    rng = np.random.default_rng(0)
    values = rng.integers(2**63 - 1000, 2**63 - 1, 300_000, endpoint=True)
    values[0], values[1] = 2**63 - 1000, 2**63 - 1
    m = _model(tmp_path / "m.onnx", TensorProto.INT64, values.size)
    np.savez(tmp_path / "x.npz", x=values)
    r = _debug(tmp_path, m, tmp_path / "x.npz", ["show t0"])
    assert r.exit_code == 0 and f"min {2**63 - 1000} · max {2**63 - 1}" in r.output, r.output
    r = CliRunner().invoke(app, ["layers", m, "--all", "--inputs", str(tmp_path / "x.npz"), "--json", "-"], env=ENV)
    row = json.loads(r.stdout)["tensors"][0]
    assert row["min"] == 2**63 - 1000 and row["max"] == 2**63 - 1
    exact = Fraction(sum(int(v) for v in values), values.size)
    # within [min, max], where no float64 lies (2^63 is past the type): the bound itself, as near as the type allows
    assert row["min"] <= row["mean"] <= row["max"] and abs(Fraction(row["mean"]) - exact) <= 2048  # float64's step there


def test_a_datasets_percentiles_never_read_past_the_extremes_beside_them(tmp_path):
    """Values in [2^63-1000, 2^63-1]: p0.01 and p99.99 are the extremes (exact ints) or floats inside a bucket; the
    table gave them 17 digits in float64 (2^63 beside a max of 2^63-1). They read as exact integers, or in a few
    digits where float64 holds them (not exact), never past max or below min."""
    rng = np.random.default_rng(1)
    m = _model(tmp_path / "m.onnx", TensorProto.INT64, 1000)
    folder = tmp_path / "ds"
    folder.mkdir()
    batches = []
    for b in range(2):
        batches.append(rng.integers(2**63 - 1000, 2**63 - 1, 1000, endpoint=True))
        np.savez(folder / f"b{b}.npz", x=batches[-1])
    r = CliRunner().invoke(app, ["layers", m, "--all", "--inputs-dir", str(folder), "--columns", "tensor,min,max,p0.01,p99.99"],
                           env=ENV)
    assert r.exit_code == 0, r.output
    row = next(ln.split() for ln in r.output.splitlines() if ln.startswith("t0"))
    lo, hi = min(int(b.min()) for b in batches), max(int(b.max()) for b in batches)
    assert row[1:3] == [str(lo), str(hi)]
    for cell in row[3:5]:
        if cell.isdigit():
            assert lo <= int(cell) <= hi, row
        else:  # a float64 percentile: its digits are not exact, so few of them
            mantissa = cell.split("e+")[0].replace(".", "")
            assert "e+" in cell and len(mantissa) <= 5 and lo <= float(cell) <= hi, row
