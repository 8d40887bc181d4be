"""grad of a Conv or pool whose window attributes are impossible (a kernel of size 0 or -3, a stride of 0,
pads of the wrong length, group 0): onnxruntime refuses such a model, and grad says which node and
attribute in one line (exit 1), never an internal error from numpy while building the backward graph."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()

CASES = {
    "conv_kernel_negative": ("Conv", dict(kernel_shape=[-3, 0])),
    "conv_kernel_zero": ("Conv", dict(kernel_shape=[3, 0])),
    "conv_stride_zero": ("Conv", dict(strides=[0, 1])),
    "conv_dilation_negative": ("Conv", dict(dilations=[1, -1])),
    "conv_pads_short": ("Conv", dict(pads=[1])),
    "conv_pads_negative": ("Conv", dict(pads=[-2, 0, 0, 0])),
    "conv_group_zero": ("Conv", dict(group=0)),
    "avgpool_kernel_zero": ("AveragePool", dict(kernel_shape=[0, 2])),
    "avgpool_stride_zero": ("AveragePool", dict(kernel_shape=[2, 2], strides=[0, 0])),
}


@pytest.mark.parametrize("case", CASES)
def test_impossible_window_is_one_line(tmp_path, case):
    op, attrs = CASES[case]
    inputs, inits, nodes = ["x"], [], []
    if op == "Conv":
        inputs.append("w")
        inits.append(numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w"))
    else:  # a weight before the pool: its gradient goes through the pool's
        inputs = ["t"]
        inits.append(numpy_helper.from_array(np.ones(1, np.float32), "w"))
        nodes.append(helper.make_node("Mul", ["x", "w"], ["t"], name="mul"))
    g = helper.make_graph(nodes + [helper.make_node(op, inputs, ["y"], name="n", **attrs)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    p = tmp_path / "m.onnx"
    p.write_bytes(m.SerializeToString())
    for argv in (["grad", str(p), "--all"], ["grad", str(p), "--all", "--export", str(tmp_path / "g.onnx")]):
        r = runner.invoke(app, argv, env={"ONNXPROBE_DEBUG": ""})
        assert r.exit_code == 1, r.output
        assert "internal error" not in r.output and "Traceback" not in r.output, r.output
        assert len([ln for ln in r.stderr.splitlines() if ln.startswith("onnxprobe: error:")]) == 1, r.stderr
    assert not (tmp_path / "g.onnx").exists()
