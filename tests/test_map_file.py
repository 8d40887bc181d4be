"""A --map file that gives one tensor of A twice ({"h": "c", "h": "h"}: JSON allows the key twice) is
refused naming it, as a tensor of B given twice is: json.loads kept the last entry and dropped the first
in silence, so the diff compared another pair than the user wrote first."""

from __future__ import annotations

import numpy as np
from typer.testing import CliRunner

from conftest import matmul_relu
from onnxprobe.cli.main import app


def _model(path):
    return matmul_relu(path, np.linspace(-1, 1, 16).reshape(4, 4), tail=True)


def test_a_tensor_of_a_given_twice_in_the_map_is_refused(tmp_path):
    m = _model(tmp_path / "m.onnx")
    (tmp_path / "map.json").write_text('{"h": "c", "h": "h"}')
    r = CliRunner().invoke(app, ["diff", m, m, "--map", str(tmp_path / "map.json")], env={"COLUMNS": "200"})
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "'h'" in lines[0] and "twice" in lines[0] and "Traceback" not in r.output, r.output


def test_a_map_without_repeats_still_reads(tmp_path):
    m = _model(tmp_path / "m.onnx")
    (tmp_path / "map.json").write_text('{"h": "h", "c": "c"}')
    r = CliRunner().invoke(app, ["diff", m, m, "--map", str(tmp_path / "map.json")], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
