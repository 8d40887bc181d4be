"""inspect shows the first line of a model's doc string under its header: a 10 MB doc string of one line
(QA fuzzing: a hostile model) was wrapped to the terminal's width in full, one Rich slice per row, and inspect
ran for minutes (killed at 30 s, then 120 s). The line is clipped, both ends kept and its length said (text.clip);
--json keeps the doc string whole."""

from __future__ import annotations

import json

import onnx
from onnx import helper as h
from typer.testing import CliRunner

from onnxprobe.cli.main import app


def test_a_huge_doc_string_is_clipped_in_the_report(tmp_path):
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g", [h.make_tensor_value_info("x", 1, [2])],
                     [h.make_tensor_value_info("y", 1, [2])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    m.doc_string = "D" * 200_000 + "\nsecond line"
    onnx.save(m, str(tmp_path / "m.onnx"))
    r = CliRunner().invoke(app, ["inspect", str(tmp_path / "m.onnx")], env={"COLUMNS": "100"})
    assert r.exit_code == 0, r.output
    assert "(200000 chars)" in r.stdout and len(r.stdout) < 20_000, len(r.stdout)
    r = CliRunner().invoke(app, ["inspect", str(tmp_path / "m.onnx"), "--json", "-"])
    assert r.exit_code == 0 and json.loads(r.stdout)["doc"] == m.doc_string.strip(), r.output[-300:]
