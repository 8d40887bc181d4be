"""QA: "the model's inputs are: ..." (ModelInput.describe) said a sequence input as "s ? [?]", where ``inspect``
writes its whole type (sequence<float32>, shape 2): the same type summary (graph.summary.type_info) serves both."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h
from typer.testing import CliRunner

from onnxprobe.cli.main import app
from onnxprobe.runtime.feeds import model_inputs

runner = CliRunner()


def _model(tmp_path) -> str:
    seq = h.make_sequence_type_proto(h.make_tensor_type_proto(T.FLOAT, [2]))
    g = h.make_graph([h.make_node("ConcatFromSequence", ["s"], ["c"], axis=0), h.make_node("Add", ["c", "x"], ["y"])], "g",
                     [h.make_value_info("s", seq), h.make_tensor_value_info("x", T.FLOAT, ["n"])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["m"])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, tmp_path / "m.onnx")
    return str(tmp_path / "m.onnx")


def test_a_sequence_input_is_described_with_its_whole_type(tmp_path):
    path = _model(tmp_path)
    got = {i.name: i.describe() for i in model_inputs(onnx.load(path))}
    assert got == {"s": "s sequence<float32> [2]", "x": "x float32 [n]"}, got
    inspected = runner.invoke(app, ["inspect", path]).stdout
    assert "sequence<float32>" in inspected  # what inspect says of the same input
    np.savez(tmp_path / "bad.npz", zz=np.zeros(2, np.float32))
    r = runner.invoke(app, ["layers", path, "--inputs", str(tmp_path / "bad.npz")])
    assert r.exit_code == 2 and "the model's inputs are: s sequence<float32> [2], x float32 [n]" in r.stderr, r.stderr
