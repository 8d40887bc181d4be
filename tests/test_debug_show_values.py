"""The debugger's `show` prints values with the digits that tell them apart: float32 values of 1e7 + N(0, 1)
are not `1.e+07` each (numpy at 5 digits), as a row's statistics are never `1e+04` three times (README)."""

from __future__ import annotations

import re

import numpy as np
import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app


def _identity(path, dtype, shape=(2, 4)) -> None:
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="n")], "g",
                          [helper.make_tensor_value_info("x", dtype, list(shape))], [helper.make_tensor_value_info("y", dtype, list(shape))])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))


def _shown(tmp_path, x: np.ndarray, dtype) -> np.ndarray:
    _identity(tmp_path / "m.onnx", dtype)
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "s.txt").write_text(f"input x {tmp_path / 'x.npy'}\nrun\nshow y\n")
    r = CliRunner().invoke(app, ["debug", str(tmp_path / "m.onnx"), "--script", str(tmp_path / "s.txt")],
                           env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    block = r.stdout.split("values:")[1].split("histogram")[0]
    return np.array([float(v) for v in re.findall(r"[-+]?\d+\.?\d*(?:e[-+]?\d+)?", block)])


def test_show_tells_offset_values_apart(tmp_path):
    x = np.array([[9999998, 9999999, 1e7, 10000001], [10000002, 9999997, 10000003, 9999996]], np.float32)
    assert np.array_equal(_shown(tmp_path, x, TensorProto.FLOAT), x.reshape(-1).astype(np.float64))
    x = np.array([[1e4, 1e4 + 2 ** -10, 1e4 - 2 ** -9, 1e4 + 3 * 2 ** -10], [1e4, 1e4, 1e4, 1e4]], np.float32)
    assert np.allclose(_shown(tmp_path, x, TensorProto.FLOAT), x.reshape(-1), rtol=0, atol=2 ** -12)
    x = np.array([[1e10, 1e10 + 1e-5, 1e10 - 2e-5, 1e10], [1, 2, 3, 4]], np.float64) * 0 + 1e10 + np.arange(8).reshape(2, 4) * 1e-5
    assert np.allclose(_shown(tmp_path, x, TensorProto.DOUBLE), x.reshape(-1), rtol=0, atol=2e-6)


def test_show_of_float64_values_whose_range_overflows(tmp_path):
    """max - min past float64's range (-1.7e308 and 1.7e308): `show` prints the values and a histogram, where
    the digits' arithmetic divided by an infinite spread and stopped on an internal error."""
    x = np.array([[-1.7e308, 1.7e308, 0, 1], [1e308, -1e308, 2, 3]], np.float64)
    assert np.array_equal(_shown(tmp_path, x, TensorProto.DOUBLE), x.reshape(-1))


def test_histogram_of_float64_values_whose_range_overflows_keeps_its_bins(tmp_path):
    """--bins 4 over values from -1.7e308 to 1.7e308 draws 4 bins with numpy's counts (of the halved values,
    the same bins), not one bar per distinct value (1000 lines) as for values too close to split."""
    x = np.concatenate([np.linspace(-1.7e308, 0, 500), np.linspace(1, 1.7e308, 500)])
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="n")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [1000])],
                          [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [1000])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(tmp_path / "m.onnx"))
    np.save(tmp_path / "x.npy", x)
    r = CliRunner().invoke(app, ["debug", str(tmp_path / "m.onnx"), "--input", f"x={tmp_path / 'x.npy'}", "--script", "-"],
                           input="show y --bins 4\n", env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    bars = [line for line in r.stdout.splitlines() if "│" in line]
    assert [int(b.split()[-1]) for b in bars] == np.histogram(x / 2, 4)[0].tolist(), bars


def test_one_value_prints_as_its_type_holds_it(tmp_path):
    """A single element (`show y [0, 1]`) printed Python's float64 repr of it: float32 0.1 read
    0.10000000149011612 and float16 0.1 read 0.0999755859375, digits the type does not hold; it reads as
    numpy prints that type's value, the shortest text that reads back to it."""
    for dtype, np_type in ((TensorProto.FLOAT, np.float32), (TensorProto.FLOAT16, np.float16), (TensorProto.DOUBLE, np.float64)):
        x = np.array([[0.1, 0.17690443, 1000.5, 3e-5], [1, 2, 3, 4]], np_type)
        _identity(tmp_path / "m.onnx", dtype)
        np.save(tmp_path / "x.npy", x)
        lines = [f"input x {tmp_path / 'x.npy'}", "run"] + [f"show y [0, {i}]" for i in range(4)]
        r = CliRunner().invoke(app, ["debug", str(tmp_path / "m.onnx"), "--script", "-"], input="\n".join(lines) + "\n",
                               env={"COLUMNS": "200", "NO_COLOR": "1"})
        assert r.exit_code == 0, r.output
        shown = [b.split("\n")[1].strip() for b in r.stdout.split("→ [scalar]:")[1:]]
        assert shown == [str(v) for v in x[0]], (np_type, shown)
        assert [np_type(s) for s in shown] == list(x[0])  # each reads back to the value


def test_histogram_keeps_within_the_width(tmp_path):
    """`show`'s histogram drew bars of a fixed share of the width whatever its labels took: float64 labels of
    1e6 + 1e-10 (18 digits a side) at 80 columns wrapped each row, its count on a line of its own. Every row
    is one line within the width (labels, bar, count), down to 40 columns; counts as numpy's."""
    from rich.cells import cell_len

    x = 1e6 + np.array([[6.4e-10, 2.7e-10, 4e-11, 1.6e-11], [8.1e-10, 9.1e-10, 5e-10, 3e-10]])
    _identity(tmp_path / "m.onnx", TensorProto.DOUBLE)
    np.save(tmp_path / "x.npy", x)
    for width in (40, 60, 80, 120):
        r = CliRunner().invoke(app, ["debug", str(tmp_path / "m.onnx"), "--input", f"x={tmp_path / 'x.npy'}", "--script", "-"],
                               input="show y --bins 4\n", env={"COLUMNS": str(width), "NO_COLOR": "1"})
        assert r.exit_code == 0, r.output
        block = r.stdout.split("histogram:\n")[1].split("finite values")[0].splitlines()
        assert all(cell_len(line) <= width for line in block), (width, block)
        bars = [line for line in block if "│" in line]
        assert len(bars) == 4 and sum(int(b.split()[-1]) for b in bars) == x.size, (width, block)
        assert all(re.search(r"│[█▏▎▍▌▋▊▉ ]*\s\d+$", b) for b in bars), (width, block)  # bar and count on the row
        if width >= 60:  # room for the label on the row too (narrower: on a line of its own above)
            assert all(re.match(r"\s*[\d.]+ … [\d.]+ │", b) for b in bars), (width, block)


def _values_block(tmp_path, x: np.ndarray, dtype, command: str = "show y", columns: int = 100) -> str:
    _identity(tmp_path / "m.onnx", dtype, x.shape)
    np.save(tmp_path / "x.npy", x)
    r = CliRunner().invoke(app, ["debug", str(tmp_path / "m.onnx"), "--input", f"x={tmp_path / 'x.npy'}", "--script", "-"],
                           input=command + "\n", env={"COLUMNS": str(columns), "NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    return r.stdout.split(":\n", 1)[1].split("histogram")[0] if "values:" in r.stdout else r.stdout


def test_show_prints_numbers_as_the_tables_do(tmp_path):
    """`show` printed numpy's form: one large value put every value in scientific notation (-2.08842e-01,
    3.50000e+00), small ones read 1.e-07 and 0.e+00, and fixed notation padded values on the right
    ('1000000.    '). Each value now reads as in the statistics and tables (-0.2088, 3.5, 1e+06, 0),
    columns right-aligned, no line ending in a space; every value reads back to itself within its digits."""
    x = np.array([[-0.208842, 1e6, 3.5, 0.001], [1, 2, 3, 4]], np.float32)
    block = _values_block(tmp_path, x, TensorProto.FLOAT).split("values:\n")[-1]
    assert "e-01" not in block and "e+00" not in block and "-0.2088" in block and "3.5" in block, block
    assert not any(line.endswith(" ") for line in block.splitlines()), repr(block)
    x = np.array([[1e-7, 2e-3, 1e-9, 0], [1, 2, 3, -4e-8]], np.float32)
    block = _values_block(tmp_path, x, TensorProto.FLOAT).split("values:\n")[-1]
    assert "1.e" not in block and "0.e" not in block and "1e-07" in block and "-4e-08" in block, block
    x = np.array([[1e6, 0.5, 1e6, 0.25], [7, 8, 9, 1e6]], np.float64)
    block = _values_block(tmp_path, x, TensorProto.DOUBLE).split("values:\n")[-1]
    assert not any(line.endswith(" ") for line in block.splitlines()), repr(block)
    assert "1000000." not in block and "1e+06" in block, block
    rows = [line for line in block.splitlines() if line.strip()]
    assert len({len(r.rstrip("]")) for r in rows}) == 1, rows  # right-aligned columns: rows of one width
    # a float16 value reads as its type's shortest decimal at most (0.1, not 0.09998), its largest in full
    x = np.array([[0.1, 0.2, 65504, -0.1001], [1, 2, 3, 4]], np.float16)
    block = _values_block(tmp_path, x, TensorProto.FLOAT16).split("values:\n")[-1]
    assert re.findall(r"[-\d.e+]+", block)[:4] == ["0.1", "0.2", "65504", "-0.1001"], block


def test_show_tells_every_value_from_its_neighbours(tmp_path):
    """Digits by the range alone (min 0.001, max 1e6) printed 1e+06 for both 1e6 and 1e6 + 0.5: two values that
    differ never read the same, and each reads back within its digits (float64 as the oracle)."""
    x = np.array([[1e6, 1e6 + 0.5, 0.001, 2.0], [1e6, 3.0, 4.0, 5.0]], np.float32)
    got = _shown(tmp_path, x, TensorProto.FLOAT)
    assert np.array_equal(got.astype(np.float32), x.reshape(-1)), got


def test_show_of_a_large_tensor_keeps_numpys_summary(tmp_path):
    """Past 64 values the middle is left out with '...' as numpy does; the shown values' columns align."""
    x = (np.arange(200, dtype=np.float32).reshape(10, 20) - 100) / 7
    block = _values_block(tmp_path, x, TensorProto.FLOAT, columns=80).split("values:\n")[-1]
    assert "..." in block and "-14.29" in block and "14" in block, block
    assert not any(line.endswith(" ") for line in block.splitlines()), repr(block)
    assert all(len(line) <= 80 for line in block.splitlines()), block
