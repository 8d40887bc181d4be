"""A model of an opset newer than the installed onnxruntime loads: `inspect` listed no problem (exit 0), and `mark`
and `extract` wrote a copy onnxruntime does not load, with exit 0 and no note, where `layers` refused the model in
one line. Where onnx knows no conversion down, inspect lists it as a problem (exit 1) and mark and extract refuse
it, writing nothing; where it does (layers converts), each says so in a note."""

from __future__ import annotations

import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.runtime import compat


def _model(path, opset: int) -> str:
    f = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2])  # noqa: E731
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="re"), helper.make_node("Neg", ["r"], ["y"], name="ne")],
                          "g", [f("x")], [f("y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    onnx.save(m, path)
    return str(path)


def test_the_runtime_s_newest_opset_is_what_it_loads():
    top = compat.max_opset()
    assert top is not None
    tiny = lambda k: helper.make_model(helper.make_graph(  # noqa: E731
        [helper.make_node("Identity", ["x"], ["y"])], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])]), opset_imports=[helper.make_opsetid("", k)], ir_version=10)
    ort.InferenceSession(tiny(top).SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception):
        ort.InferenceSession(tiny(top + 1).SerializeToString(), providers=["CPUExecutionProvider"])


def test_an_opset_no_one_here_knows_is_a_problem_and_nothing_is_written(tmp_path):
    newest = max(onnx.defs.onnx_opset_version(), compat.max_opset())
    m = _model(tmp_path / "m.onnx", newest + 2)
    r = CliRunner().invoke(app, ["inspect", m])
    assert r.exit_code == 1 and f"opset {newest + 2} is newer than this onnxruntime" in r.output, r.output
    for args in (["mark", m, "-o", str(tmp_path / "mk.onnx"), "--all"], ["extract", m, "-o", str(tmp_path / "ex.onnx"), "--to", "r"]):
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 1 and "nothing written" in r.output and "Traceback" not in r.output, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_an_opset_layers_converts_down_gets_a_note(tmp_path, monkeypatch):
    """onnxruntime older than onnx: the model's opset is one onnx converts down from."""
    monkeypatch.setattr(compat, "max_opset", lambda: 17)
    m = _model(tmp_path / "m.onnx", 18)
    got = api.inspect(m)
    assert not got.problems and any("newer than this onnxruntime loads (up to 17)" in w for w in got.warnings), got.warnings
    res = api.mark(m, tmp_path / "mk.onnx", api.Selection(all=True))
    assert any("keeps opset 18" in n for n in res.notes), res.notes
