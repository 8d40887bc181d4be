"""An op without a gradient rule (or a rule refusing its use) inside a Scan body: the error named the body's own
formal inputs ('h_in', 'x_t') where the user had asked for 'W', and a refused Einsum diagonal said nothing of the
body it lies in. Oracle: the tensors the user asked for, and the model's structure."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from typer.testing import CliRunner

from onnxprobe.cli.main import app


def _scan_with(tail: onnx.NodeProto, extra=()) -> onnx.ModelProto:
    body = h.make_graph([h.make_node("Add", ["h_in", "x_t"], ["h_out"]), tail], "body",
                        [h.make_tensor_value_info("h_in", T.FLOAT, [2, 2]), h.make_tensor_value_info("x_t", T.FLOAT, [2, 2])],
                        [h.make_tensor_value_info("h_out", T.FLOAT, [2, 2]), h.make_tensor_value_info("y_t", T.FLOAT, None)])
    g = h.make_graph([h.make_node("Mul", ["x", "W"], ["xw"]),
                      h.make_node("Scan", ["h0", "xw"], ["hT", "ys"], body=body, num_scan_inputs=1)], "g",
                     [h.make_tensor_value_info("h0", T.FLOAT, [2, 2]), h.make_tensor_value_info("x", T.FLOAT, [3, 2, 2])],
                     [h.make_tensor_value_info("ys", T.FLOAT, None)], [nh.from_array(np.ones((2, 2), np.float32), "W")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), *extra])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("wrt", [["--wrt", "W"], ["--wrt", "h0"], []])
def test_no_rule_in_a_body_names_the_tensors_asked_for(tmp_path, wrt):
    p = tmp_path / "m.onnx"
    onnx.save(_scan_with(h.make_node("Normalizer", ["h_out"], ["y_t"], domain="ai.onnx.ml", norm="L1"),
                         [h.make_opsetid("ai.onnx.ml", 3)]), p)
    r = CliRunner().invoke(app, ["grad", str(p), *wrt])
    assert r.exit_code == 1, r.output
    line = r.output.strip().splitlines()[-1]
    assert "ai.onnx.ml:Normalizer" in line and "in the body of Scan" in line, line
    between = line.split("it lies between the loss and ")[1].split(". Use")[0]
    asked = wrt[1] if wrt else "W"  # the default targets: the weights
    assert between.startswith(f"'{asked}'") and "h_in" not in between and "x_t" not in between, line


def test_a_rule_refusing_in_a_body_says_which_body(tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(_scan_with(h.make_node("Einsum", ["h_out"], ["y_t"], equation="ii->i")), p)
    r = CliRunner().invoke(app, ["grad", str(p)])
    assert r.exit_code == 1, r.output
    line = r.output.strip().splitlines()[-1]
    assert "Einsum" in line and "(in the body of Scan" in line and "diagonal" in line, line
