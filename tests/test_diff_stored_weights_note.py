"""``diff --include-constants`` compares the tensors computed from weights alone (a Constant's value, a Mul of
two weights) and a weight given as a graph output, but not a stored weight (an initializer) itself: that one
enters only through what nodes compute from it. It left the stored weights out without a word, so a user who
asked for "everything, constants included" read "0 failing" about weights never compared. One note says so
(text, JSON ``notes``, HTML), only with --include-constants and only where the selection holds such a weight.
Oracle: the model's own initializers (onnx), and the rows of the report: no row for the weight."""

from __future__ import annotations

import json

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()


def _model(path, scale: float, weight_out: bool = False) -> str:
    w = (np.eye(3) * scale).astype(np.float32)
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])]
    outs += [helper.make_tensor_value_info("W", TensorProto.FLOAT, [3, 3])] if weight_out else []
    m = make_model([helper.make_node("Constant", [], ["c"], name="cst", value=numpy_helper.from_array(np.float32([2.0]))),
                    helper.make_node("Mul", ["x", "c"], ["xc"], name="mul"),
                    helper.make_node("MatMul", ["xc", "W"], ["y"], name="mm")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])], outs, [numpy_helper.from_array(w, "W")])
    import onnx

    onnx.save(m, str(path))
    return str(path)


def _notes(*args) -> str:
    r = runner.invoke(app, ["diff", *args])
    assert r.exit_code in (0, 1), r.output
    return r.output


def test_diff_include_constants_says_the_stored_weights_are_not_compared(tmp_path):
    a, b = _model(tmp_path / "a.onnx", 1.0), _model(tmp_path / "b.onnx", 2.0)
    out = tmp_path / "r.json"
    html = tmp_path / "r.html"
    text = _notes("--all", "--include-constants", a, b, "--json", str(out), "--html", str(html))
    rep = json.loads(out.read_text())
    assert {p["a"] for p in rep["pairs"]} >= {"c", "y"} and "W" not in {p["a"] for p in rep["pairs"]}  # c compared, W not
    said = [n for n in rep["notes"] if "'W'" in n and "--include-constants" in n]
    assert len(said) == 1, rep["notes"]
    assert "not compared" in said[0] and "graph output" in said[0]
    assert said[0][:40] in " ".join(text.split())
    import html as h

    assert said[0][:40] in " ".join(h.unescape(html.read_text()).split())


def test_no_note_without_include_constants_or_where_the_weight_is_an_output(tmp_path):
    a, b = _model(tmp_path / "a.onnx", 1.0), _model(tmp_path / "b.onnx", 2.0)
    out = tmp_path / "r.json"
    _notes("--all", a, b, "--json", str(out))
    assert not [n for n in json.loads(out.read_text())["notes"] if "'W'" in n]
    a, b = _model(tmp_path / "ao.onnx", 1.0, True), _model(tmp_path / "bo.onnx", 2.0, True)
    _notes("--all", "--include-constants", a, b, "--json", str(out))
    rep = json.loads(out.read_text())
    assert "W" in {p["a"] for p in rep["pairs"]}  # a weight given as an output is compared
    assert not [n for n in rep["notes"] if "'W'" in n and "--include-constants" in n]
