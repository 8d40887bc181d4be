"""A cosine below 1 reads below 1: a pair at 0.99999982 failing --min-cosine 0.9999999 showed
'1.000000 ... FAIL', a row that contradicts its own criterion line. The cell takes up to nine places that
tell it from 1, and, judged by its cosine, says how far below 1 it is past that (1-4.4e-15). Oracle: numpy's float64 cosine of the two models' outputs, on the inputs the diff ran on."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app


def _pair(tmp_path, scale):
    noise = np.random.default_rng(1).standard_normal(64) * scale
    paths = []
    for tag, n in (("a", noise), ("b", np.zeros(64))):
        m = make_model([helper.make_node("Add", ["x", "n"], ["y"], name="add")],
                       [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [64])],
                       [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [64])], [numpy_helper.from_array(n, "n")])
        onnx.save(m, tmp_path / f"{tag}.onnx")
        paths.append(str(tmp_path / f"{tag}.onnx"))
    x = np.random.default_rng(7).random(64)
    np.save(tmp_path / "x.npy", x)
    a, b = x + noise, x
    return paths, float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def _read(cell: str) -> tuple[float, float]:
    """A cosine cell's value and how far it may be from the cosine it shows: '0.9999998' or '1-4.4e-15'."""
    if cell.startswith("1-"):
        return 1 - float(cell[2:]), 0.06 * float(cell[2:])
    return float(cell), 0.6 * 10.0 ** -len(cell.split(".")[1])


def test_a_cosine_a_hair_below_one_says_how_far():
    from onnxprobe.report.diff import cosine_cell

    assert cosine_cell(1 - 4.4e-15, judged=True) == "1-4.4e-15" and cosine_cell(0.99999982) == "0.9999998"
    assert cosine_cell(1 - 4.4e-15) == "1.000000"  # not judged by its cosine: as close to 1 as six places tell
    assert cosine_cell(1.0) == "1.000000" and cosine_cell(0.999987) == "0.999987" and cosine_cell(0.5) == "0.5000"


@pytest.mark.parametrize("scale", [4e-4, 1e-5, 1e-7])
def test_a_cosine_below_one_reads_below_one(tmp_path, scale):
    (a, b), cosine = _pair(tmp_path, scale)
    assert cosine < 1
    r = CliRunner().invoke(app, ["diff", a, b, "--input", f"x={tmp_path / 'x.npy'}", "--min-cosine", "0.9999999",
                                 "--columns", "tensor,cosine,pass"], env={"COLUMNS": "100", "NO_COLOR": "1"})
    cell, verdict = r.stdout.split("\n")[[i for i, line in enumerate(r.stdout.split("\n")) if line.startswith("y ")][0]].split()[1:3]
    value, within = _read(cell)
    assert value < 1 and abs(value - cosine) <= within, (cell, cosine)
    assert verdict == ("ok" if cosine >= 0.9999999 else "FAIL"), (cell, verdict, cosine)
    assert r.exit_code == (0 if verdict == "ok" else 1)


def test_the_debuggers_match_says_the_same_cosine(tmp_path):
    (a, b), cosine = _pair(tmp_path, 4e-4)
    script = tmp_path / "s.txt"
    script.write_text(f"input x {tmp_path / 'x.npy'}\nmatch y\n")
    r = CliRunner().invoke(app, ["debug", a, b, "--script", str(script)], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    value, within = _read(r.stdout.split("cosine ")[1].split()[0])
    assert value < 1 and abs(value - cosine) <= within, (r.stdout, cosine)
