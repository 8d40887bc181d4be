"""diff --grad: a loss that is NaN or infinite in one model only means the forward passes disagree (here A
takes the square root of a negative product): the gradient differences start in the forward pass, so no
gradient pair is marked as where the error starts (it read '▶ error starts at h_grad (Mul)', a backward
step that is right), and the note says the losses differ, as it does for two finite losses."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as H
from onnx import numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app


def _model(path, w):
    m = make_model([H.make_node("Mul", ["x", "w"], ["h"]), H.make_node("Sqrt", ["h"], ["y"])],
                   [H.make_tensor_value_info("x", T.FLOAT, [2, 3])], [H.make_tensor_value_info("y", T.FLOAT, [2, 3])],
                   [numpy_helper.from_array(np.array([w, w], np.float32), "w")])
    onnx.save(m, str(path))


def test_a_loss_not_finite_on_one_side_marks_no_backward_step(tmp_path):
    a, b, x, js = tmp_path / "a.onnx", tmp_path / "b.onnx", tmp_path / "x.npy", tmp_path / "d.json"
    _model(a, [1.0, -1.0, 2.0])
    _model(b, [1.0, 1.0, 2.0])
    np.save(x, np.ones((2, 3), np.float32))
    r = CliRunner().invoke(app, ["diff", "--grad", str(a), str(b), "--input", f"x={x}", "--all", "--json", str(js)])
    got = json.loads(js.read_text())
    assert got["verdict"] == "fail" and r.exit_code == 1, r.output
    assert got["grad"]["forward_differs"] is True
    assert got["first_failure"] is None, got["first_failure"]
    assert any("the losses differ" in n for n in got["notes"]), got["notes"]
