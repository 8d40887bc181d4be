"""`grad` of a model whose first output is int64 said '(pick one: GradSpec output, --loss-output)' on the command line,
where GradSpec means nothing: each reader gets its own words."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError


def test_an_integer_output_is_refused_in_each_readers_words(tmp_path):
    g = helper.make_graph([helper.make_node("ArgMax", ["x"], ["label"], axis=1), helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("label", TensorProto.INT64, [2, 1]),
                           helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "m.onnx")
    r = CliRunner().invoke(app, ["grad", str(tmp_path / "m.onnx")])
    assert r.exit_code == 2 and "(pick one: --loss-output y)" in r.stderr and "GradSpec" not in r.stderr, r.stderr
    with pytest.raises(UsageError, match=r"pick one: output \(--loss-output\) y\)"):
        api.grad(tmp_path / "m.onnx")
