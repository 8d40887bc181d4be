"""A dimension the tables show as '?' is null in JSON: onnx's shape inference names the dims it cannot
tell 'unk__N' (and extract writes such names into the models it cuts), which name nothing; the tables and
CSV read them as '?', and JSON rows and reports said "unk__7" where the table said '?'. A model's own
symbolic names ('batch') stay, as the tables show them."""

from __future__ import annotations

import json

import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()


def _model(tmp_path) -> str:
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Neg", ["r"], ["y"], name="neg")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["unk__3", "batch", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["unk__3", "batch", 4])])
    p = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    return str(p)


def test_inspect_json_says_null_for_a_dim_the_table_shows_as_unknown(tmp_path):
    m = _model(tmp_path)
    r = runner.invoke(app, ["inspect", m, "--json", "-"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["inputs"][0]["shape"] == [None, "batch", 4] and d["outputs"][0]["shape"] == [None, "batch", 4]
    assert "unk__" not in r.stdout
    r = runner.invoke(app, ["inspect", m, "--format", "json"])
    assert r.exit_code == 0 and [x["shape"] for x in json.loads(r.stdout)] == [[None, "batch", 4]] * 2, r.output
    r = runner.invoke(app, ["inspect", m, "--format", "csv"])
    assert r.exit_code == 0 and "?x" in r.stdout.replace(" ", "") and "unk__" not in r.stdout


def test_mark_and_extract_json_rows_say_null_for_an_unknown_dim(tmp_path):
    m = _model(tmp_path)
    r = runner.invoke(app, ["mark", m, "--name", "r", "-o", str(tmp_path / "marked.onnx"), "--format", "json"])
    assert r.exit_code == 0, r.output
    assert [x["shape"] for x in json.loads(r.stdout)] == [[None, "batch", 4]]
    r = runner.invoke(app, ["extract", m, "--to", "r", "-o", str(tmp_path / "cut.onnx"), "--format", "json"])
    assert r.exit_code == 0, r.output
    assert [x["shape"] for x in json.loads(r.stdout)] == [[None, "batch", 4]] * 2
