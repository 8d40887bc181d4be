"""diff of models that take different inputs: the one line names what differs, a few names each (an
onnxruntime-optimized opset-9 copy keeps hundreds of '..._SHAPE' inputs: the line listed every input of
both models, 8,390 characters)."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app


def _model(path, extra: list[str]) -> str:
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ["x", *extra]]
    # each extra input is an output too: read (an input nothing reads is no feed both run on, fed zeros)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g", ins,
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ["y", *extra]])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


def test_the_line_names_only_what_differs(tmp_path):
    a = _model(tmp_path / "a.onnx", ["only_a"])
    b = _model(tmp_path / "b.onnx", [f"conv{k}_b_0__SHAPE" for k in range(300)])
    r = CliRunner().invoke(app, ["diff", a, b, "--device", "cpu"])
    assert r.exit_code == 2, r.output
    (line,) = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert "only A takes 'only_a'" in line and "only B takes 'conv0_b_0__SHAPE'" in line and "and 297 more" in line, line
    assert "'x'" not in line and len(line) < 300, line
