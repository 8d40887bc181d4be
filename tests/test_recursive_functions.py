"""A model-local function that calls itself (or through another) passed `inspect` (exit 0) and `mark` wrote a copy,
exit 0, that no runtime loads (onnxruntime: "Model local function definitions must not be recursive"): it is a
problem of the graph, listed by inspect and refused by mark, as every graph onnxruntime will not load."""

from __future__ import annotations

import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app


def _model(path, mutual: bool):
    fa = helper.make_function("loc", "A", ["x"], ["y"], [helper.make_node("B" if mutual else "A", ["x"], ["y"], domain="loc")],
                              [helper.make_opsetid("", 17), helper.make_opsetid("loc", 1)])
    fb = helper.make_function("loc", "B", ["x"], ["y"], [helper.make_node("A", ["x"], ["y"], domain="loc")],
                              [helper.make_opsetid("", 17), helper.make_opsetid("loc", 1)])
    g = helper.make_graph([helper.make_node("A", ["x"], ["y"], domain="loc")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("loc", 1)],
                          functions=[fa, fb] if mutual else [fa])
    m.ir_version = 8
    onnx.save(m, path)
    return str(path)


@pytest.mark.parametrize("mutual", [False, True])
def test_a_recursive_function_is_a_problem_of_the_graph(tmp_path, mutual):
    path = _model(tmp_path / "m.onnx", mutual)
    with pytest.raises(Exception):  # the oracle: onnxruntime refuses it
        ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    runner = CliRunner()
    r = runner.invoke(app, ["inspect", path])
    assert r.exit_code == 1 and "calls itself" in r.stdout, r.output
    r = runner.invoke(app, ["mark", path, "--all", "-o", str(tmp_path / "out.onnx")])
    assert r.exit_code == 1 and "calls itself" in r.stderr and not (tmp_path / "out.onnx").exists(), r.output
