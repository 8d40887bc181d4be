"""A gradient rule that needs a size the model leaves dynamic (Det's matrix size, a pooling window with
ceil_mode, a Conv's auto_pad) is fixed for a run by --shape; --export keeps the model's dynamic dimensions,
so there --shape fixes nothing. The refusal told the --export user to give --shape, which they had given
(`grad det.onnx --shape x=2x3x3 --export bw.onnx`: 'give the input's shape with --shape NAME=DIMS'); it now
says that the exported model keeps the dimension dynamic, in one line, and --shape still works for a run."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def _model(path, node, dims, opset=17) -> str:
    w = numpy_helper.from_array(np.ones((1, 1, 3), np.float32), "w")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, dims)],
                          [helper.make_tensor_value_info("y", F, None)], [w] if "w" in node.input else [])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, path)
    return str(path)


def _grad(*args):
    return subprocess.run([sys.executable, "-m", "onnxprobe", "grad", *map(str, args), "--wrt", "x"], capture_output=True,
                          text=True)


@pytest.mark.parametrize("node, dims, shape", [
    (helper.make_node("Det", ["x"], ["y"], name="n"), [2, "M", "M"], "x=2x3x3"),
    (helper.make_node("AveragePool", ["x"], ["y"], name="n", kernel_shape=[2], strides=[2], ceil_mode=1), [1, 1, "L"],
     "x=1x1x7"),
    (helper.make_node("Conv", ["x", "w"], ["y"], name="n", auto_pad="SAME_UPPER"), [1, 1, "L"], "x=1x1x5"),
], ids=["det", "averagepool-ceil", "conv-auto-pad"])
def test_export_of_an_unknown_size_does_not_ask_for_shape(tmp_path, node, dims, shape):
    path = _model(tmp_path / "m.onnx", node, dims)
    run = _grad(path, "--shape", shape)
    assert run.returncode == 0, run.stderr  # a run: --shape fixes the size
    out = tmp_path / "bw.onnx"
    r = _grad(path, "--shape", shape, "--export", out)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 1 and len(lines) == 1 and "cannot differentiate" in lines[0], r.stderr
    assert "--export keeps" in lines[0], lines[0]
    assert not out.exists()
