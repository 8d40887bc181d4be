"""The footer's "error starts at" names the failing pair as its table row does. It printed B's tensor with
A's op: a --map pair (A's 'h', a Relu, with B's 'c', a Conv) read "error starts at c (Relu)", a tensor
that is no Relu in either model, while the row and JSON's first_failure named A's 'h'."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from conftest import matmul_relu
from onnxprobe.cli.main import app


def _model(path):
    return matmul_relu(path, np.linspace(-1, 1, 4 * 4).reshape(4, 4), tail=True)


def test_footer_names_the_failing_pair_as_its_row(tmp_path):
    m = _model(tmp_path / "m.onnx")
    (tmp_path / "map.json").write_text(json.dumps({"h": "c"}))
    r = CliRunner().invoke(app, ["diff", m, m, "--map", str(tmp_path / "map.json"), "--all",
                                 "--json", str(tmp_path / "d.json")], env={"COLUMNS": "200"})
    d = json.loads((tmp_path / "d.json").read_text())
    assert d["first_failure"] == "h", d["first_failure"]
    r = CliRunner().invoke(app, ["diff", m, m, "--map", str(tmp_path / "map.json"), "--all"], env={"COLUMNS": "200"})
    foot = next(line for line in r.stdout.splitlines() if "error starts at" in line)
    assert "error starts at h ↔ c (Relu)" in foot, foot


def _hostile(path, k: float):
    return matmul_relu(path, np.full((4, 4), k), mid="c\nFAKE LINE")  # a name with a newline: printed raw, it forges a line


def test_footer_escapes_the_name_where_the_error_starts(tmp_path):
    a, b = _hostile(tmp_path / "a.onnx", 1.0), _hostile(tmp_path / "b.onnx", 1.5)
    r = CliRunner().invoke(app, ["diff", a, b, "--all"], env={"COLUMNS": "200"})
    assert r.exit_code == 1, r.stdout
    assert not any(line.startswith("FAKE LINE") for line in r.stdout.splitlines()), r.stdout
    assert "error starts at c\\nFAKE LINE (MatMul)" in r.stdout, r.stdout
